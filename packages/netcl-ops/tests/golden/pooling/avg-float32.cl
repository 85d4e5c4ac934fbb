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

/* PyTorch's divisor of the window starting at (h0, w0): its part inside the padded input
   with count_include_pad (a ceil_mode window may overhang it), else its part inside the
   input. */
inline int avg_divisor(const int h0, const int w0, const int H, const int W, const int KH,
                       const int KW, const int PH, const int PW, const int include_pad) {
  const int h1 = min(h0 + KH, include_pad ? H + PH : H);
  const int w1 = min(w0 + KW, include_pad ? W + PW : W);
  const int hs = include_pad ? h0 : max(h0, 0), ws = include_pad ? w0 : max(w0, 0);
  return max((h1 - hs) * (w1 - ws), 1);
}

__kernel void avg_pool(__global const T* x, const long xo, __global T* y, const long yo,
                       const int total, const int H, const int W, const int OH, const int OW,
                       const int KH, const int KW, const int SH, const int SW, const int PH,
                       const int PW, const int include_pad) {
  int o = get_global_id(0);
  if (o >= total) return;
  x += xo; y += yo;
  int ow = o % OW, oh = (o / OW) % OH, plane = o / (OW * OH);
  int h0 = oh * SH - PH, w0 = ow * SW - PW;
  const __global T* xp = x + (long)plane * H * W;
  CT acc = 0;
  for (int ih = max(h0, 0); ih < min(h0 + KH, H); ++ih)
    for (int iw = max(w0, 0); iw < min(w0 + KW, W); ++iw) acc += LD(xp, ih * W + iw);
  ST(y, o, acc / (CT)avg_divisor(h0, w0, H, W, KH, KW, PH, PW, include_pad));
}

__kernel void avg_pool_backward(__global const T* g, const long go, __global T* dx,
                                const long dxo, const int total, const int H, const int W,
                                const int OH, const int OW, const int KH, const int KW,
                                const int SH, const int SW, const int PH, const int PW,
                                const int include_pad) {
  int i = get_global_id(0);
  if (i >= total) return;
  g += go; dx += dxo;
  int iw = i % W, ih = (i / W) % H, plane = i / (W * H);
  CT acc = 0;
  for (int kh = 0; kh < KH; ++kh) {
    int th = ih + PH - kh;
    if (th < 0 || th % SH) continue;
    int oh = th / SH;
    if (oh >= OH) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int tw = iw + PW - kw;
      if (tw < 0 || tw % SW) continue;
      int ow = tw / SW;
      if (ow >= OW) continue;
      int count = avg_divisor(oh * SH - PH, ow * SW - PW, H, W, KH, KW, PH, PW, include_pad);
      acc += LD(g, ((long)plane * OH + oh) * OW + ow) / (CT)count;
    }
  }
  ST(dx, i, acc);
}

__kernel void adaptive_avg(__global const T* x, const long xo, __global T* y, const long yo,
                           const int total, const int H, const int W, const int OH,
                           const int OW) {
  int o = get_global_id(0);
  if (o >= total) return;
  x += xo; y += yo;
  int ow = o % OW, oh = (o / OW) % OH, plane = o / (OW * OH);
  int h0 = (oh * H) / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
  int w0 = (ow * W) / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
  const __global T* xp = x + (long)plane * H * W;
  CT acc = 0;
  for (int ih = h0; ih < h1; ++ih)
    for (int iw = w0; iw < w1; ++iw) acc += LD(xp, ih * W + iw);
  ST(y, o, acc / (CT)((h1 - h0) * (w1 - w0)));
}

__kernel void adaptive_avg_backward(__global const T* g, const long go, __global T* dx,
                                    const long dxo, const int total, const int H, const int W,
                                    const int OH, const int OW) {
  int i = get_global_id(0);
  if (i >= total) return;
  g += go; dx += dxo;
  int iw = i % W, ih = (i / W) % H, plane = i / (W * H);
  CT acc = 0;
  for (int oh = (ih * OH) / H; oh < OH && (oh * H) / OH <= ih; ++oh) {
    int h0 = (oh * H) / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
    if (ih < h0 || ih >= h1) continue;
    for (int ow = (iw * OW) / W; ow < OW && (ow * W) / OW <= iw; ++ow) {
      int w0 = (ow * W) / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
      if (iw < w0 || iw >= w1) continue;
      acc += LD(g, ((long)plane * OH + oh) * OW + ow) / (CT)((h1 - h0) * (w1 - w0));
    }
  }
  ST(dx, i, acc);
}
