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

// Winograd F(4x4, 3x3), generated from its transform matrices (_conv_kernels.winograd_source)
// U[xi][k][c] = (G g G^T)[xi] for the 3x3 filter g at i = k * C + c (rotated by 180 degrees
// when flip: the data gradient's filters)
void winograd_filter(const __global T* w, const int flip, __global T* U, const long i,
                     const long KC) {
    CT g[3][3], t[6][3];
    #pragma unroll
    for (int j = 0; j < 9; ++j) g[j / 3][j % 3] = LD(w, flip ? 8 - j : j);
    t[0][0] = ((CT)1 / (CT)4) * g[0][0];
    t[0][1] = ((CT)1 / (CT)4) * g[0][1];
    t[0][2] = ((CT)1 / (CT)4) * g[0][2];
    t[1][0] = -((CT)1 / (CT)6) * g[0][0] - ((CT)1 / (CT)6) * g[1][0] - ((CT)1 / (CT)6) * g[2][0];
    t[1][1] = -((CT)1 / (CT)6) * g[0][1] - ((CT)1 / (CT)6) * g[1][1] - ((CT)1 / (CT)6) * g[2][1];
    t[1][2] = -((CT)1 / (CT)6) * g[0][2] - ((CT)1 / (CT)6) * g[1][2] - ((CT)1 / (CT)6) * g[2][2];
    t[2][0] = -((CT)1 / (CT)6) * g[0][0] + ((CT)1 / (CT)6) * g[1][0] - ((CT)1 / (CT)6) * g[2][0];
    t[2][1] = -((CT)1 / (CT)6) * g[0][1] + ((CT)1 / (CT)6) * g[1][1] - ((CT)1 / (CT)6) * g[2][1];
    t[2][2] = -((CT)1 / (CT)6) * g[0][2] + ((CT)1 / (CT)6) * g[1][2] - ((CT)1 / (CT)6) * g[2][2];
    t[3][0] = ((CT)1 / (CT)24) * g[0][0] + ((CT)1 / (CT)12) * g[1][0] + ((CT)1 / (CT)6) * g[2][0];
    t[3][1] = ((CT)1 / (CT)24) * g[0][1] + ((CT)1 / (CT)12) * g[1][1] + ((CT)1 / (CT)6) * g[2][1];
    t[3][2] = ((CT)1 / (CT)24) * g[0][2] + ((CT)1 / (CT)12) * g[1][2] + ((CT)1 / (CT)6) * g[2][2];
    t[4][0] = ((CT)1 / (CT)24) * g[0][0] - ((CT)1 / (CT)12) * g[1][0] + ((CT)1 / (CT)6) * g[2][0];
    t[4][1] = ((CT)1 / (CT)24) * g[0][1] - ((CT)1 / (CT)12) * g[1][1] + ((CT)1 / (CT)6) * g[2][1];
    t[4][2] = ((CT)1 / (CT)24) * g[0][2] - ((CT)1 / (CT)12) * g[1][2] + ((CT)1 / (CT)6) * g[2][2];
    t[5][0] = g[2][0];
    t[5][1] = g[2][1];
    t[5][2] = g[2][2];
    ST(U, 0 * KC + i, ((CT)1 / (CT)4) * t[0][0]);
    ST(U, 1 * KC + i, -((CT)1 / (CT)6) * t[0][0] - ((CT)1 / (CT)6) * t[0][1] - ((CT)1 / (CT)6) * t[0][2]);
    ST(U, 2 * KC + i, -((CT)1 / (CT)6) * t[0][0] + ((CT)1 / (CT)6) * t[0][1] - ((CT)1 / (CT)6) * t[0][2]);
    ST(U, 3 * KC + i, ((CT)1 / (CT)24) * t[0][0] + ((CT)1 / (CT)12) * t[0][1] + ((CT)1 / (CT)6) * t[0][2]);
    ST(U, 4 * KC + i, ((CT)1 / (CT)24) * t[0][0] - ((CT)1 / (CT)12) * t[0][1] + ((CT)1 / (CT)6) * t[0][2]);
    ST(U, 5 * KC + i, t[0][2]);
    ST(U, 6 * KC + i, ((CT)1 / (CT)4) * t[1][0]);
    ST(U, 7 * KC + i, -((CT)1 / (CT)6) * t[1][0] - ((CT)1 / (CT)6) * t[1][1] - ((CT)1 / (CT)6) * t[1][2]);
    ST(U, 8 * KC + i, -((CT)1 / (CT)6) * t[1][0] + ((CT)1 / (CT)6) * t[1][1] - ((CT)1 / (CT)6) * t[1][2]);
    ST(U, 9 * KC + i, ((CT)1 / (CT)24) * t[1][0] + ((CT)1 / (CT)12) * t[1][1] + ((CT)1 / (CT)6) * t[1][2]);
    ST(U, 10 * KC + i, ((CT)1 / (CT)24) * t[1][0] - ((CT)1 / (CT)12) * t[1][1] + ((CT)1 / (CT)6) * t[1][2]);
    ST(U, 11 * KC + i, t[1][2]);
    ST(U, 12 * KC + i, ((CT)1 / (CT)4) * t[2][0]);
    ST(U, 13 * KC + i, -((CT)1 / (CT)6) * t[2][0] - ((CT)1 / (CT)6) * t[2][1] - ((CT)1 / (CT)6) * t[2][2]);
    ST(U, 14 * KC + i, -((CT)1 / (CT)6) * t[2][0] + ((CT)1 / (CT)6) * t[2][1] - ((CT)1 / (CT)6) * t[2][2]);
    ST(U, 15 * KC + i, ((CT)1 / (CT)24) * t[2][0] + ((CT)1 / (CT)12) * t[2][1] + ((CT)1 / (CT)6) * t[2][2]);
    ST(U, 16 * KC + i, ((CT)1 / (CT)24) * t[2][0] - ((CT)1 / (CT)12) * t[2][1] + ((CT)1 / (CT)6) * t[2][2]);
    ST(U, 17 * KC + i, t[2][2]);
    ST(U, 18 * KC + i, ((CT)1 / (CT)4) * t[3][0]);
    ST(U, 19 * KC + i, -((CT)1 / (CT)6) * t[3][0] - ((CT)1 / (CT)6) * t[3][1] - ((CT)1 / (CT)6) * t[3][2]);
    ST(U, 20 * KC + i, -((CT)1 / (CT)6) * t[3][0] + ((CT)1 / (CT)6) * t[3][1] - ((CT)1 / (CT)6) * t[3][2]);
    ST(U, 21 * KC + i, ((CT)1 / (CT)24) * t[3][0] + ((CT)1 / (CT)12) * t[3][1] + ((CT)1 / (CT)6) * t[3][2]);
    ST(U, 22 * KC + i, ((CT)1 / (CT)24) * t[3][0] - ((CT)1 / (CT)12) * t[3][1] + ((CT)1 / (CT)6) * t[3][2]);
    ST(U, 23 * KC + i, t[3][2]);
    ST(U, 24 * KC + i, ((CT)1 / (CT)4) * t[4][0]);
    ST(U, 25 * KC + i, -((CT)1 / (CT)6) * t[4][0] - ((CT)1 / (CT)6) * t[4][1] - ((CT)1 / (CT)6) * t[4][2]);
    ST(U, 26 * KC + i, -((CT)1 / (CT)6) * t[4][0] + ((CT)1 / (CT)6) * t[4][1] - ((CT)1 / (CT)6) * t[4][2]);
    ST(U, 27 * KC + i, ((CT)1 / (CT)24) * t[4][0] + ((CT)1 / (CT)12) * t[4][1] + ((CT)1 / (CT)6) * t[4][2]);
    ST(U, 28 * KC + i, ((CT)1 / (CT)24) * t[4][0] - ((CT)1 / (CT)12) * t[4][1] + ((CT)1 / (CT)6) * t[4][2]);
    ST(U, 29 * KC + i, t[4][2]);
    ST(U, 30 * KC + i, ((CT)1 / (CT)4) * t[5][0]);
    ST(U, 31 * KC + i, -((CT)1 / (CT)6) * t[5][0] - ((CT)1 / (CT)6) * t[5][1] - ((CT)1 / (CT)6) * t[5][2]);
    ST(U, 32 * KC + i, -((CT)1 / (CT)6) * t[5][0] + ((CT)1 / (CT)6) * t[5][1] - ((CT)1 / (CT)6) * t[5][2]);
    ST(U, 33 * KC + i, ((CT)1 / (CT)24) * t[5][0] + ((CT)1 / (CT)12) * t[5][1] + ((CT)1 / (CT)6) * t[5][2]);
    ST(U, 34 * KC + i, ((CT)1 / (CT)24) * t[5][0] - ((CT)1 / (CT)12) * t[5][1] + ((CT)1 / (CT)6) * t[5][2]);
    ST(U, 35 * KC + i, t[5][2]);
}

