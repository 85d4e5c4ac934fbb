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
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))

#define GROUP 256
// Every tensor argument comes with its element offset (x, xo): each kernel first moves its
// pointers there, so views with an offset work as in every other op.

// Sum of LD(x, base(j)) over j < count, reduced across the work-group.
inline CT group_sum(CT v, __local CT* acc) {
  int lid = get_local_id(0);
  acc[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = GROUP / 2; s > 0; s >>= 1) {
    if (lid < s) acc[lid] += acc[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  CT r = acc[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// One work-group per channel: batch mean, 1/std, and the running-statistics update.
__kernel void bn_stats(__global const T* x, const long xo, __global CT* mean, const long meano,
                       __global CT* invstd, const long invstdo, __global T* run_mean,
                       const long run_meano, __global T* run_var, const long run_varo,
                       const int N, const int C, const int HW, const CT eps, const CT momentum,
                       const int update_running) {
  __local CT acc[GROUP];
  x += xo; mean += meano; invstd += invstdo; run_mean += run_meano; run_var += run_varo;
  int c = get_group_id(0), lid = get_local_id(0);
  int M = N * HW;
  CT s = (CT)0;
  for (int j = lid; j < M; j += GROUP) s += LD(x, ((long)(j / HW) * C + c) * HW + j % HW);
  CT mu = group_sum(s, acc) / M;
  CT q = (CT)0;
  for (int j = lid; j < M; j += GROUP) {
    CT d = LD(x, ((long)(j / HW) * C + c) * HW + j % HW) - mu;
    q += d * d;
  }
  CT var = group_sum(q, acc) / M;
  if (lid == 0) {
    mean[c] = mu;
    invstd[c] = rsqrt(var + eps);
    if (update_running) {
      CT unbiased = M > 1 ? var * M / (M - 1) : var;
      ST(run_mean, c, ((CT)1 - momentum) * LD(run_mean, c) + momentum * mu);
      ST(run_var, c, ((CT)1 - momentum) * LD(run_var, c) + momentum * unbiased);
    }
  }
}

// y = (x - mean) * invstd * w + b (optionally ReLU); eval mode reads the running variance.
__kernel void bn_apply(__global const T* x, const long xo, __global T* y, const long yo,
                       __global const CT* mean, const long meano, __global const CT* invstd,
                       const long invstdo, __global const T* run_mean, const long run_meano,
                       __global const T* run_var, const long run_varo, __global const T* w,
                       const long wo, __global const T* b, const long bo, const int total,
                       const int C, const int HW, const CT eps, const int use_running,
                       const int affine, const int relu) {
  x += xo; y += yo; mean += meano; invstd += invstdo; run_mean += run_meano;
  run_var += run_varo; w += wo; b += bo;
  int i = get_global_id(0);
  if (i >= total) return;
  int c = (i / HW) % C;
  CT mu = use_running ? (CT)LD(run_mean, c) : mean[c];
  CT inv = use_running ? rsqrt((CT)LD(run_var, c) + eps) : invstd[c];
  CT v = ((CT)LD(x, i) - mu) * inv;
  if (affine) v = v * (CT)LD(w, c) + (CT)LD(b, c);
  if (relu) v = fmax(v, (CT)0);
  ST(y, i, v);
}

// One work-group per channel: sum(g) and sum(g * xhat) -> grad_bias, grad_weight.
__kernel void bn_backward_reduce(__global const T* g, const long go, __global const T* x,
                                 const long xo, __global const CT* mean, const long meano,
                                 __global const CT* invstd, const long invstdo,
                                 __global CT* sum_g, const long sum_go, __global CT* sum_gx,
                                 const long sum_gxo, const int N, const int C, const int HW) {
  __local CT acc[GROUP];
  g += go; x += xo; mean += meano; invstd += invstdo; sum_g += sum_go; sum_gx += sum_gxo;
  int c = get_group_id(0), lid = get_local_id(0);
  int M = N * HW;
  CT mu = mean[c], inv = invstd[c];
  CT s1 = (CT)0, s2 = (CT)0;
  for (int j = lid; j < M; j += GROUP) {
    long i = ((long)(j / HW) * C + c) * HW + j % HW;
    CT gv = LD(g, i);
    s1 += gv;
    s2 += gv * ((CT)LD(x, i) - mu) * inv;
  }
  CT t1 = group_sum(s1, acc);
  CT t2 = group_sum(s2, acc);
  if (lid == 0) { sum_g[c] = t1; sum_gx[c] = t2; }
}

__kernel void bn_backward_dx(__global const T* g, const long go, __global const T* x,
                             const long xo, __global T* dx, const long dxo,
                             __global const CT* mean, const long meano,
                             __global const CT* invstd, const long invstdo,
                             __global const CT* sum_g, const long sum_go,
                             __global const CT* sum_gx, const long sum_gxo, __global const T* w,
                             const long wo, const int total, const int C, const int HW,
                             const int M, const int affine) {
  g += go; x += xo; dx += dxo; mean += meano; invstd += invstdo; sum_g += sum_go;
  sum_gx += sum_gxo; w += wo;
  int i = get_global_id(0);
  if (i >= total) return;
  int c = (i / HW) % C;
  CT inv = invstd[c];
  CT xhat = ((CT)LD(x, i) - mean[c]) * inv;
  CT scale = affine ? (CT)LD(w, c) * inv : inv;
  ST(dx, i, scale * ((CT)LD(g, i) - sum_g[c] / M - xhat * sum_gx[c] / M));
}

// One work-group per row of D elements.
__kernel void ln_forward(__global const T* x, const long xo, __global T* y, const long yo,
                         __global CT* mean, const long meano, __global CT* rstd,
                         const long rstdo, __global const T* w, const long wo,
                         __global const T* b, const long bo, const int D, const CT eps,
                         const int affine) {
  __local CT acc[GROUP];
  x += xo; y += yo; mean += meano; rstd += rstdo; w += wo; b += bo;
  int r = get_group_id(0), lid = get_local_id(0);
  const __global T* xr = x + (long)r * D;
  CT s = (CT)0;
  for (int j = lid; j < D; j += GROUP) s += LD(xr, j);
  CT mu = group_sum(s, acc) / D;
  CT q = (CT)0;
  for (int j = lid; j < D; j += GROUP) { CT d = LD(xr, j) - mu; q += d * d; }
  CT inv = rsqrt(group_sum(q, acc) / D + eps);
  for (int j = lid; j < D; j += GROUP) {
    CT v = ((CT)LD(xr, j) - mu) * inv;
    if (affine) v = v * (CT)LD(w, j) + (CT)LD(b, j);
    ST(y, (long)r * D + j, v);
  }
  if (lid == 0) { mean[r] = mu; rstd[r] = inv; }
}

__kernel void ln_backward_dx(__global const T* g, const long go, __global const T* x,
                             const long xo, __global T* dx, const long dxo,
                             __global const CT* mean, const long meano, __global const CT* rstd,
                             const long rstdo, __global const T* w, const long wo, const int D,
                             const int affine) {
  __local CT acc[GROUP];
  g += go; x += xo; dx += dxo; mean += meano; rstd += rstdo; w += wo;
  int r = get_group_id(0), lid = get_local_id(0);
  long base = (long)r * D;
  CT mu = mean[r], inv = rstd[r];
  CT s1 = (CT)0, s2 = (CT)0;
  for (int j = lid; j < D; j += GROUP) {
    CT dxh = (CT)LD(g, base + j) * (affine ? (CT)LD(w, j) : (CT)1);
    s1 += dxh;
    s2 += dxh * ((CT)LD(x, base + j) - mu) * inv;
  }
  CT m1 = group_sum(s1, acc) / D;
  CT m2 = group_sum(s2, acc) / D;
  for (int j = lid; j < D; j += GROUP) {
    CT xhat = ((CT)LD(x, base + j) - mu) * inv;
    CT dxh = (CT)LD(g, base + j) * (affine ? (CT)LD(w, j) : (CT)1);
    ST(dx, base + j, inv * (dxh - m1 - xhat * m2));
  }
}

// One work-item per column: grad_weight = sum_r g * xhat, grad_bias = sum_r g.
__kernel void ln_backward_params(__global const T* g, const long go, __global const T* x,
                                 const long xo, __global const CT* mean, const long meano,
                                 __global const CT* rstd, const long rstdo, __global T* gw,
                                 const long gwo, __global T* gb, const long gbo, const int R,
                                 const int D) {
  g += go; x += xo; mean += meano; rstd += rstdo; gw += gwo; gb += gbo;
  int j = get_global_id(0);
  if (j >= D) return;
  CT sw = (CT)0, sb = (CT)0;
  for (int r = 0; r < R; ++r) {
    CT gv = LD(g, (long)r * D + j);
    sb += gv;
    sw += gv * ((CT)LD(x, (long)r * D + j) - mean[r]) * rstd[r];
  }
  ST(gw, j, sw);
  ST(gb, j, sb);
}
