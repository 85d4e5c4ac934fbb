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

// U[xi][k][c] = (G g G^T)[xi] for the 3x3 filter g at i = k * C + c (rotated by 180 degrees
// when flip: the data gradient's filters)
void winograd_filter(const __global T* g, const int flip, __global T* U, const long i,
                     const long KC) {
    CT t[4][3], u[4][4];
    #pragma unroll
    for (int j = 0; j < 3; ++j) {
        const CT g0 = LD(g, flip ? 8 - j : j), g1 = LD(g, flip ? 5 - j : 3 + j);
        const CT g2 = LD(g, flip ? 2 - j : 6 + j);
        t[0][j] = g0;
        t[1][j] = (CT)0.5 * (g0 + g1 + g2);
        t[2][j] = (CT)0.5 * (g0 - g1 + g2);
        t[3][j] = g2;
    }
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
        u[r][0] = t[r][0];
        u[r][1] = (CT)0.5 * (t[r][0] + t[r][1] + t[r][2]);
        u[r][2] = (CT)0.5 * (t[r][0] - t[r][1] + t[r][2]);
        u[r][3] = t[r][2];
    }
    #pragma unroll
    for (int xi = 0; xi < 16; ++xi) ST(U, xi * KC + i, u[xi / 4][xi % 4]);
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

// V[xi][c][t] = (B^T d B)[xi] for the 4x4 input tile d of tile t = (image, tile row, tile
// column); launched over (TW, TH, images * C) so no work-item divides more than once
__kernel void winograd_input(__global const T* x, __global T* V, const int offx, const int C,
                             const int H, const int W, const int TH, const int TW,
                             const int PH, const int PW, const int ntiles) {
    const int tw = get_global_id(0), th = get_global_id(1), z = get_global_id(2);
    const int n = z / C, c = z - n * C;
    const int i = c * ntiles + (n * TH + th) * TW + tw;
    const __global T* xp = x + offx + (long)z * H * W;
    const int h0 = 2 * th - PH, w0 = 2 * tw - PW;
    CT d[4][4], b[4][4];
    #pragma unroll
    for (int r = 0; r < 4; ++r)
        #pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int ih = h0 + r, iw = w0 + s;
            d[r][s] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LD(xp, ih * W + iw) : (CT)0;
        }
    #pragma unroll
    for (int s = 0; s < 4; ++s) {
        b[0][s] = d[0][s] - d[2][s];
        b[1][s] = d[1][s] + d[2][s];
        b[2][s] = d[2][s] - d[1][s];
        b[3][s] = d[1][s] - d[3][s];
    }
    const long plane = (long)C * ntiles;
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
        ST(V, (4 * r + 0) * plane + i, b[r][0] - b[r][2]);
        ST(V, (4 * r + 1) * plane + i, b[r][1] + b[r][2]);
        ST(V, (4 * r + 2) * plane + i, b[r][2] - b[r][1]);
        ST(V, (4 * r + 3) * plane + i, b[r][1] - b[r][3]);
    }
}

// The weight gradient (conv2d_winograd_weight): Z[xi][k][t] = (A dY A^T)[xi] for the 2x2
// tile dY of grad_out at tile t (zero past the output); launched over (TW, TH, images * K)
__kernel void winograd_grad(__global const T* gy, __global T* Z, const int offgy, const int K,
                            const int OH, const int OW, const int TH, const int TW,
                            const int ntiles) {
    const int tw = get_global_id(0), th = get_global_id(1), z = get_global_id(2);
    const int n = z / K, k = z - n * K;
    const int i = k * ntiles + (n * TH + th) * TW + tw;
    const __global T* gp = gy + offgy + (long)z * OH * OW;
    const int oh = 2 * th, ow = 2 * tw;
    CT d[2][2], e[4][2];
    #pragma unroll
    for (int r = 0; r < 2; ++r)
        #pragma unroll
        for (int s = 0; s < 2; ++s)
            d[r][s] = (oh + r < OH && ow + s < OW) ? LD(gp, (oh + r) * OW + ow + s) : (CT)0;
    #pragma unroll
    for (int s = 0; s < 2; ++s) {
        e[0][s] = d[0][s];
        e[1][s] = d[0][s] + d[1][s];
        e[2][s] = d[0][s] - d[1][s];
        e[3][s] = -d[1][s];
    }
    const long plane = (long)K * ntiles;
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
        ST(Z, (4 * r + 0) * plane + i, e[r][0]);
        ST(Z, (4 * r + 1) * plane + i, e[r][0] + e[r][1]);
        ST(Z, (4 * r + 2) * plane + i, e[r][0] - e[r][1]);
        ST(Z, (4 * r + 3) * plane + i, -e[r][1]);
    }
}

