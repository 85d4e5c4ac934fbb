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
#define A_AT(m, k) LD(A, (m) * lda + (k))
#define B_AT(k, n) LD(B, (k) * ldb + (n))
#define BIAS_OF(m, n) (bias_mode == 1 ? LD(bias, (m)) : bias_mode == 2 ? LD(bias, (n)) : (CT)0)
#define MADD(a, b, c) fma((a), (b), (c))
#define BM 16
#define BN 16
#define BK 16
#define TM 1
#define RM 16
#define NT 256
__kernel __attribute__((reqd_work_group_size(16, 16, 1))) void gemm_tiled_nn(
    __global const T* restrict A, const int offA, const int lda, const int sA1, const int sA2,
    __global const T* restrict B, const int offB, const int ldb, const int sB1, const int sB2,
    __global T* restrict C, const int offC, const int ldc, const int sC1, const int sC2,
    const int M, const int N, const int K, const int nb2,
    __global const T* restrict bias, const int bias_mode, const int sbias)
{
    const int bz = get_global_id(2);
    const int b1 = bz / nb2, b2 = bz - b1 * nb2;
    A += offA + (long)b1 * sA1 + (long)b2 * sA2;
    B += offB + (long)b1 * sB1 + (long)b2 * sB2;
    C += offC + (long)b1 * sC1 + (long)b2 * sC2;
    bias += (long)b2 * sbias;
    __local CT As[BK][BM + 1];
    __local CT Bs[BK][BN];
    const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * BN + tx;
    const int m0 = get_group_id(1) * BM, n0 = get_group_id(0) * BN;
    CT acc[TM];
    #pragma unroll
    for (int i = 0; i < TM; ++i) acc[i] = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int l = tid; l < BM * BK; l += NT) {
            const int r = l / BK, kk = l - r * BK;
            As[kk][r] = (m0 + r < M && k0 + kk < K) ? A_AT(m0 + r, k0 + kk) : (CT)0;
        }
        for (int l = tid; l < BK * BN; l += NT) {
            const int kk = l / BN, c = l - kk * BN;
            Bs[kk][c] = (k0 + kk < K && n0 + c < N) ? B_AT(k0 + kk, n0 + c) : (CT)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < BK; ++kk) {
            const CT b = Bs[kk][tx];
            #pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] = MADD(As[kk][ty + i * RM], b, acc[i]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int n = n0 + tx;
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty + i * RM;
        if (m < M && n < N) ST(C, m * ldc + n, acc[i] + BIAS_OF(m, n));
    }
}
