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
#define A_AT(m, k) LD(A, (m) * lda + (k))
#define B_AT(k, n) LD(B, (n) * ldb + (k))
#define BIAS_OF(m, n) (bias_mode == 1 ? LD(bias, (m)) : bias_mode == 2 ? LD(bias, (n)) : (CT)0)
#define MADD(a, b, c) fma((a), (b), (c))
#define GL_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#define CTV float4
#define LDV(p, i) (*(const __global CTV*)((p) + (i)))
#define STV(p, i, v) (*(__global CTV*)((p) + (i)) = (v))
#define BM 128
#define BN 128
#define BK 8
#define TM 16
#define TN 8
#define RM 8
#define RN 16
#define NT 128
#define LDA_S 132
#define LDB_S 132
#define KSEL(k, v, zero) ((k) < K ? (v) : (zero))
__kernel __attribute__((reqd_work_group_size(16, 8, 1))) void gemm_register_tiled_nt_split(
    __global const T* restrict A, const int offA, const int lda, const int sA1, const int sA2,
    __global const T* restrict B, const int offB, const int ldb, const int sB1, const int sB2,
    __global T* restrict C, const int offC, const int ldc, const int sC1, const int sC2,
    const int M, const int N, const int Kall, const int nb2,
    __global const T* restrict bias, const int bias_mode, const int sbias,
    const int ks, __global CT* W, const int offW, volatile __global int* restrict tickets)
{
    const int bz = get_global_id(2);
    const int b1 = bz / nb2, b2 = bz - b1 * nb2;
    A += offA + (long)b1 * sA1 + (long)b2 * sA2;
    B += offB + (long)b1 * sB1 + (long)b2 * sB2;
    C += offC + (long)b1 * sC1 + (long)b2 * sC2;
    bias += (long)b2 * sbias;
    const int K = min(ks, Kall - b2 * ks);
    W += offW;
    __local CTV As4[2 * BK * LDA_S / 4];
    __local CTV Bs4[2 * BK * LDB_S / 4];
    __local int last_group;
    const int tid = get_local_id(1) * RN + get_local_id(0);
    const int lane = tid & 31, warp = tid >> 5;
    const int tx = (warp % (RN / 8)) * 8 + lane % 8;
    const int ty = (warp / (RN / 8)) * 4 + lane / 8;
    const int m0 = get_group_id(1) * BM, n0 = get_group_id(0) * BN;
    CT acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0;
    CTV ra[2];
    CTV rb[2];
    const int ntiles = (K + BK - 1) / BK;
    int k0 = 0;
    if (ntiles > 0) {
        __local CT* As_ = (__local CT*)As4;
        __local CT* Bs_ = (__local CT*)Bs4;
        #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int l = tid + i * NT; const int r = l / (BK / 4), kq = (l - r * (BK / 4)) * 4;
             ra[i] = KSEL(k0 + kq, LDV(A, min(m0 + r, M - 1) * lda + min(k0 + kq, K - 4)), (CTV)0); 
        }
        #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int l = tid + i * NT; const int c = l / (BK / 4), kq = (l - c * (BK / 4)) * 4;
             rb[i] = KSEL(k0 + kq, LDV(B, min(n0 + c, N - 1) * ldb + min(k0 + kq, K - 4)), (CTV)0); 
        }
        #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int l = tid + i * NT; const int r = l / (BK / 4), kq = (l - r * (BK / 4)) * 4;
             As_[kq * LDA_S + r] = ra[i].s0; As_[(kq + 1) * LDA_S + r] = ra[i].s1; As_[(kq + 2) * LDA_S + r] = ra[i].s2; As_[(kq + 3) * LDA_S + r] = ra[i].s3; 
        }
        #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int l = tid + i * NT; const int c = l / (BK / 4), kq = (l - c * (BK / 4)) * 4;
             Bs_[kq * LDB_S + c] = rb[i].s0; Bs_[(kq + 1) * LDB_S + c] = rb[i].s1; Bs_[(kq + 2) * LDB_S + c] = rb[i].s2; Bs_[(kq + 3) * LDB_S + c] = rb[i].s3; 
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < ntiles; ++t) {
        const int cur = t & 1;
        const __local CT* Ac = (const __local CT*)As4 + cur * BK * LDA_S;
        const __local CT* Bc = (const __local CT*)Bs4 + cur * BK * LDB_S;
        k0 = (t + 1) * BK;
        if (t + 1 < ntiles) {
            #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int l = tid + i * NT; const int r = l / (BK / 4), kq = (l - r * (BK / 4)) * 4;
             ra[i] = KSEL(k0 + kq, LDV(A, min(m0 + r, M - 1) * lda + min(k0 + kq, K - 4)), (CTV)0); 
        }
            #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int l = tid + i * NT; const int c = l / (BK / 4), kq = (l - c * (BK / 4)) * 4;
             rb[i] = KSEL(k0 + kq, LDV(B, min(n0 + c, N - 1) * ldb + min(k0 + kq, K - 4)), (CTV)0); 
        }
        }
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            CT a[TM], b[TN];
            #pragma unroll
            for (int j = 0; j < 16 / 4; ++j) {
                const CTV v = *(const __local CTV*)(Ac + kk * LDA_S + j * (RM * 4) + ty * 4);
                a[4 * j] = v.s0; a[4 * j + 1] = v.s1;
                a[4 * j + 2] = v.s2; a[4 * j + 3] = v.s3;
            }
            #pragma unroll
            for (int j = 0; j < 8 / 4; ++j) {
                const CTV v = *(const __local CTV*)(Bc + kk * LDB_S + j * (RN * 4) + tx * 4);
                b[4 * j] = v.s0; b[4 * j + 1] = v.s1;
                b[4 * j + 2] = v.s2; b[4 * j + 3] = v.s3;
            }
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = MADD(a[i], b[j], acc[i][j]);
        }
        if (t + 1 < ntiles) {
            __local CT* As_ = (__local CT*)As4 + (cur ^ 1) * BK * LDA_S;
            __local CT* Bs_ = (__local CT*)Bs4 + (cur ^ 1) * BK * LDB_S;
            #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int l = tid + i * NT; const int r = l / (BK / 4), kq = (l - r * (BK / 4)) * 4;
             As_[kq * LDA_S + r] = ra[i].s0; As_[(kq + 1) * LDA_S + r] = ra[i].s1; As_[(kq + 2) * LDA_S + r] = ra[i].s2; As_[(kq + 3) * LDA_S + r] = ra[i].s3; 
        }
            #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int l = tid + i * NT; const int c = l / (BK / 4), kq = (l - c * (BK / 4)) * 4;
             Bs_[kq * LDB_S + c] = rb[i].s0; Bs_[(kq + 1) * LDB_S + c] = rb[i].s1; Bs_[(kq + 2) * LDB_S + c] = rb[i].s2; Bs_[(kq + 3) * LDB_S + c] = rb[i].s3; 
        }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    {
        const int tile = get_group_id(1) * get_num_groups(0) + get_group_id(0);
        __global CTV* w = (__global CTV*)(W + (long)tile * nb2 * (NT * TM * TN)) + tid;
        __global CTV* wb = w + (long)b2 * (NT * TM * TN / 4);
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; j += 4) wb[(i * (TN / 4) + j / 4) * NT] = (CTV)(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        GL_FENCE();  // this work-item's partial is visible device-wide before the ticket
        barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
        if (tid == 0) last_group = atomic_inc(&tickets[tile]) == nb2 - 1;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!last_group) return;
        GL_FENCE();
        if (tid == 0) tickets[tile] = 0;  // every slice has taken its ticket: ready to reuse
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = 0;
        for (int z = 0; z < nb2; ++z) {  // in slice order: the same bits whoever is last
            const __global CTV* wz = w + (long)z * (NT * TM * TN / 4);
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; j += 4) { const CTV v = wz[(i * (TN / 4) + j / 4) * NT]; acc[i][j] += v.s0; acc[i][j + 1] += v.s1; acc[i][j + 2] += v.s2; acc[i][j + 3] += v.s3; }
        }
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ((i) >> 2) * (RM * 4) + ty * 4 + ((i) & 3);
        #pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int n = n0 + ((j) >> 2) * (RN * 4) + tx * 4 + ((j) & 3);
            if (m < M && n < N) {
                CTV v = (CTV)(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
                if (bias_mode == 1) v += (CTV)(LD(bias, m));
                else if (bias_mode == 2) v += LDV(bias, n);
                STV(C, m * ldc + n, v);
            }
        }
    }
}
