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
void conv2d_igemm_weight(__global const T* x, __global const T* gy, __global CT* part,
                         const int C, const int H, const int W, const int K, const int OH,
                         const int OW, const int G, const int NPIX, const int splits,
                         const int chunk) {

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

    const int z = get_group_id(2), g = z / splits, split = z - g * splits;
    const int KD = cg * RS, P = OH * OW;
    const int jbeg = split * chunk, jend = min(NPIX, jbeg + chunk);
    // this work-item's reduction index (pixel) of every tile, and its columns (taps) of B
    const int bk = tid % BK;
    int xoff[BPT], roff[BPT], soff[BPT];
    #pragma unroll
    for (int l = 0; l < BPT; ++l) {
        const int t = n0 + tid / BK + l * (NT / BK);
        const int c = t / RS, rs = t - c * RS, r = rs / S;
        xoff[l] = t < KD ? (g * cg + c) * H * W : -1;
        roff[l] = r * DH - PH;
        soff[l] = (rs - r * S) * DW - PW;
    }
    const __global T* gb = gy + (long)(g * kg + m0) * P;

    CT ra[APT], rb[BPT];
    if (jbeg < jend) {
        const int kt = jbeg;

            const int j = kt + bk, jok = j < jend;
            const int img = jok ? j / P : 0, p = j - img * P;
            const int oh = p / OW, ow = p - oh * OW;
            const __global T* xb = x + (long)img * C * H * W;
            #pragma unroll
            for (int l = 0; l < BPT; ++l) {
                const int ih = oh * SH + roff[l], iw = ow * SW + soff[l];
                rb[l] = (jok && xoff[l] >= 0 && ih >= 0 && ih < H && iw >= 0 && iw < W)
                    ? LD(xb, xoff[l] + ih * W + iw) : (CT)0;
            }
            const __global T* gj = gb + (long)img * K * P + p;
            #pragma unroll
            for (int i = 0; i < APT; ++i) {
                const int m = tid / BK + i * (NT / BK);
                ra[i] = (jok && m0 + m < kg) ? LD(gj, (long)m * P) : (CT)0;
            }
    }
    for (int k0 = jbeg; k0 < jend; k0 += BK) {

        #pragma unroll
        for (int l = 0; l < BPT; ++l) BS(bk, tid / BK + l * (NT / BK)) = rb[l];
        #pragma unroll
        for (int i = 0; i < APT; ++i) AS(bk, tid / BK + i * (NT / BK)) = ra[i];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + BK < jend) {
            const int kt = k0 + BK;

            const int j = kt + bk, jok = j < jend;
            const int img = jok ? j / P : 0, p = j - img * P;
            const int oh = p / OW, ow = p - oh * OW;
            const __global T* xb = x + (long)img * C * H * W;
            #pragma unroll
            for (int l = 0; l < BPT; ++l) {
                const int ih = oh * SH + roff[l], iw = ow * SW + soff[l];
                rb[l] = (jok && xoff[l] >= 0 && ih >= 0 && ih < H && iw >= 0 && iw < W)
                    ? LD(xb, xoff[l] + ih * W + iw) : (CT)0;
            }
            const __global T* gj = gb + (long)img * K * P + p;
            #pragma unroll
            for (int i = 0; i < APT; ++i) {
                const int m = tid / BK + i * (NT / BK);
                ra[i] = (jok && m0 + m < kg) ? LD(gj, (long)m * P) : (CT)0;
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

    __global CT* pp = part + ((long)split * K + g * kg) * KD;
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ROW(i);
        if (m >= kg) continue;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int t = n0 + COL(j);
            if (t < KD) pp[(long)m * KD + t] = acc[i][j];
        }
    }
}

// dw[i] = the sum of the splits' partial sums (kept in the compute type: float16 storage
// does not round them), added in split order
__kernel void conv2d_igemm_weight_sum(__global const CT* part, __global T* dw, const int size,
                                      const int splits) {
    const int i = get_global_id(0);
    if (i >= size) return;
    CT acc = (CT)0;
    for (int s = 0; s < splits; ++s) acc += part[(long)s * size + i];
    ST(dw, i, acc);
}
