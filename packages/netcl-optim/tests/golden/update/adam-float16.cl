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
#define T half
#define CT float
#define S float
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((v), (i), (p))
#define REDUCE_GROUP 256

void adam_item(__global T* p, __global const T* g, __global S* m, __global S* v,
               __global const float* steps, const int i, const int index, const float lr,
               const float b1, const float b2, const float eps, const float wd,
               const int decoupled) {
  const CT bc1 = (CT)steps[3 * index + 1], bc2 = (CT)steps[3 * index + 2];  // 1 - b^t
  CT param = LD(p, i);
  CT grad = LD(g, i);
  if (decoupled) param *= (CT)(1.0f - lr * wd); else grad += (CT)wd * param;
  const CT mi = (CT)b1 * m[i] + (CT)(1.0f - b1) * grad;
  const CT vi = (CT)b2 * v[i] + (CT)(1.0f - b2) * grad * grad;
  m[i] = (S)mi;
  v[i] = (S)vi;
  ST(p, i, param - (CT)lr * (mi / bc1) / (sqrt(vi / bc2) + (CT)eps));
}

__kernel void adam(__global T* p, __global const T* g, __global S* m, __global S* v,
                   __global const float* steps, __global const int* skip, const int n,
                   const int index, const float lr, const float b1, const float b2,
                   const float eps, const float wd, const int decoupled) {
  const int i = get_global_id(0);
  if (i >= n || skip[0]) return;
  adam_item(p, g, m, v, steps, i, index, lr, b1, b2, eps, wd, decoupled);
}
