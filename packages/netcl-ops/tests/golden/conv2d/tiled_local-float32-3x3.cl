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

#define R 3
#define S 3
#define SH 1
#define SW 1
#define DH 1
#define DW 1
#define TX 16
#define TY 8
#define KB 4
#define PATCH_H 10
#define PATCH_W 18
__kernel __attribute__((reqd_work_group_size(TX, TY, 1)))
void conv2d_tiled_local(__global const T* x, __global const T* w, __global const T* bias,
                        __global T* y, const int C, const int H, const int W, const int K,
                        const int OH, const int OW, const int PH, const int PW, const int G,
                        const int has_bias) {
    __local CT patch[PATCH_H * PATCH_W];
    __local CT wt[KB * R * S];
    const int lx = get_local_id(0), ly = get_local_id(1), lid = ly * TX + lx;
    const int ow = get_global_id(0), oh = get_global_id(1);
    const int kg = K / G, cg = C / G, kblocks = (kg + KB - 1) / KB;
    const int z = get_global_id(2);
    const int n = z / (G * kblocks), g = (z / kblocks) % G, k0 = g * kg + (z % kblocks) * KB;
    const int ih0 = get_group_id(1) * TY * SH - PH, iw0 = get_group_id(0) * TX * SW - PW;
    CT acc[KB];
    #pragma unroll
    for (int q = 0; q < KB; ++q) acc[q] = 0;
    for (int c = 0; c < cg; ++c) {
        const __global T* xp = x + ((long)n * C + g * cg + c) * H * W;
        for (int l = lid; l < PATCH_H * PATCH_W; l += TX * TY) {
            const int py = l / PATCH_W, px = l - py * PATCH_W;
            const int ih = ih0 + py, iw = iw0 + px;
            patch[l] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LD(xp, ih * W + iw) : (CT)0;
        }
        for (int l = lid; l < KB * R * S; l += TX * TY) {
            const int q = l / (R * S), rs = l - q * (R * S);
            const int k = k0 + q;
            wt[l] = (k < (g + 1) * kg) ? LD(w, ((long)k * cg + c) * R * S + rs) : (CT)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        #pragma unroll
        for (int r = 0; r < R; ++r)
            #pragma unroll
            for (int s = 0; s < S; ++s) {
                const CT v = patch[(ly * SH + r * DH) * PATCH_W + lx * SW + s * DW];
                #pragma unroll
                for (int q = 0; q < KB; ++q) acc[q] += v * wt[(q * R + r) * S + s];
            }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (oh >= OH || ow >= OW) return;
    #pragma unroll
    for (int q = 0; q < KB; ++q) {
        const int k = k0 + q;
        if (k < (g + 1) * kg)
            ST(y, (((long)n * K + k) * OH + oh) * OW + ow, acc[q] + (has_bias ? LD(bias, k) : 0));
    }
}
