#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#ifndef NETCL_PRIMITIVES
#define NETCL_PRIMITIVES
#define LOAD(p, i) ((p)[(i)])
#define STORE(p, i, v) ((p)[(i)] = (v))
#define LOAD_HALF(p, i) vload_half((i), (p))
#define STORE_HALF(p, i, v) vstore_half((v), (i), (p))
#define ADD(a, b) ((a) + (b))
#define SUB(a, b) ((a) - (b))
#define MUL(a, b) ((a) * (b))
#define DIV(a, b) ((a) / (b))
#define NEG(a) (-(a))
#define SQR(a) ((a) * (a))
#define RELU(x) ((x) > 0 ? (x) : 0)
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#endif
#define T double
#define CT double
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define IDX int
#define TIX long
#define OOB ((CT)NAN)

__kernel void take_k(__global T* out, __global const T* x, const IDX xo,
                     __global const TIX* index, const IDX io,
                     const IDX so, const IDX sk, const IDX sj,
                     const IDX K, const IDX A, const IDX inner, const IDX n)
{
  const IDX i = get_global_id(0);
  if (i >= n) return;
  const IDX j = i % inner;
  const IDX t = i / inner;
  const IDX k = t % K;
  const IDX o = t / K;
  const long v = (long)index[io + o * so + k * sk + j * sj];
  if (v < 0 || v >= (long)A) {
    ST(out, i, OOB);
  } else {
    ST(out, i, LD(x, xo + (o * A + (IDX)v) * inner + j));
  }
}