// the forward's filters: g = w[k][c]
__kernel void winograd_weights(__global const T* w, __global T* U, const int K, const int C) {
    const int i = get_global_id(0);
    if (i >= K * C) return;
    winograd_filter(w + (long)i * 9, 0, U, i, (long)K * C);
}

// the data gradient's (a convolution of grad_out, K here the forward's input channels and C
// its output channels): g = w[c][k] rotated by 180 degrees
__kernel void winograd_weights_flipped(__global const T* w, __global T* U, const int K,
                                       const int C) {
    const int i = get_global_id(0);
    if (i >= K * C) return;
    const int k = i / C, c = i - k * C;
    winograd_filter(w + ((long)c * K + k) * 9, 1, U, i, (long)K * C);
}

// The tile transforms are 1-D, one work-item per tile of every channel (small planes have few
// tiles: 2x2 on 7x7): work-item i = c * ntiles + t, also the index of the tile's values in each
// plane of V, Z and M.

// V[xi][c][t] = (B^T d B)[xi] for the 6x6 input tile d of tile t = (image, tile row, tile
// column), zero outside the input
__kernel void winograd_input(__global const T* x, __global T* V, const int offx, const int C,
                             const int H, const int W, const int TH, const int TW,
                             const int PH, const int PW, const int ntiles) {
    const int i = get_global_id(0);
    if (i >= C * ntiles) return;
    const int c = i / ntiles, q = i - c * ntiles, n = q / (TH * TW);
    const int tr = q - n * (TH * TW), th = tr / TW, tw = tr - th * TW;
    const __global T* xp = x + offx + ((long)n * C + c) * H * W;
    const int h0 = 4 * th - PH, w0 = 4 * tw - PW;
    CT d[6][6], b[6][6];
    #pragma unroll
    for (int r = 0; r < 6; ++r) {
        const int ih = h0 + r;
        const bool row = ih >= 0 && ih < H;
        #pragma unroll
        for (int s = 0; s < 6; ++s) {
            const int iw = w0 + s;
            d[r][s] = (row && iw >= 0 && iw < W) ? LD(xp, ih * W + iw) : (CT)0;
        }
    }
    b[0][0] = (CT)4 * d[0][0] - (CT)5 * d[2][0] + d[4][0];
    b[0][1] = (CT)4 * d[0][1] - (CT)5 * d[2][1] + d[4][1];
    b[0][2] = (CT)4 * d[0][2] - (CT)5 * d[2][2] + d[4][2];
    b[0][3] = (CT)4 * d[0][3] - (CT)5 * d[2][3] + d[4][3];
    b[0][4] = (CT)4 * d[0][4] - (CT)5 * d[2][4] + d[4][4];
    b[0][5] = (CT)4 * d[0][5] - (CT)5 * d[2][5] + d[4][5];
    b[1][0] = -(CT)4 * d[1][0] - (CT)4 * d[2][0] + d[3][0] + d[4][0];
    b[1][1] = -(CT)4 * d[1][1] - (CT)4 * d[2][1] + d[3][1] + d[4][1];
    b[1][2] = -(CT)4 * d[1][2] - (CT)4 * d[2][2] + d[3][2] + d[4][2];
    b[1][3] = -(CT)4 * d[1][3] - (CT)4 * d[2][3] + d[3][3] + d[4][3];
    b[1][4] = -(CT)4 * d[1][4] - (CT)4 * d[2][4] + d[3][4] + d[4][4];
    b[1][5] = -(CT)4 * d[1][5] - (CT)4 * d[2][5] + d[3][5] + d[4][5];
    b[2][0] = (CT)4 * d[1][0] - (CT)4 * d[2][0] - d[3][0] + d[4][0];
    b[2][1] = (CT)4 * d[1][1] - (CT)4 * d[2][1] - d[3][1] + d[4][1];
    b[2][2] = (CT)4 * d[1][2] - (CT)4 * d[2][2] - d[3][2] + d[4][2];
    b[2][3] = (CT)4 * d[1][3] - (CT)4 * d[2][3] - d[3][3] + d[4][3];
    b[2][4] = (CT)4 * d[1][4] - (CT)4 * d[2][4] - d[3][4] + d[4][4];
    b[2][5] = (CT)4 * d[1][5] - (CT)4 * d[2][5] - d[3][5] + d[4][5];
    b[3][0] = -(CT)2 * d[1][0] - d[2][0] + (CT)2 * d[3][0] + d[4][0];
    b[3][1] = -(CT)2 * d[1][1] - d[2][1] + (CT)2 * d[3][1] + d[4][1];
    b[3][2] = -(CT)2 * d[1][2] - d[2][2] + (CT)2 * d[3][2] + d[4][2];
    b[3][3] = -(CT)2 * d[1][3] - d[2][3] + (CT)2 * d[3][3] + d[4][3];
    b[3][4] = -(CT)2 * d[1][4] - d[2][4] + (CT)2 * d[3][4] + d[4][4];
    b[3][5] = -(CT)2 * d[1][5] - d[2][5] + (CT)2 * d[3][5] + d[4][5];
    b[4][0] = (CT)2 * d[1][0] - d[2][0] - (CT)2 * d[3][0] + d[4][0];
    b[4][1] = (CT)2 * d[1][1] - d[2][1] - (CT)2 * d[3][1] + d[4][1];
    b[4][2] = (CT)2 * d[1][2] - d[2][2] - (CT)2 * d[3][2] + d[4][2];
    b[4][3] = (CT)2 * d[1][3] - d[2][3] - (CT)2 * d[3][3] + d[4][3];
    b[4][4] = (CT)2 * d[1][4] - d[2][4] - (CT)2 * d[3][4] + d[4][4];
    b[4][5] = (CT)2 * d[1][5] - d[2][5] - (CT)2 * d[3][5] + d[4][5];
    b[5][0] = (CT)4 * d[1][0] - (CT)5 * d[3][0] + d[5][0];
    b[5][1] = (CT)4 * d[1][1] - (CT)5 * d[3][1] + d[5][1];
    b[5][2] = (CT)4 * d[1][2] - (CT)5 * d[3][2] + d[5][2];
    b[5][3] = (CT)4 * d[1][3] - (CT)5 * d[3][3] + d[5][3];
    b[5][4] = (CT)4 * d[1][4] - (CT)5 * d[3][4] + d[5][4];
    b[5][5] = (CT)4 * d[1][5] - (CT)5 * d[3][5] + d[5][5];
    const long plane = (long)C * ntiles;
    ST(V, 0 * plane + i, (CT)4 * b[0][0] - (CT)5 * b[0][2] + b[0][4]);
    ST(V, 1 * plane + i, -(CT)4 * b[0][1] - (CT)4 * b[0][2] + b[0][3] + b[0][4]);
    ST(V, 2 * plane + i, (CT)4 * b[0][1] - (CT)4 * b[0][2] - b[0][3] + b[0][4]);
    ST(V, 3 * plane + i, -(CT)2 * b[0][1] - b[0][2] + (CT)2 * b[0][3] + b[0][4]);
    ST(V, 4 * plane + i, (CT)2 * b[0][1] - b[0][2] - (CT)2 * b[0][3] + b[0][4]);
    ST(V, 5 * plane + i, (CT)4 * b[0][1] - (CT)5 * b[0][3] + b[0][5]);
    ST(V, 6 * plane + i, (CT)4 * b[1][0] - (CT)5 * b[1][2] + b[1][4]);
    ST(V, 7 * plane + i, -(CT)4 * b[1][1] - (CT)4 * b[1][2] + b[1][3] + b[1][4]);
    ST(V, 8 * plane + i, (CT)4 * b[1][1] - (CT)4 * b[1][2] - b[1][3] + b[1][4]);
    ST(V, 9 * plane + i, -(CT)2 * b[1][1] - b[1][2] + (CT)2 * b[1][3] + b[1][4]);
    ST(V, 10 * plane + i, (CT)2 * b[1][1] - b[1][2] - (CT)2 * b[1][3] + b[1][4]);
    ST(V, 11 * plane + i, (CT)4 * b[1][1] - (CT)5 * b[1][3] + b[1][5]);
    ST(V, 12 * plane + i, (CT)4 * b[2][0] - (CT)5 * b[2][2] + b[2][4]);
    ST(V, 13 * plane + i, -(CT)4 * b[2][1] - (CT)4 * b[2][2] + b[2][3] + b[2][4]);
    ST(V, 14 * plane + i, (CT)4 * b[2][1] - (CT)4 * b[2][2] - b[2][3] + b[2][4]);
    ST(V, 15 * plane + i, -(CT)2 * b[2][1] - b[2][2] + (CT)2 * b[2][3] + b[2][4]);
    ST(V, 16 * plane + i, (CT)2 * b[2][1] - b[2][2] - (CT)2 * b[2][3] + b[2][4]);
    ST(V, 17 * plane + i, (CT)4 * b[2][1] - (CT)5 * b[2][3] + b[2][5]);
    ST(V, 18 * plane + i, (CT)4 * b[3][0] - (CT)5 * b[3][2] + b[3][4]);
    ST(V, 19 * plane + i, -(CT)4 * b[3][1] - (CT)4 * b[3][2] + b[3][3] + b[3][4]);
    ST(V, 20 * plane + i, (CT)4 * b[3][1] - (CT)4 * b[3][2] - b[3][3] + b[3][4]);
    ST(V, 21 * plane + i, -(CT)2 * b[3][1] - b[3][2] + (CT)2 * b[3][3] + b[3][4]);
    ST(V, 22 * plane + i, (CT)2 * b[3][1] - b[3][2] - (CT)2 * b[3][3] + b[3][4]);
    ST(V, 23 * plane + i, (CT)4 * b[3][1] - (CT)5 * b[3][3] + b[3][5]);
    ST(V, 24 * plane + i, (CT)4 * b[4][0] - (CT)5 * b[4][2] + b[4][4]);
    ST(V, 25 * plane + i, -(CT)4 * b[4][1] - (CT)4 * b[4][2] + b[4][3] + b[4][4]);
    ST(V, 26 * plane + i, (CT)4 * b[4][1] - (CT)4 * b[4][2] - b[4][3] + b[4][4]);
    ST(V, 27 * plane + i, -(CT)2 * b[4][1] - b[4][2] + (CT)2 * b[4][3] + b[4][4]);
    ST(V, 28 * plane + i, (CT)2 * b[4][1] - b[4][2] - (CT)2 * b[4][3] + b[4][4]);
    ST(V, 29 * plane + i, (CT)4 * b[4][1] - (CT)5 * b[4][3] + b[4][5]);
    ST(V, 30 * plane + i, (CT)4 * b[5][0] - (CT)5 * b[5][2] + b[5][4]);
    ST(V, 31 * plane + i, -(CT)4 * b[5][1] - (CT)4 * b[5][2] + b[5][3] + b[5][4]);
    ST(V, 32 * plane + i, (CT)4 * b[5][1] - (CT)4 * b[5][2] - b[5][3] + b[5][4]);
    ST(V, 33 * plane + i, -(CT)2 * b[5][1] - b[5][2] + (CT)2 * b[5][3] + b[5][4]);
    ST(V, 34 * plane + i, (CT)2 * b[5][1] - b[5][2] - (CT)2 * b[5][3] + b[5][4]);
    ST(V, 35 * plane + i, (CT)4 * b[5][1] - (CT)5 * b[5][3] + b[5][5]);
}

