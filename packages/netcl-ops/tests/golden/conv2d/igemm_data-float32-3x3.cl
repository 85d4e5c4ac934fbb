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
#define PH 1
#define PW 1
#define DH 1
#define DW 1
#define BM 64
#define BN 64
#define BK 16
#define LX 16
#define LY 16
#define TM 4
#define TN 4
#define VEC 0
#define ROW(i) (ty + (i) * LY)
#define COL(j) (tx + (j) * LX)
#define RS (R * S)
#define NT (LX * LY)
#define APT (BM * BK / NT)  // A elements each work-item gathers per step
#define BPT (BK * BN / NT)  // B elements

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void conv2d_igemm_data(__global const T* gy, __global const T* w, __global T* dx,
                       const int C, const int H, const int W, const int K, const int OH,
                       const int OW, const int G, const int N) {

    const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * LX + tx;
    const int n0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM;
    const int kg = K / G, cg = C / G;
#if VEC
    __local CT4 As4[BK][BM / 4 + 1];
    __local CT4 Bs4[BK][BN / 4 + 1];
    #define AS(k, m) (((__local CT*)As4)[(k) * (BM + 4) + (m)])
    #define BS(k, n) (((__local CT*)Bs4)[(k) * (BN + 4) + (n)])
#else
    __local CT As[BK][BM + 1];
    __local CT Bs[BK][BN + 1];
    #define AS(k, m) As[k][m]
    #define BS(k, n) Bs[k][n]
#endif
    CT acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = (CT)0;

    const int g = get_group_id(2), KD = kg * RS, Q = H * W, NPIX = N * Q;
    // this work-item's column of every B tile: one input pixel
    const int bn = tid % BN, col = n0 + bn, colok = col < NPIX;
    const int img = colok ? col / Q : 0, q = col - img * Q;
    const int ih = q / W, iw = q - ih * W;
    const int th0 = ih + PH, tw0 = iw + PW;
    const __global T* gb = gy + ((long)img * K + g * kg) * OH * OW;
    // this work-item's reduction index of every A tile
    const int ak = tid % BK;
    const __global T* wb = w + (long)g * kg * cg * RS;

    CT ra[APT], rb[BPT];
    if (0 < KD) {
        const int kt = 0;

            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int m = k / RS, rs = k - m * RS, r = rs / S, s = rs - r * S;
                const int th = th0 - r * DH, tw = tw0 - s * DW;
                const int oh = th / SH, ow = tw / SW;
                const int ok = colok && k < KD && th >= 0 && tw >= 0 && oh * SH == th
                    && ow * SW == tw && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / RS, rs = k - m * RS;
                const __global T* wk = wb + (long)m * cg * RS + rs;
                #pragma unroll
                for (int i = 0; i < APT; ++i) {
                    const int c = m0 + tid / BK + i * (NT / BK);
                    ra[i] = (c < cg && k < KD) ? LD(wk, c * RS) : (CT)0;
                }
            }
    }
    for (int k0 = 0; k0 < KD; k0 += BK) {

        #pragma unroll
        for (int i = 0; i < BPT; ++i) BS(tid / BN + i * (NT / BN), bn) = rb[i];
        #pragma unroll
        for (int i = 0; i < APT; ++i) AS(ak, tid / BK + i * (NT / BK)) = ra[i];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + BK < KD) {
            const int kt = k0 + BK;

            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int m = k / RS, rs = k - m * RS, r = rs / S, s = rs - r * S;
                const int th = th0 - r * DH, tw = tw0 - s * DW;
                const int oh = th / SH, ow = tw / SW;
                const int ok = colok && k < KD && th >= 0 && tw >= 0 && oh * SH == th
                    && ow * SW == tw && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / RS, rs = k - m * RS;
                const __global T* wk = wb + (long)m * cg * RS + rs;
                #pragma unroll
                for (int i = 0; i < APT; ++i) {
                    const int c = m0 + tid / BK + i * (NT / BK);
                    ra[i] = (c < cg && k < KD) ? LD(wk, c * RS) : (CT)0;
                }
            }
        }

        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            CT a[TM], b[TN];
#if VEC
            #pragma unroll
            for (int q = 0; q < TM / 4; ++q) {
                const CT4 v = As4[kk][ty + q * LY];
                a[4 * q] = v.s0; a[4 * q + 1] = v.s1; a[4 * q + 2] = v.s2; a[4 * q + 3] = v.s3;
            }
            #pragma unroll
            for (int q = 0; q < TN / 4; ++q) {
                const CT4 v = Bs4[kk][tx + q * LX];
                b[4 * q] = v.s0; b[4 * q + 1] = v.s1; b[4 * q + 2] = v.s2; b[4 * q + 3] = v.s3;
            }
#else
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ROW(i)];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][COL(j)];
#endif
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
        }

        barrier(CLK_LOCAL_MEM_FENCE);
    }

    #pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int cj = n0 + COL(j);
        if (cj >= NPIX) continue;
        const int nj = cj / Q, qj = cj - nj * Q;
        __global T* dp = dx + ((long)nj * C + g * cg) * Q + qj;
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int c = m0 + ROW(i);
            if (c < cg) ST(dp, (long)c * Q, acc[i][j]);
        }
    }
}
