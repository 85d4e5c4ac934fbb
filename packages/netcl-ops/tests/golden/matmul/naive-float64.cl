#pragma OPENCL EXTENSION cl_khr_fp64 : enable
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
#define T double
#define CT double
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define A_AT(m, k) LD(A, (m) * lda + (k))
#define B_AT(k, n) LD(B, (k) * ldb + (n))
#define BIAS_OF(m, n) (bias_mode == 1 ? LD(bias, (m)) : bias_mode == 2 ? LD(bias, (n)) : (CT)0)
#define MADD(a, b, c) fma((a), (b), (c))
__kernel void gemm_naive_nn(
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
    const int n = get_global_id(0), m = get_global_id(1);
    if (m >= M || n >= N) return;
    CT acc = 0;
    for (int k = 0; k < K; ++k) acc = MADD(A_AT(m, k), B_AT(k, n), acc);
    ST(C, m * ldc + n, acc + BIAS_OF(m, n));
}
