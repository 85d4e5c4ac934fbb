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

__kernel void conv2d_naive(__global const T* x, __global const T* w, __global const T* bias,
                           __global T* y, const int total, const int C, const int H, const int W,
                           const int K, const int R, const int S, const int OH, const int OW,
                           const int SH, const int SW, const int PH, const int PW, const int DH,
                           const int DW, const int G, const int has_bias) {
    const int o = get_global_id(0);
    if (o >= total) return;
    const int ow = o % OW, oh = (o / OW) % OH, k = (o / (OW * OH)) % K, n = o / (OW * OH * K);
    const int cg = C / G, g = k / (K / G);
    CT acc = has_bias ? LD(bias, k) : (CT)0;
    for (int c = 0; c < cg; ++c) {
        const __global T* xp = x + ((long)n * C + g * cg + c) * H * W;
        const __global T* wp = w + ((long)k * cg + c) * R * S;
        for (int r = 0; r < R; ++r) {
            const int ih = oh * SH - PH + r * DH;
            if (ih < 0 || ih >= H) continue;
            for (int s = 0; s < S; ++s) {
                const int iw = ow * SW - PW + s * DW;
                if (iw >= 0 && iw < W) acc += LD(xp, ih * W + iw) * LD(wp, r * S + s);
            }
        }
    }
    ST(y, o, acc);
}
