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
#define IDX int
#define LIT(x) (x)
#define UNIT(u) ((double)(u) * 0x1.0p-32)

/* No a * b + c fused into one fma: the results must round as NumPy's do (see NOTE
   [ Portable Box-Muller ]). */
#pragma OPENCL FP_CONTRACT OFF

inline uint4 philox(const ulong block, uint k0, uint k1) {
  uint c0 = (uint)block, c1 = (uint)(block >> 32), c2 = 0u, c3 = 0u;
  for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const uint hi0 = mul_hi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint hi1 = mul_hi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
  }
  return (uint4)(c0, c1, c2, c3);
}

/* The block of this work item and its words; lanes outside [offset, offset + n) skip. */
#define BLOCK_WORDS \
  const ulong block = (offset >> 2) + get_global_id(0); \
  if (block * 4 >= offset + (ulong)n) return; \
  const uint4 w4 = philox(block, k0, k1); \
  const uint w[4] = {w4.x, w4.y, w4.z, w4.w};
#define FOR_LANES for (int lane = 0; lane < 4; ++lane) { \
  const ulong j = block * 4 + lane; \
  if (j < offset || j >= offset + (ulong)n) continue; \
  const IDX e = (IDX)(j - offset);
#define END_LANES }

/* NOTE [ Portable Box-Muller ]: fdlibm log of u = m * 2^-32 (m = w + 1 in [1, 2^32]). */
inline double log_unit(const ulong m) {
  const ulong b = as_ulong((double)m);
  int k = (int)(b >> 52) - 1023 - 32;
  double f = as_double((b & 0x000FFFFFFFFFFFFFul) | 0x3FF0000000000000ul);
  if (f >= 0x1.6a09e667f3bcdp+0) { f = 0.5 * f; k += 1; }
  f = f - 1.0;
  const double hfsq = 0.5 * f * f, s = f / (2.0 + f), z = s * s, w = z * z;
  double t1, t2;
  t1 = 0x1.39a09d078c69fp-3;
  t1 = t1 * w + 0x1.c71c51d8e78afp-3;
  t1 = t1 * w + 0x1.999999997fa04p-2;
  t1 = t1 * w;
  t2 = 0x1.2f112df3e5244p-3;
  t2 = t2 * w + 0x1.7466496cb03dep-3;
  t2 = t2 * w + 0x1.2492494229359p-2;
  t2 = t2 * w + 0x1.5555555555593p-1;
  t2 = t2 * z;
  const double dk = (double)k;
  return dk * 0x1.62e42feep-1 - ((hfsq - (s * (hfsq + (t2 + t1)) + dk * 0x1.a39ef35793c76p-33)) - f);
}

/* sin and cos of 2 pi k / 2^32, fdlibm's kernels after an exact octant reduction. */
inline void sincos_turn(const uint k, double* s, double* c) {
  const uint q = k >> 30;
  uint r = k & 0x3FFFFFFFu;
  const int swap = r > 0x20000000u;
  if (swap) r = 0x40000000u - r;
  const double x = (double)r * 0x1.921fb54442d18p-30, z = x * x, w = z * z;
  double ps, pc, pc2;
  ps = 0x1.5d93a5acfd57cp-33;
  ps = ps * z - 0x1.ae5e68a2b9cebp-26;
  ps = ps * z + 0x1.71de357b1fe7dp-19;
  ps = ps * z - 0x1.a01a019c161d5p-13;
  ps = ps * z + 0x1.111111110f8a6p-7;
  const double sn = x + z * x * (-0x1.5555555555549p-3 + z * ps);
  pc = 0x1.a01a019cb159p-16;
  pc = pc * z - 0x1.6c16c16c15177p-10;
  pc = pc * z + 0x1.555555555554cp-5;
  pc2 = -0x1.8fae9be8838d4p-37;
  pc2 = pc2 * z + 0x1.1ee9ebdb4b1c4p-29;
  pc2 = pc2 * z - 0x1.27e4f809c52adp-22;
  const double hz = 0.5 * z, one_minus = 1.0 - hz;
  const double cs = one_minus + (((1.0 - one_minus) - hz) + z * (z * pc + w * w * pc2));
  const double a = swap ? cs : sn, b = swap ? sn : cs;
  *s = q == 0 ? a : q == 1 ? b : q == 2 ? -a : -b;
  *c = q == 0 ? b : q == 1 ? -a : q == 2 ? -b : a;
}

inline void box_muller(const uint w1, const uint w2, double* z0, double* z1) {
  const double r = sqrt(-2.0 * log_unit((ulong)w1 + 1ul));
  double s, c;
  sincos_turn(w2, &s, &c);
  *z0 = r * c;
  *z1 = r * s;
}

__kernel void rng_normal(__global T* out, const IDX n, const ulong offset,
                         const uint k0, const uint k1, const CT mean, const CT std) {
  BLOCK_WORDS
  CT z[4];
  box_muller(w[0], w[1], &z[0], &z[1]);
  box_muller(w[2], w[3], &z[2], &z[3]);
  FOR_LANES ST(out, e, mean + std * z[lane]); END_LANES
}
