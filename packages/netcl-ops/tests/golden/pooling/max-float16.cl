#pragma OPENCL EXTENSION cl_khr_fp16 : enable
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
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((v), (i), (p))

__kernel void max_pool(__global const T* x, const long xo, __global T* y, const long yo,
                       __global long* idx, const long io, const int total, const int H,
                       const int W, const int OH, const int OW, const int KH, const int KW,
                       const int SH, const int SW, const int PH, const int PW, const int DH,
                       const int DW) {
  int o = get_global_id(0);
  if (o >= total) return;
  x += xo; y += yo; idx += io;
  int ow = o % OW, oh = (o / OW) % OH, plane = o / (OW * OH);
  const __global T* xp = x + (long)plane * H * W;
  CT best = -INFINITY; long best_i = -1;
  for (int kh = 0; kh < KH; ++kh) {
    int ih = oh * SH - PH + kh * DH;
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int iw = ow * SW - PW + kw * DW;
      if (iw < 0 || iw >= W) continue;
      CT v = LD(xp, ih * W + iw);
      if (best_i < 0 || v > best || (isnan(v) && !isnan(best))) { best = v; best_i = ih * W + iw; }
    }
  }
  ST(y, o, best);
  idx[o] = best_i;
}

__kernel void max_pool_backward(__global const T* g, const long go, __global const long* idx,
                                const long io, __global T* dx, const long dxo,
                                const int total, const int H, const int W, const int OH,
                                const int OW, const int KH, const int KW, const int SH,
                                const int SW, const int PH, const int PW, const int DH,
                                const int DW) {
  int i = get_global_id(0);
  if (i >= total) return;
  g += go; idx += io; dx += dxo;
  int iw = i % W, ih = (i / W) % H, plane = i / (W * H);
  long self_i = ih * W + iw;
  CT acc = 0;
  for (int kh = 0; kh < KH; ++kh) {
    int th = ih + PH - kh * DH;
    if (th < 0 || th % SH) continue;
    int oh = th / SH;
    if (oh >= OH) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int tw = iw + PW - kw * DW;
      if (tw < 0 || tw % SW) continue;
      int ow = tw / SW;
      if (ow >= OW) continue;
      long o = ((long)plane * OH + oh) * OW + ow;
      if (idx[o] == self_i) acc += LD(g, o);
    }
  }
  ST(dx, i, acc);
}
