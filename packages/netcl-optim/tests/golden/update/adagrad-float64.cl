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

void adagrad_item(__global T* p, __global const T* g, __global S* acc,
                  __global const float* steps, const int i, const int index, const float lr,
                  const float lr_decay, const float eps, const float wd) {
  const CT t = (CT)steps[3 * index];
  const CT clr = (CT)lr / ((CT)1 + (t - (CT)1) * (CT)lr_decay);
  const CT param = LD(p, i);
  const CT grad = LD(g, i) + (CT)wd * param;
  const CT s = acc[i] + grad * grad;
  acc[i] = (S)s;
  ST(p, i, param - clr * grad / (sqrt(s) + (CT)eps));
}

__kernel void adagrad(__global T* p, __global const T* g, __global S* acc,
                      __global const float* steps, __global const int* skip, const int n,
                      const int index, const float lr, const float lr_decay, const float eps,
                      const float wd) {
  const int i = get_global_id(0);
  if (i >= n || skip[0]) return;
  adagrad_item(p, g, acc, steps, i, index, lr, lr_decay, eps, wd);
}
