#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#ifndef NETCL_PRIMITIVES
#define NETCL_PRIMITIVES
#define NETCL_LOAD(p, i) ((p)[(i)])
#define NETCL_STORE(p, i, v) ((p)[(i)] = (v))
#define NETCL_LOAD_HALF(p, i) vload_half((i), (p))
#define NETCL_STORE_HALF(p, i, v) vstore_half((v), (i), (p))
#define NETCL_ADD(a, b) ((a) + (b))
#define NETCL_SUB(a, b) ((a) - (b))
#define NETCL_MUL(a, b) ((a) * (b))
#define NETCL_DIV(a, b) ((a) / (b))
#define NETCL_NEG(a) (-(a))
#define NETCL_SQR(a) ((a) * (a))
#define NETCL_RELU(x) ((x) > 0 ? (x) : 0)
#define NETCL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define NETCL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NETCL_SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#endif
#define T double
#define CT double
#define S double
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define REDUCE_GROUP 256

void nadam_item(__global T* p, __global const T* g, __global S* m, __global S* v,
                __global S* mu_product, __global const float* steps, const int i,
                const int index, const float lr, const float b1, const float b2,
                const float eps, const float wd, const float psi_log, const int decoupled) {
  const float tf = steps[3 * index];
  const int t = (int)tf;
  const CT bc2 = (CT)steps[3 * index + 2];
  const CT mu = (CT)b1 * ((CT)1 - (CT)0.5 * exp((CT)tf * (CT)psi_log));
  const CT mu_next = (CT)b1 * ((CT)1 - (CT)0.5 * exp(((CT)tf + (CT)1) * (CT)psi_log));
  const CT prod = (CT)mu_product[(t - 1) & 1] * mu;  // NOTE [ NAdam's momentum product ]
  if (i == 0) mu_product[t & 1] = (S)prod;
  CT param = LD(p, i);
  CT grad = LD(g, i);
  if (decoupled) param *= (CT)(1.0f - lr * wd); else grad += (CT)wd * param;
  const CT mi = (CT)b1 * m[i] + (CT)(1.0f - b1) * grad;
  const CT vi = (CT)b2 * v[i] + (CT)(1.0f - b2) * grad * grad;
  m[i] = (S)mi;
  v[i] = (S)vi;
  const CT denom = sqrt(vi / bc2) + (CT)eps;
  param -= (CT)lr * ((CT)1 - mu) / ((CT)1 - prod) * grad / denom;
  param -= (CT)lr * mu_next / ((CT)1 - prod * mu_next) * mi / denom;
  ST(p, i, param);
}

__kernel void nadam(__global T* p, __global const T* g, __global S* m, __global S* v,
                    __global S* mu_product, __global const float* steps,
                    __global const int* skip, const int n, const int index, const float lr,
                    const float b1, const float b2, const float eps, const float wd,
                    const float psi_log, const int decoupled) {
  const int i = get_global_id(0);
  if (i >= n || skip[0]) return;
  nadam_item(p, g, m, v, mu_product, steps, i, index, lr, b1, b2, eps, wd, psi_log, decoupled);
}
