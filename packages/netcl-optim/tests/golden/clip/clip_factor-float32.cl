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

__kernel void clip_factor(__global const float* partial, const int count,
                          __global float* out, const float max_norm) {
  // one work-group: out[0] = total norm, out[1] = min(1, max_norm / (norm + 1e-6))
  __local float acc[REDUCE_GROUP];
  int lid = get_local_id(0);
  float s = 0.0f;
  for (int i = lid; i < count; i += REDUCE_GROUP) s += partial[i];
  acc[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int half_ = REDUCE_GROUP / 2; half_ > 0; half_ >>= 1) {
    if (lid < half_) acc[lid] += acc[lid + half_];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    float norm = sqrt(acc[0]);
    out[0] = norm;
    out[1] = fmin(1.0f, max_norm / (norm + 1e-6f));
  }
}
