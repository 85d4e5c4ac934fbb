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

__kernel void conv2d_col2im(__global const T* dcols, __global T* dx, const int offdx,
                            const int row0, const int C, const int H, const int W, const int R,
                            const int S, const int OH, const int OW, const int SH, const int SW,
                            const int PH, const int PW, const int DH, const int DW) {
    const int iw = get_global_id(0), ih = get_global_id(1), nc = row0 + get_global_id(2);
    const int P = OH * OW;
    const __global T* dc = dcols + (long)nc * R * S * P;
    CT acc = 0;
    for (int r = 0; r < R; ++r) {
        const int th = ih + PH - r * DH;
        if (th < 0 || th % SH) continue;
        const int oh = th / SH;
        if (oh >= OH) continue;
        for (int s = 0; s < S; ++s) {
            const int tw = iw + PW - s * DW;
            if (tw < 0 || tw % SW) continue;
            const int ow = tw / SW;
            if (ow < OW) acc += LD(dc, (long)(r * S + s) * P + oh * OW + ow);
        }
    }
    ST(dx, (long)offdx + ((long)nc * H + ih) * W + iw, acc);
}