// The weight gradient (conv2d_winograd_weight): Z[xi][k][t] = (A dY A^T)[xi] for the 4x4
// tile dY of grad_out at tile t (zero past the output), k = c here
__kernel void winograd_grad(__global const T* gy, __global T* Z, const int offgy, const int K,
                            const int OH, const int OW, const int TH, const int TW,
                            const int ntiles) {
    const int i = get_global_id(0);
    if (i >= K * ntiles) return;
    const int c = i / ntiles, q = i - c * ntiles, n = q / (TH * TW);
    const int tr = q - n * (TH * TW), th = tr / TW, tw = tr - th * TW;
    const __global T* gp = gy + offgy + ((long)n * K + c) * OH * OW;
    const int oh = 4 * th, ow = 4 * tw;
    CT d[4][4], e[6][4];
    #pragma unroll
    for (int r = 0; r < 4; ++r)
        #pragma unroll
        for (int s = 0; s < 4; ++s)
            d[r][s] = (oh + r < OH && ow + s < OW) ? LD(gp, (oh + r) * OW + ow + s) : (CT)0;
    e[0][0] = d[0][0];
    e[0][1] = d[0][1];
    e[0][2] = d[0][2];
    e[0][3] = d[0][3];
    e[1][0] = d[0][0] + d[1][0] + d[2][0] + d[3][0];
    e[1][1] = d[0][1] + d[1][1] + d[2][1] + d[3][1];
    e[1][2] = d[0][2] + d[1][2] + d[2][2] + d[3][2];
    e[1][3] = d[0][3] + d[1][3] + d[2][3] + d[3][3];
    e[2][0] = d[0][0] - d[1][0] + d[2][0] - d[3][0];
    e[2][1] = d[0][1] - d[1][1] + d[2][1] - d[3][1];
    e[2][2] = d[0][2] - d[1][2] + d[2][2] - d[3][2];
    e[2][3] = d[0][3] - d[1][3] + d[2][3] - d[3][3];
    e[3][0] = d[0][0] + (CT)2 * d[1][0] + (CT)4 * d[2][0] + (CT)8 * d[3][0];
    e[3][1] = d[0][1] + (CT)2 * d[1][1] + (CT)4 * d[2][1] + (CT)8 * d[3][1];
    e[3][2] = d[0][2] + (CT)2 * d[1][2] + (CT)4 * d[2][2] + (CT)8 * d[3][2];
    e[3][3] = d[0][3] + (CT)2 * d[1][3] + (CT)4 * d[2][3] + (CT)8 * d[3][3];
    e[4][0] = d[0][0] - (CT)2 * d[1][0] + (CT)4 * d[2][0] - (CT)8 * d[3][0];
    e[4][1] = d[0][1] - (CT)2 * d[1][1] + (CT)4 * d[2][1] - (CT)8 * d[3][1];
    e[4][2] = d[0][2] - (CT)2 * d[1][2] + (CT)4 * d[2][2] - (CT)8 * d[3][2];
    e[4][3] = d[0][3] - (CT)2 * d[1][3] + (CT)4 * d[2][3] - (CT)8 * d[3][3];
    e[5][0] = d[3][0];
    e[5][1] = d[3][1];
    e[5][2] = d[3][2];
    e[5][3] = d[3][3];
    const long plane = (long)K * ntiles;
    ST(Z, 0 * plane + i, e[0][0]);
    ST(Z, 1 * plane + i, e[0][0] + e[0][1] + e[0][2] + e[0][3]);
    ST(Z, 2 * plane + i, e[0][0] - e[0][1] + e[0][2] - e[0][3]);
    ST(Z, 3 * plane + i, e[0][0] + (CT)2 * e[0][1] + (CT)4 * e[0][2] + (CT)8 * e[0][3]);
    ST(Z, 4 * plane + i, e[0][0] - (CT)2 * e[0][1] + (CT)4 * e[0][2] - (CT)8 * e[0][3]);
    ST(Z, 5 * plane + i, e[0][3]);
    ST(Z, 6 * plane + i, e[1][0]);
    ST(Z, 7 * plane + i, e[1][0] + e[1][1] + e[1][2] + e[1][3]);
    ST(Z, 8 * plane + i, e[1][0] - e[1][1] + e[1][2] - e[1][3]);
    ST(Z, 9 * plane + i, e[1][0] + (CT)2 * e[1][1] + (CT)4 * e[1][2] + (CT)8 * e[1][3]);
    ST(Z, 10 * plane + i, e[1][0] - (CT)2 * e[1][1] + (CT)4 * e[1][2] - (CT)8 * e[1][3]);
    ST(Z, 11 * plane + i, e[1][3]);
    ST(Z, 12 * plane + i, e[2][0]);
    ST(Z, 13 * plane + i, e[2][0] + e[2][1] + e[2][2] + e[2][3]);
    ST(Z, 14 * plane + i, e[2][0] - e[2][1] + e[2][2] - e[2][3]);
    ST(Z, 15 * plane + i, e[2][0] + (CT)2 * e[2][1] + (CT)4 * e[2][2] + (CT)8 * e[2][3]);
    ST(Z, 16 * plane + i, e[2][0] - (CT)2 * e[2][1] + (CT)4 * e[2][2] - (CT)8 * e[2][3]);
    ST(Z, 17 * plane + i, e[2][3]);
    ST(Z, 18 * plane + i, e[3][0]);
    ST(Z, 19 * plane + i, e[3][0] + e[3][1] + e[3][2] + e[3][3]);
    ST(Z, 20 * plane + i, e[3][0] - e[3][1] + e[3][2] - e[3][3]);
    ST(Z, 21 * plane + i, e[3][0] + (CT)2 * e[3][1] + (CT)4 * e[3][2] + (CT)8 * e[3][3]);
    ST(Z, 22 * plane + i, e[3][0] - (CT)2 * e[3][1] + (CT)4 * e[3][2] - (CT)8 * e[3][3]);
    ST(Z, 23 * plane + i, e[3][3]);
    ST(Z, 24 * plane + i, e[4][0]);
    ST(Z, 25 * plane + i, e[4][0] + e[4][1] + e[4][2] + e[4][3]);
    ST(Z, 26 * plane + i, e[4][0] - e[4][1] + e[4][2] - e[4][3]);
    ST(Z, 27 * plane + i, e[4][0] + (CT)2 * e[4][1] + (CT)4 * e[4][2] + (CT)8 * e[4][3]);
    ST(Z, 28 * plane + i, e[4][0] - (CT)2 * e[4][1] + (CT)4 * e[4][2] - (CT)8 * e[4][3]);
    ST(Z, 29 * plane + i, e[4][3]);
    ST(Z, 30 * plane + i, e[5][0]);
    ST(Z, 31 * plane + i, e[5][0] + e[5][1] + e[5][2] + e[5][3]);
    ST(Z, 32 * plane + i, e[5][0] - e[5][1] + e[5][2] - e[5][3]);
    ST(Z, 33 * plane + i, e[5][0] + (CT)2 * e[5][1] + (CT)4 * e[5][2] + (CT)8 * e[5][3]);
    ST(Z, 34 * plane + i, e[5][0] - (CT)2 * e[5][1] + (CT)4 * e[5][2] - (CT)8 * e[5][3]);
    ST(Z, 35 * plane + i, e[5][3]);
}