// dw[k][c] (+)= G^T M[.][k][c] G, the 3x3 gradient of filter (k, c) from its 4x4 product sums
// M[xi][k][c] (one chunk of images; accumulate adds the chunk to the earlier ones)
__kernel void winograd_weight_grad(__global const T* M, __global T* dw, const int K,
                                   const int C, const int accumulate) {
    const int i = get_global_id(0);
    if (i >= K * C) return;
    const long plane = (long)K * C;
    CT m[4][4], t[3][4];
    #pragma unroll
    for (int xi = 0; xi < 16; ++xi) m[xi / 4][xi % 4] = LD(M, xi * plane + i);
    #pragma unroll
    for (int s = 0; s < 4; ++s) {
        t[0][s] = m[0][s] + (CT)0.5 * (m[1][s] + m[2][s]);
        t[1][s] = (CT)0.5 * (m[1][s] - m[2][s]);
        t[2][s] = (CT)0.5 * (m[1][s] + m[2][s]) + m[3][s];
    }
    __global T* dp = dw + (long)i * 9;
    #pragma unroll
    for (int r = 0; r < 3; ++r) {
        const CT v0 = t[r][0] + (CT)0.5 * (t[r][1] + t[r][2]);
        const CT v1 = (CT)0.5 * (t[r][1] - t[r][2]);
        const CT v2 = (CT)0.5 * (t[r][1] + t[r][2]) + t[r][3];
        ST(dp, 3 * r, v0 + (accumulate ? LD(dp, 3 * r) : (CT)0));
        ST(dp, 3 * r + 1, v1 + (accumulate ? LD(dp, 3 * r + 1) : (CT)0));
        ST(dp, 3 * r + 2, v2 + (accumulate ? LD(dp, 3 * r + 2) : (CT)0));
    }
}

// y[n][k][2 th + a][2 tw + b] = (A^T m A)[a][b] (+ bias[k]) for m[xi] = M[xi][k][t];
// launched over (TW, TH, images * K)
__kernel void winograd_output(__global const T* M, __global T* y, __global const T* bias,
                              const int offy, const int K, const int OH, const int OW,
                              const int TH, const int TW, const int ntiles,
                              const int has_bias) {
    const int tw = get_global_id(0), th = get_global_id(1), z = get_global_id(2);
    const int n = z / K, k = z - n * K;
    const int i = k * ntiles + (n * TH + th) * TW + tw;
    const long plane = (long)K * ntiles;
    CT m[4][4], a[2][4];
    #pragma unroll
    for (int xi = 0; xi < 16; ++xi) m[xi / 4][xi % 4] = LD(M, xi * plane + i);
    #pragma unroll
    for (int s = 0; s < 4; ++s) {
        a[0][s] = m[0][s] + m[1][s] + m[2][s];
        a[1][s] = m[1][s] - m[2][s] - m[3][s];
    }
    const CT b = has_bias ? LD(bias, k) : (CT)0;
    __global T* yp = y + offy + (long)z * OH * OW;
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int oh = 2 * th + r;
        if (oh >= OH) continue;
        const CT y0 = a[r][0] + a[r][1] + a[r][2], y1 = a[r][1] - a[r][2] - a[r][3];
        const int ow = 2 * tw;
        if (ow < OW) ST(yp, oh * OW + ow, y0 + b);
        if (ow + 1 < OW) ST(yp, oh * OW + ow + 1, y1 + b);
    }
}
