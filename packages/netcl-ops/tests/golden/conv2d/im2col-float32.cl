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

__kernel void conv2d_im2col(__global const T* x, __global T* cols, const int offx,
                            const int row0, const int C, const int H, const int W, const int R,
                            const int S, const int OH, const int OW, const int SH, const int SW,
                            const int PH, const int PW, const int DH, const int DW) {
    const int ow = get_global_id(0), oh = get_global_id(1), row = row0 + get_global_id(2);
    const int RS = R * S, n = row / (C * RS), crs = row - n * (C * RS);
    const int c = crs / RS, rs = crs - c * RS, r = rs / S, s = rs - r * S;
    const int ih = oh * SH - PH + r * DH, iw = ow * SW - PW + s * DW;
    const __global T* xp = x + offx + ((long)n * C + c) * H * W;
    ST(cols, (long)row * OH * OW + oh * OW + ow,
       (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LD(xp, ih * W + iw) : (CT)0);
}