// dw[k][c] (+)= G^T M[.][k][c] G, the 3x3 gradient of filter (k, c) from its 6x6 product
// sums M[xi][k][c] (one chunk of images; accumulate adds the chunk to the earlier ones)
__kernel void winograd_weight_grad(__global const T* M, __global T* dw, const int K,
                                   const int C, const int accumulate) {
    const int i = get_global_id(0);
    if (i >= K * C) return;
    const long plane = (long)K * C;
    CT mm[6][6], t[3][6];
    #pragma unroll
    for (int xi = 0; xi < 36; ++xi) mm[xi / 6][xi % 6] = LD(M, xi * plane + i);
    t[0][0] = ((CT)1 / (CT)4) * mm[0][0] - ((CT)1 / (CT)6) * mm[1][0] - ((CT)1 / (CT)6) * mm[2][0] + ((CT)1 / (CT)24) * mm[3][0] + ((CT)1 / (CT)24) * mm[4][0];
    t[0][1] = ((CT)1 / (CT)4) * mm[0][1] - ((CT)1 / (CT)6) * mm[1][1] - ((CT)1 / (CT)6) * mm[2][1] + ((CT)1 / (CT)24) * mm[3][1] + ((CT)1 / (CT)24) * mm[4][1];
    t[0][2] = ((CT)1 / (CT)4) * mm[0][2] - ((CT)1 / (CT)6) * mm[1][2] - ((CT)1 / (CT)6) * mm[2][2] + ((CT)1 / (CT)24) * mm[3][2] + ((CT)1 / (CT)24) * mm[4][2];
    t[0][3] = ((CT)1 / (CT)4) * mm[0][3] - ((CT)1 / (CT)6) * mm[1][3] - ((CT)1 / (CT)6) * mm[2][3] + ((CT)1 / (CT)24) * mm[3][3] + ((CT)1 / (CT)24) * mm[4][3];
    t[0][4] = ((CT)1 / (CT)4) * mm[0][4] - ((CT)1 / (CT)6) * mm[1][4] - ((CT)1 / (CT)6) * mm[2][4] + ((CT)1 / (CT)24) * mm[3][4] + ((CT)1 / (CT)24) * mm[4][4];
    t[0][5] = ((CT)1 / (CT)4) * mm[0][5] - ((CT)1 / (CT)6) * mm[1][5] - ((CT)1 / (CT)6) * mm[2][5] + ((CT)1 / (CT)24) * mm[3][5] + ((CT)1 / (CT)24) * mm[4][5];
    t[1][0] = -((CT)1 / (CT)6) * mm[1][0] + ((CT)1 / (CT)6) * mm[2][0] + ((CT)1 / (CT)12) * mm[3][0] - ((CT)1 / (CT)12) * mm[4][0];
    t[1][1] = -((CT)1 / (CT)6) * mm[1][1] + ((CT)1 / (CT)6) * mm[2][1] + ((CT)1 / (CT)12) * mm[3][1] - ((CT)1 / (CT)12) * mm[4][1];
    t[1][2] = -((CT)1 / (CT)6) * mm[1][2] + ((CT)1 / (CT)6) * mm[2][2] + ((CT)1 / (CT)12) * mm[3][2] - ((CT)1 / (CT)12) * mm[4][2];
    t[1][3] = -((CT)1 / (CT)6) * mm[1][3] + ((CT)1 / (CT)6) * mm[2][3] + ((CT)1 / (CT)12) * mm[3][3] - ((CT)1 / (CT)12) * mm[4][3];
    t[1][4] = -((CT)1 / (CT)6) * mm[1][4] + ((CT)1 / (CT)6) * mm[2][4] + ((CT)1 / (CT)12) * mm[3][4] - ((CT)1 / (CT)12) * mm[4][4];
    t[1][5] = -((CT)1 / (CT)6) * mm[1][5] + ((CT)1 / (CT)6) * mm[2][5] + ((CT)1 / (CT)12) * mm[3][5] - ((CT)1 / (CT)12) * mm[4][5];
    t[2][0] = -((CT)1 / (CT)6) * mm[1][0] - ((CT)1 / (CT)6) * mm[2][0] + ((CT)1 / (CT)6) * mm[3][0] + ((CT)1 / (CT)6) * mm[4][0] + mm[5][0];
    t[2][1] = -((CT)1 / (CT)6) * mm[1][1] - ((CT)1 / (CT)6) * mm[2][1] + ((CT)1 / (CT)6) * mm[3][1] + ((CT)1 / (CT)6) * mm[4][1] + mm[5][1];
    t[2][2] = -((CT)1 / (CT)6) * mm[1][2] - ((CT)1 / (CT)6) * mm[2][2] + ((CT)1 / (CT)6) * mm[3][2] + ((CT)1 / (CT)6) * mm[4][2] + mm[5][2];
    t[2][3] = -((CT)1 / (CT)6) * mm[1][3] - ((CT)1 / (CT)6) * mm[2][3] + ((CT)1 / (CT)6) * mm[3][3] + ((CT)1 / (CT)6) * mm[4][3] + mm[5][3];
    t[2][4] = -((CT)1 / (CT)6) * mm[1][4] - ((CT)1 / (CT)6) * mm[2][4] + ((CT)1 / (CT)6) * mm[3][4] + ((CT)1 / (CT)6) * mm[4][4] + mm[5][4];
    t[2][5] = -((CT)1 / (CT)6) * mm[1][5] - ((CT)1 / (CT)6) * mm[2][5] + ((CT)1 / (CT)6) * mm[3][5] + ((CT)1 / (CT)6) * mm[4][5] + mm[5][5];
    __global T* dp = dw + (long)i * 9;
    ST(dp, 0, ((CT)1 / (CT)4) * t[0][0] - ((CT)1 / (CT)6) * t[0][1] - ((CT)1 / (CT)6) * t[0][2] + ((CT)1 / (CT)24) * t[0][3] + ((CT)1 / (CT)24) * t[0][4] + (accumulate ? LD(dp, 0) : (CT)0));
    ST(dp, 1, -((CT)1 / (CT)6) * t[0][1] + ((CT)1 / (CT)6) * t[0][2] + ((CT)1 / (CT)12) * t[0][3] - ((CT)1 / (CT)12) * t[0][4] + (accumulate ? LD(dp, 1) : (CT)0));
    ST(dp, 2, -((CT)1 / (CT)6) * t[0][1] - ((CT)1 / (CT)6) * t[0][2] + ((CT)1 / (CT)6) * t[0][3] + ((CT)1 / (CT)6) * t[0][4] + t[0][5] + (accumulate ? LD(dp, 2) : (CT)0));
    ST(dp, 3, ((CT)1 / (CT)4) * t[1][0] - ((CT)1 / (CT)6) * t[1][1] - ((CT)1 / (CT)6) * t[1][2] + ((CT)1 / (CT)24) * t[1][3] + ((CT)1 / (CT)24) * t[1][4] + (accumulate ? LD(dp, 3) : (CT)0));
    ST(dp, 4, -((CT)1 / (CT)6) * t[1][1] + ((CT)1 / (CT)6) * t[1][2] + ((CT)1 / (CT)12) * t[1][3] - ((CT)1 / (CT)12) * t[1][4] + (accumulate ? LD(dp, 4) : (CT)0));
    ST(dp, 5, -((CT)1 / (CT)6) * t[1][1] - ((CT)1 / (CT)6) * t[1][2] + ((CT)1 / (CT)6) * t[1][3] + ((CT)1 / (CT)6) * t[1][4] + t[1][5] + (accumulate ? LD(dp, 5) : (CT)0));
    ST(dp, 6, ((CT)1 / (CT)4) * t[2][0] - ((CT)1 / (CT)6) * t[2][1] - ((CT)1 / (CT)6) * t[2][2] + ((CT)1 / (CT)24) * t[2][3] + ((CT)1 / (CT)24) * t[2][4] + (accumulate ? LD(dp, 6) : (CT)0));
    ST(dp, 7, -((CT)1 / (CT)6) * t[2][1] + ((CT)1 / (CT)6) * t[2][2] + ((CT)1 / (CT)12) * t[2][3] - ((CT)1 / (CT)12) * t[2][4] + (accumulate ? LD(dp, 7) : (CT)0));
    ST(dp, 8, -((CT)1 / (CT)6) * t[2][1] - ((CT)1 / (CT)6) * t[2][2] + ((CT)1 / (CT)6) * t[2][3] + ((CT)1 / (CT)6) * t[2][4] + t[2][5] + (accumulate ? LD(dp, 8) : (CT)0));
}

