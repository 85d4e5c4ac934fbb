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
#define LT long

__kernel void nll_k(__global T* out, __global const T* logp, const IDX lo,
                    __global const LT* labels, const IDX yo,
                    const IDX C, const long ignore, const IDX n, __global int* bad)
{
  const IDX i = get_global_id(0);
  if (i >= n) return;
  const long y = (long)labels[yo + i];
  if (y == ignore) ST(out, i, (CT)0);
  else if (y < 0 || y >= (long)C) { ST(out, i, (CT)NAN); *bad = 1; }  /* no read; see NOTE */
  else ST(out, i, -LD(logp, lo + i * C + (IDX)y));
}
