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
#define B_AT(k, n) LD(B, (k) * ldb + (n))
#define BIAS_OF(m, n) (bias_mode == 1 ? LD(bias, (m)) : bias_mode == 2 ? LD(bias, (n)) : (CT)0)
#define MADD(a, b, c) fma((a), (b), (c))
#define CTV float4
#define LDV(p, i) (*(const __global CTV*)((p) + (i)))
#define STV(p, i, v) (*(__global CTV*)((p) + (i)) = (v))
#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4
#define VW 4
#define NV 1
#define NT 256
#define VEC_C 0
__kernel __attribute__((reqd_work_group_size(16, 16, 1))) void gemm_vectorized_nn(
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
    __local CTV Ap4[BM * BK / VW + 1];
    __local CTV Bp4[BK * BN / VW + 1];
    __local CT* Ap = (__local CT*)Ap4;
    __local CT* Bp = (__local CT*)Bp4;
    const int lid = get_local_id(1) * 16 + get_local_id(0);
    const int m0 = get_group_id(1) * BM, n0 = get_group_id(0) * BN;

    const int t = lid;
    const int i0 = (t % (BM / TM)) * TM, j0 = (t / (BM / TM)) * TN;
            const __local CT* ap = Ap + (i0 / TM) * (BK * TM);
            const __local CT* bp = Bp + (j0 / TN) * (BK * TN);
    CTV acc[TM][NV];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < NV; ++j) acc[i][j] = (CTV)0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        const int kb = K - k0 < BK ? K - k0 : BK;
        for (int l = lid; l < BM * BK; l += NT) {
            const int r = l / BK, kk = l - r * BK;
            Ap[(r / TM) * (BK * TM) + kk * TM + r % TM] =
                (m0 + r < M && kk < kb) ? A_AT(m0 + r, k0 + kk) : (CT)0;
        }
        for (int l = lid; l < BK * BN; l += NT) {
            const int kk = l / BN, c = l - kk * BN;
            Bp[(c / TN) * (BK * TN) + kk * TN + c % TN] =
                (kk < kb && n0 + c < N) ? B_AT(k0 + kk, n0 + c) : (CT)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < kb; ++kk) {
                CTV b[NV];
                #pragma unroll
                for (int j = 0; j < NV; ++j) b[j] = *(const __local CTV*)(bp + kk * TN + j * VW);
                #pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const CTV a = (CTV)(ap[kk * TM + i]);
                    #pragma unroll
                    for (int j = 0; j < NV; ++j) acc[i][j] = MADD(a, b[j], acc[i][j]);
                }
            }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int first = 1;
    if (VEC_C && m0 + i0 + TM <= M && n0 + j0 + TN <= N) {
                #pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const int m = m0 + i0 + i;
                    #pragma unroll
                    for (int j = 0; j < NV; ++j) {
                        const int n = n0 + j0 + j * VW;
                        CTV v = acc[i][j];
                        if (first && bias_mode == 1) v += (CTV)(LD(bias, m));
                        else if (first && bias_mode == 2) v += LDV(bias, n);
                        if (!first) v += LDV(C, m * ldc + n);
                        STV(C, m * ldc + n, v);
                    }
                }
            } else {
                CT tile[TM][TN];
                #pragma unroll
                for (int i = 0; i < TM; ++i)
                    #pragma unroll
                    for (int j = 0; j < NV; ++j) {
                    tile[i][j * VW + 0] = acc[i][j].s0;
                    tile[i][j * VW + 1] = acc[i][j].s1;
                    tile[i][j * VW + 2] = acc[i][j].s2;
                    tile[i][j * VW + 3] = acc[i][j].s3;
                    }
                for (int i = 0; i < TM && m0 + i0 + i < M; ++i) {
                    const int m = m0 + i0 + i;
                    for (int c = 0; c < TN && n0 + j0 + c < N; ++c) {
                        const int n = n0 + j0 + c;
                        const CT prior = first ? BIAS_OF(m, n) : LD(C, m * ldc + n);
                        ST(C, m * ldc + n, prior + tile[i][c]);
                    }
                }
            }
}
