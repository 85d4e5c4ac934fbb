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
#define CT double
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))

#define GROUP 256
// Sum of LD(x, base(j)) over j < count, reduced across the work-group.
inline float group_sum(float v, __local float* acc) {
  int lid = get_local_id(0);
  acc[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = GROUP / 2; s > 0; s >>= 1) {
    if (lid < s) acc[lid] += acc[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float r = acc[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// One work-group per channel: batch mean, 1/std, and the running-statistics update.
__kernel void bn_stats(__global const T* x, __global float* mean, __global float* invstd,
                       __global T* run_mean, __global T* run_var, const int N, const int C,
                       const int HW, const float eps, const float momentum,
                       const int update_running) {
  __local float acc[GROUP];
  int c = get_group_id(0), lid = get_local_id(0);
  int M = N * HW;
  float s = 0.0f;
  for (int j = lid; j < M; j += GROUP) s += LD(x, ((long)(j / HW) * C + c) * HW + j % HW);
  float mu = group_sum(s, acc) / M;
  float q = 0.0f;
  for (int j = lid; j < M; j += GROUP) {
    float d = LD(x, ((long)(j / HW) * C + c) * HW + j % HW) - mu;
    q += d * d;
  }
  float var = group_sum(q, acc) / M;
  if (lid == 0) {
    mean[c] = mu;
    invstd[c] = rsqrt(var + eps);
    if (update_running) {
      float unbiased = M > 1 ? var * M / (M - 1) : var;
      ST(run_mean, c, (1.0f - momentum) * LD(run_mean, c) + momentum * mu);
      ST(run_var, c, (1.0f - momentum) * LD(run_var, c) + momentum * unbiased);
    }
  }
}

// y = (x - mean) * invstd * w + b (optionally ReLU); eval mode reads the running variance.
__kernel void bn_apply(__global const T* x, __global T* y, __global const float* mean,
                       __global const float* invstd, __global const T* run_mean,
                       __global const T* run_var, __global const T* w, __global const T* b,
                       const int total, const int C, const int HW, const float eps,
                       const int use_running, const int affine, const int relu) {
  int i = get_global_id(0);
  if (i >= total) return;
  int c = (i / HW) % C;
  float mu = use_running ? (float)LD(run_mean, c) : mean[c];
  float inv = use_running ? rsqrt((float)LD(run_var, c) + eps) : invstd[c];
  float v = ((float)LD(x, i) - mu) * inv;
  if (affine) v = v * (float)LD(w, c) + (float)LD(b, c);
  if (relu) v = fmax(v, 0.0f);
  ST(y, i, v);
}

// One work-group per channel: sum(g) and sum(g * xhat) -> grad_bias, grad_weight.
__kernel void bn_backward_reduce(__global const T* g, __global const T* x,
                                 __global const float* mean, __global const float* invstd,
                                 __global float* sum_g, __global float* sum_gx, const int N,
                                 const int C, const int HW) {
  __local float acc[GROUP];
  int c = get_group_id(0), lid = get_local_id(0);
  int M = N * HW;
  float mu = mean[c], inv = invstd[c];
  float s1 = 0.0f, s2 = 0.0f;
  for (int j = lid; j < M; j += GROUP) {
    long i = ((long)(j / HW) * C + c) * HW + j % HW;
    float gv = LD(g, i);
    s1 += gv;
    s2 += gv * ((float)LD(x, i) - mu) * inv;
  }
  float t1 = group_sum(s1, acc);
  float t2 = group_sum(s2, acc);
  if (lid == 0) { sum_g[c] = t1; sum_gx[c] = t2; }
}

__kernel void bn_backward_dx(__global const T* g, __global const T* x, __global T* dx,
                             __global const float* mean, __global const float* invstd,
                             __global const float* sum_g, __global const float* sum_gx,
                             __global const T* w, const int total, const int C, const int HW,
                             const int M, const int affine) {
  int i = get_global_id(0);
  if (i >= total) return;
  int c = (i / HW) % C;
  float inv = invstd[c];
  float xhat = ((float)LD(x, i) - mean[c]) * inv;
  float scale = affine ? (float)LD(w, c) * inv : inv;
  ST(dx, i, scale * ((float)LD(g, i) - sum_g[c] / M - xhat * sum_gx[c] / M));
}

// One work-group per row of D elements.
__kernel void ln_forward(__global const T* x, __global T* y, __global float* mean,
                         __global float* rstd, __global const T* w, __global const T* b,
                         const int D, const float eps, const int affine) {
  __local float acc[GROUP];
  int r = get_group_id(0), lid = get_local_id(0);
  const __global T* xr = x + (long)r * D;
  float s = 0.0f;
  for (int j = lid; j < D; j += GROUP) s += LD(xr, j);
  float mu = group_sum(s, acc) / D;
  float q = 0.0f;
  for (int j = lid; j < D; j += GROUP) { float d = LD(xr, j) - mu; q += d * d; }
  float inv = rsqrt(group_sum(q, acc) / D + eps);
  for (int j = lid; j < D; j += GROUP) {
    float v = ((float)LD(xr, j) - mu) * inv;
    if (affine) v = v * (float)LD(w, j) + (float)LD(b, j);
    ST(y, (long)r * D + j, v);
  }
  if (lid == 0) { mean[r] = mu; rstd[r] = inv; }
}

__kernel void ln_backward_dx(__global const T* g, __global const T* x, __global T* dx,
                             __global const float* mean, __global const float* rstd,
                             __global const T* w, const int D, const int affine) {
  __local float acc[GROUP];
  int r = get_group_id(0), lid = get_local_id(0);
  long base = (long)r * D;
  float mu = mean[r], inv = rstd[r];
  float s1 = 0.0f, s2 = 0.0f;
  for (int j = lid; j < D; j += GROUP) {
    float dxh = (float)LD(g, base + j) * (affine ? (float)LD(w, j) : 1.0f);
    s1 += dxh;
    s2 += dxh * ((float)LD(x, base + j) - mu) * inv;
  }
  float m1 = group_sum(s1, acc) / D;
  float m2 = group_sum(s2, acc) / D;
  for (int j = lid; j < D; j += GROUP) {
    float xhat = ((float)LD(x, base + j) - mu) * inv;
    float dxh = (float)LD(g, base + j) * (affine ? (float)LD(w, j) : 1.0f);
    ST(dx, base + j, inv * (dxh - m1 - xhat * m2));
  }
}

// One work-item per column: grad_weight = sum_r g * xhat, grad_bias = sum_r g.
__kernel void ln_backward_params(__global const T* g, __global const T* x,
                                 __global const float* mean, __global const float* rstd,
                                 __global T* gw, __global T* gb, const int R, const int D) {
  int j = get_global_id(0);
  if (j >= D) return;
  float sw = 0.0f, sb = 0.0f;
  for (int r = 0; r < R; ++r) {
    float gv = LD(g, (long)r * D + j);
    sb += gv;
    sw += gv * ((float)LD(x, (long)r * D + j) - mean[r]) * rstd[r];
  }
  ST(gw, j, sw);
  ST(gb, j, sb);
}
