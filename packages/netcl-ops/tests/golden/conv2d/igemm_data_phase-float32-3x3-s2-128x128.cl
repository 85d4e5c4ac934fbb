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
#define SH 2
#define SW 2
#define PH 1
#define PW 1
#define DH 1
#define DW 1
#define BM 128
#define BN 128
#define BK 16
#define LX 16
#define LY 16
#define TM 8
#define TN 8
#define VEC 0
#define ROW(i) (ty + (i) * LY)
#define COL(j) (tx + (j) * LX)
#define RS (R * S)
#define NT (LX * LY)
#define APT (BM * BK / NT)  // A elements each work-item gathers per step
#define BPT (BK * BN / NT)  // B elements

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void conv2d_igemm_data_phase(__global const T* gy, __global const T* w, __global T* dx,
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

    const int z = get_group_id(2), slot = z / G, g = z - slot * G;
    const __global T* wb = w + (long)g * kg * cg * RS;
    const int bn = tid % BN, col = n0 + bn;
    const int ak = tid % BK;
    if (slot == 0) {
    {   // ih = 1 mod SH, iw = 1 mod SW: 2 x 2 taps
        const int pa = 1, pb = 1, rh = 0, rw = 0;
        const int NTH = 2, NTW = 2, TAPS = NTH * NTW;
        const int HP = (H - pa + SH - 1) / SH, WP = (W - pb + SW - 1) / SW, QP = HP * WP;
        const int NPIX = N * QP;
        if (n0 < NPIX) {  // the whole work-group: no barrier is skipped by some items only
#if 0
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = (CT)0;
#endif
#if 4
        const int KD = kg * TAPS, colok = col < NPIX;
        const int img = colok ? col / QP : 0, qp = col - img * QP;
        const int ihp = qp / WP, iwp = qp - ihp * WP;
        const int oh0 = ihp + (pa + PH - rh) / SH, ow0 = iwp + (pb + PW - rw) / SW;
        const __global T* gb = gy + ((long)img * K + g * kg) * OH * OW;

    CT ra[APT], rb[BPT];
    if (0 < KD) {
        const int kt = 0;

            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int m = k / TAPS, t = k - m * TAPS, th = t / NTW, tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / TAPS, t = k - m * TAPS;
                const int th = t / NTW, tw = t - th * NTW;
                const __global T* wk = wb + (long)m * cg * RS + (rh + th * SH) * S + rw
                    + tw * SW;
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
                const int m = k / TAPS, t = k - m * TAPS, th = t / NTW, tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / TAPS, t = k - m * TAPS;
                const int th = t / NTW, tw = t - th * NTW;
                const __global T* wk = wb + (long)m * cg * RS + (rh + th * SH) * S + rw
                    + tw * SW;
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

#endif
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int cj = n0 + COL(j);
            if (cj >= NPIX) continue;
            const int nj = cj / QP, qj = cj - nj * QP, hj = qj / WP;
            const int pix = (pa + hj * SH) * W + pb + (qj - hj * WP) * SW;
            __global T* dp = dx + ((long)nj * C + g * cg) * H * W + pix;
            #pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int c = m0 + ROW(i);
                if (c < cg) ST(dp, (long)c * H * W, acc[i][j]);
            }
        }
        }
    }

    {   // ih = 0 mod SH, iw = 0 mod SW: 1 x 1 taps
        const int pa = 0, pb = 0, rh = 1, rw = 1;
        const int NTH = 1, NTW = 1, TAPS = NTH * NTW;
        const int HP = (H - pa + SH - 1) / SH, WP = (W - pb + SW - 1) / SW, QP = HP * WP;
        const int NPIX = N * QP;
        if (n0 < NPIX) {  // the whole work-group: no barrier is skipped by some items only
#if 1
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = (CT)0;
#endif
#if 1
        const int KD = kg * TAPS, colok = col < NPIX;
        const int img = colok ? col / QP : 0, qp = col - img * QP;
        const int ihp = qp / WP, iwp = qp - ihp * WP;
        const int oh0 = ihp + (pa + PH - rh) / SH, ow0 = iwp + (pb + PW - rw) / SW;
        const __global T* gb = gy + ((long)img * K + g * kg) * OH * OW;

    CT ra[APT], rb[BPT];
    if (0 < KD) {
        const int kt = 0;

            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int m = k / TAPS, t = k - m * TAPS, th = t / NTW, tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / TAPS, t = k - m * TAPS;
                const int th = t / NTW, tw = t - th * NTW;
                const __global T* wk = wb + (long)m * cg * RS + (rh + th * SH) * S + rw
                    + tw * SW;
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
                const int m = k / TAPS, t = k - m * TAPS, th = t / NTW, tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / TAPS, t = k - m * TAPS;
                const int th = t / NTW, tw = t - th * NTW;
                const __global T* wk = wb + (long)m * cg * RS + (rh + th * SH) * S + rw
                    + tw * SW;
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

#endif
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int cj = n0 + COL(j);
            if (cj >= NPIX) continue;
            const int nj = cj / QP, qj = cj - nj * QP, hj = qj / WP;
            const int pix = (pa + hj * SH) * W + pb + (qj - hj * WP) * SW;
            __global T* dp = dx + ((long)nj * C + g * cg) * H * W + pix;
            #pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int c = m0 + ROW(i);
                if (c < cg) ST(dp, (long)c * H * W, acc[i][j]);
            }
        }
        }
    }
    }
    else if (slot == 1) {
    {   // ih = 0 mod SH, iw = 1 mod SW: 1 x 2 taps
        const int pa = 0, pb = 1, rh = 1, rw = 0;
        const int NTH = 1, NTW = 2, TAPS = NTH * NTW;
        const int HP = (H - pa + SH - 1) / SH, WP = (W - pb + SW - 1) / SW, QP = HP * WP;
        const int NPIX = N * QP;
        if (n0 < NPIX) {  // the whole work-group: no barrier is skipped by some items only
#if 0
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = (CT)0;
#endif
#if 2
        const int KD = kg * TAPS, colok = col < NPIX;
        const int img = colok ? col / QP : 0, qp = col - img * QP;
        const int ihp = qp / WP, iwp = qp - ihp * WP;
        const int oh0 = ihp + (pa + PH - rh) / SH, ow0 = iwp + (pb + PW - rw) / SW;
        const __global T* gb = gy + ((long)img * K + g * kg) * OH * OW;

    CT ra[APT], rb[BPT];
    if (0 < KD) {
        const int kt = 0;

            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int m = k / TAPS, t = k - m * TAPS, th = t / NTW, tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / TAPS, t = k - m * TAPS;
                const int th = t / NTW, tw = t - th * NTW;
                const __global T* wk = wb + (long)m * cg * RS + (rh + th * SH) * S + rw
                    + tw * SW;
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
                const int m = k / TAPS, t = k - m * TAPS, th = t / NTW, tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / TAPS, t = k - m * TAPS;
                const int th = t / NTW, tw = t - th * NTW;
                const __global T* wk = wb + (long)m * cg * RS + (rh + th * SH) * S + rw
                    + tw * SW;
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

#endif
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int cj = n0 + COL(j);
            if (cj >= NPIX) continue;
            const int nj = cj / QP, qj = cj - nj * QP, hj = qj / WP;
            const int pix = (pa + hj * SH) * W + pb + (qj - hj * WP) * SW;
            __global T* dp = dx + ((long)nj * C + g * cg) * H * W + pix;
            #pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int c = m0 + ROW(i);
                if (c < cg) ST(dp, (long)c * H * W, acc[i][j]);
            }
        }
        }
    }

    {   // ih = 1 mod SH, iw = 0 mod SW: 2 x 1 taps
        const int pa = 1, pb = 0, rh = 0, rw = 1;
        const int NTH = 2, NTW = 1, TAPS = NTH * NTW;
        const int HP = (H - pa + SH - 1) / SH, WP = (W - pb + SW - 1) / SW, QP = HP * WP;
        const int NPIX = N * QP;
        if (n0 < NPIX) {  // the whole work-group: no barrier is skipped by some items only
#if 1
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = (CT)0;
#endif
#if 2
        const int KD = kg * TAPS, colok = col < NPIX;
        const int img = colok ? col / QP : 0, qp = col - img * QP;
        const int ihp = qp / WP, iwp = qp - ihp * WP;
        const int oh0 = ihp + (pa + PH - rh) / SH, ow0 = iwp + (pb + PW - rw) / SW;
        const __global T* gb = gy + ((long)img * K + g * kg) * OH * OW;

    CT ra[APT], rb[BPT];
    if (0 < KD) {
        const int kt = 0;

            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int m = k / TAPS, t = k - m * TAPS, th = t / NTW, tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / TAPS, t = k - m * TAPS;
                const int th = t / NTW, tw = t - th * NTW;
                const __global T* wk = wb + (long)m * cg * RS + (rh + th * SH) * S + rw
                    + tw * SW;
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
                const int m = k / TAPS, t = k - m * TAPS, th = t / NTW, tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / TAPS, t = k - m * TAPS;
                const int th = t / NTW, tw = t - th * NTW;
                const __global T* wk = wb + (long)m * cg * RS + (rh + th * SH) * S + rw
                    + tw * SW;
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

#endif
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int cj = n0 + COL(j);
            if (cj >= NPIX) continue;
            const int nj = cj / QP, qj = cj - nj * QP, hj = qj / WP;
            const int pix = (pa + hj * SH) * W + pb + (qj - hj * WP) * SW;
            __global T* dp = dx + ((long)nj * C + g * cg) * H * W + pix;
            #pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int c = m0 + ROW(i);
                if (c < cg) ST(dp, (long)c * H * W, acc[i][j]);
            }
        }
        }
    }
    }
}