// y[n][k][4 th + a][4 tw + b] = (A^T m A)[a][b] (+ bias[k]) for m[xi] = M[xi][k][t], the
// writes past the output left out (k = c here)
__kernel void winograd_output(__global const T* M, __global T* y, __global const T* bias,
                              const int offy, const int K, const int OH, const int OW,
                              const int TH, const int TW, const int ntiles,
                              const int has_bias) {
    const int i = get_global_id(0);
    if (i >= K * ntiles) return;
    const int c = i / ntiles, q = i - c * ntiles, n = q / (TH * TW);
    const int tr = q - n * (TH * TW), th = tr / TW, tw = tr - th * TW;
    const long plane = (long)K * ntiles;
    CT mm[6][6], t[4][6];
    #pragma unroll
    for (int xi = 0; xi < 36; ++xi) mm[xi / 6][xi % 6] = LD(M, xi * plane + i);
    t[0][0] = mm[0][0] + mm[1][0] + mm[2][0] + mm[3][0] + mm[4][0];
    t[0][1] = mm[0][1] + mm[1][1] + mm[2][1] + mm[3][1] + mm[4][1];
    t[0][2] = mm[0][2] + mm[1][2] + mm[2][2] + mm[3][2] + mm[4][2];
    t[0][3] = mm[0][3] + mm[1][3] + mm[2][3] + mm[3][3] + mm[4][3];
    t[0][4] = mm[0][4] + mm[1][4] + mm[2][4] + mm[3][4] + mm[4][4];
    t[0][5] = mm[0][5] + mm[1][5] + mm[2][5] + mm[3][5] + mm[4][5];
    t[1][0] = mm[1][0] - mm[2][0] + (CT)2 * mm[3][0] - (CT)2 * mm[4][0];
    t[1][1] = mm[1][1] - mm[2][1] + (CT)2 * mm[3][1] - (CT)2 * mm[4][1];
    t[1][2] = mm[1][2] - mm[2][2] + (CT)2 * mm[3][2] - (CT)2 * mm[4][2];
    t[1][3] = mm[1][3] - mm[2][3] + (CT)2 * mm[3][3] - (CT)2 * mm[4][3];
    t[1][4] = mm[1][4] - mm[2][4] + (CT)2 * mm[3][4] - (CT)2 * mm[4][4];
    t[1][5] = mm[1][5] - mm[2][5] + (CT)2 * mm[3][5] - (CT)2 * mm[4][5];
    t[2][0] = mm[1][0] + mm[2][0] + (CT)4 * mm[3][0] + (CT)4 * mm[4][0];
    t[2][1] = mm[1][1] + mm[2][1] + (CT)4 * mm[3][1] + (CT)4 * mm[4][1];
    t[2][2] = mm[1][2] + mm[2][2] + (CT)4 * mm[3][2] + (CT)4 * mm[4][2];
    t[2][3] = mm[1][3] + mm[2][3] + (CT)4 * mm[3][3] + (CT)4 * mm[4][3];
    t[2][4] = mm[1][4] + mm[2][4] + (CT)4 * mm[3][4] + (CT)4 * mm[4][4];
    t[2][5] = mm[1][5] + mm[2][5] + (CT)4 * mm[3][5] + (CT)4 * mm[4][5];
    t[3][0] = mm[1][0] - mm[2][0] + (CT)8 * mm[3][0] - (CT)8 * mm[4][0] + mm[5][0];
    t[3][1] = mm[1][1] - mm[2][1] + (CT)8 * mm[3][1] - (CT)8 * mm[4][1] + mm[5][1];
    t[3][2] = mm[1][2] - mm[2][2] + (CT)8 * mm[3][2] - (CT)8 * mm[4][2] + mm[5][2];
    t[3][3] = mm[1][3] - mm[2][3] + (CT)8 * mm[3][3] - (CT)8 * mm[4][3] + mm[5][3];
    t[3][4] = mm[1][4] - mm[2][4] + (CT)8 * mm[3][4] - (CT)8 * mm[4][4] + mm[5][4];
    t[3][5] = mm[1][5] - mm[2][5] + (CT)8 * mm[3][5] - (CT)8 * mm[4][5] + mm[5][5];
    const CT b = has_bias ? LD(bias, c) : (CT)0;
    __global T* yp = y + offy + ((long)n * K + c) * OH * OW;
    const int oh = 4 * th, ow = 4 * tw;
    if (oh + 0 < OH) {
        if (ow + 0 < OW) ST(yp, (oh + 0) * OW + ow + 0, t[0][0] + t[0][1] + t[0][2] + t[0][3] + t[0][4] + b);
        if (ow + 1 < OW) ST(yp, (oh + 0) * OW + ow + 1, t[0][1] - t[0][2] + (CT)2 * t[0][3] - (CT)2 * t[0][4] + b);
        if (ow + 2 < OW) ST(yp, (oh + 0) * OW + ow + 2, t[0][1] + t[0][2] + (CT)4 * t[0][3] + (CT)4 * t[0][4] + b);
        if (ow + 3 < OW) ST(yp, (oh + 0) * OW + ow + 3, t[0][1] - t[0][2] + (CT)8 * t[0][3] - (CT)8 * t[0][4] + t[0][5] + b);
    }
    if (oh + 1 < OH) {
        if (ow + 0 < OW) ST(yp, (oh + 1) * OW + ow + 0, t[1][0] + t[1][1] + t[1][2] + t[1][3] + t[1][4] + b);
        if (ow + 1 < OW) ST(yp, (oh + 1) * OW + ow + 1, t[1][1] - t[1][2] + (CT)2 * t[1][3] - (CT)2 * t[1][4] + b);
        if (ow + 2 < OW) ST(yp, (oh + 1) * OW + ow + 2, t[1][1] + t[1][2] + (CT)4 * t[1][3] + (CT)4 * t[1][4] + b);
        if (ow + 3 < OW) ST(yp, (oh + 1) * OW + ow + 3, t[1][1] - t[1][2] + (CT)8 * t[1][3] - (CT)8 * t[1][4] + t[1][5] + b);
    }
    if (oh + 2 < OH) {
        if (ow + 0 < OW) ST(yp, (oh + 2) * OW + ow + 0, t[2][0] + t[2][1] + t[2][2] + t[2][3] + t[2][4] + b);
        if (ow + 1 < OW) ST(yp, (oh + 2) * OW + ow + 1, t[2][1] - t[2][2] + (CT)2 * t[2][3] - (CT)2 * t[2][4] + b);
        if (ow + 2 < OW) ST(yp, (oh + 2) * OW + ow + 2, t[2][1] + t[2][2] + (CT)4 * t[2][3] + (CT)4 * t[2][4] + b);
        if (ow + 3 < OW) ST(yp, (oh + 2) * OW + ow + 3, t[2][1] - t[2][2] + (CT)8 * t[2][3] - (CT)8 * t[2][4] + t[2][5] + b);
    }
    if (oh + 3 < OH) {
        if (ow + 0 < OW) ST(yp, (oh + 3) * OW + ow + 0, t[3][0] + t[3][1] + t[3][2] + t[3][3] + t[3][4] + b);
        if (ow + 1 < OW) ST(yp, (oh + 3) * OW + ow + 1, t[3][1] - t[3][2] + (CT)2 * t[3][3] - (CT)2 * t[3][4] + b);
        if (ow + 2 < OW) ST(yp, (oh + 3) * OW + ow + 2, t[3][1] + t[3][2] + (CT)4 * t[3][3] + (CT)4 * t[3][4] + b);
        if (ow + 3 < OW) ST(yp, (oh + 3) * OW + ow + 3, t[3][1] - t[3][2] + (CT)8 * t[3][3] - (CT)8 * t[3][4] + t[3][5] + b);
    }
}
