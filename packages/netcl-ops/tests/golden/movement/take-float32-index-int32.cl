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
#define IDX int
#define TIX int
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
