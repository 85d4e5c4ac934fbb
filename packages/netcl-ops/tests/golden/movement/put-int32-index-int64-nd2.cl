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
#define T int
#define CT int
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define IDX int
#define TIX long

__kernel void put_k(__global T* out, const IDX oo, __global const T* src, const IDX so,
                    __global const TIX* index, const IDX io, const IDX A, const IDX ast,
                    const IDX n, const IDX d0, const IDX d1, const IDX os0, const IDX os1, const IDX ss0, const IDX ss1, const IDX is0, const IDX is1)
{
  const IDX i = get_global_id(0);
  if (i >= n) return;
  IDX r = i, o = oo, s = so, x = io;
  { const IDX c = r % d1; r /= d1; o += c * os1; s += c * ss1; x += c * is1; }
  { const IDX c = r % d0; r /= d0; o += c * os0; s += c * ss0; x += c * is0; }
  long v = (long)index[x];
  if (v < 0) v += (long)A;
  if (v < 0 || v >= (long)A) return;
  ST(out, o + (IDX)v * ast, LD(src, s));
}
