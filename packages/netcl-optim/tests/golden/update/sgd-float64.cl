#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#ifndef NETCL_PRIMITIVES
#define NETCL_PRIMITIVES
#define LOAD(p, i) ((p)[(i)])
#define STORE(p, i, v) ((p)[(i)] = (v))
#define LOAD_HALF(p, i) vload_half((i), (p))
#define STORE_HALF(p, i, v) vstore_half((v), (i), (p))
#define ADD(a, b) ((a) + (b))
#define SUB(a, b) ((a) - (b))
#define MUL(a, b) ((a) * (b))
#define DIV(a, b) ((a) / (b))
#define NEG(a) (-(a))
#define SQR(a) ((a) * (a))
#define RELU(x) ((x) > 0 ? (x) : 0)
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#endif
#define T double
#define REDUCE_GROUP 256

__kernel void sgd(__global T* p, __global const T* g, __global T* buf, const int n,
                  const float lr, const float momentum, const float dampening,
                  const float wd, const int nesterov, const int first) {
  int i = get_global_id(0);
  if (i >= n) return;
  T grad = g[i] + (T)wd * p[i];
  if (momentum != 0.0f) {
    T b = first ? grad : (T)momentum * buf[i] + (T)(1.0f - dampening) * grad;
    buf[i] = b;
    grad = nesterov ? grad + (T)momentum * b : b;
  }
  p[i] -= (T)lr * grad;
}
