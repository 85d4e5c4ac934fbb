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
