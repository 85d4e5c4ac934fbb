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

__kernel void sum_squares(__global const T* x, const int n, __global float* partial,
                          const int slot) {
  __local float acc[REDUCE_GROUP];
  int lid = get_local_id(0);
  float s = 0.0f;
  for (int i = get_global_id(0); i < n; i += get_global_size(0)) {
    float v = (float)LD(x, i);
    s += v * v;
  }
  acc[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int half_ = REDUCE_GROUP / 2; half_ > 0; half_ >>= 1) {
    if (lid < half_) acc[lid] += acc[lid + half_];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) partial[slot + get_group_id(0)] = acc[0];
}

__kernel void scale_by(__global T* x, const int n, __global const float* factor) {
  int i = get_global_id(0);
  if (i < n) ST(x, i, LD(x, i) * (CT)factor[1]);
}

__kernel void clamp_by(__global T* x, const int n, const float limit) {
  int i = get_global_id(0);
  if (i >= n) return;
  const CT v = LD(x, i), lim = (CT)limit;
  ST(x, i, v < -lim ? -lim : (v > lim ? lim : v));  // NaN stays NaN, as PyTorch's clamp
}
