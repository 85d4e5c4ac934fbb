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
#define T float
#define CT float
#define S float
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define REDUCE_GROUP 256

__kernel void optim_tick(__global float* steps, __global const float* hyper,
                         __global const int* index, const int count,
                         __global const int* skip) {
  // one work item per parameter with a gradient: (t, 1 - b1^t, 1 - b2^t) for its next update
  int i = get_global_id(0);
  if (i >= count || skip[0]) return;
  const int k = index[i];
  const float t = steps[3 * k] + 1.0f;
  steps[3 * k] = t;
  steps[3 * k + 1] = -expm1(t * log1p(-hyper[2 * k]));
  steps[3 * k + 2] = -expm1(t * log1p(-hyper[2 * k + 1]));
}
