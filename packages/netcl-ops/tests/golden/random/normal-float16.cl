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
#define IDX int
#define LIT(x) (x##f)
#define UNIT(u) ((float)((u) >> 21) * 0x1.0p-11f)

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

/* NOTE [ Portable Box-Muller ]: Cephes logf of u = m * 2^-24 (m = (w >> 8) + 1). */
inline float log_unit(const uint m) {
  const uint b = as_uint((float)m);
  int k = (int)(b >> 23) - 127 - 24;
  float x = as_float((b & 0x007FFFFFu) | 0x3F800000u);
  if (x < 0x1.6a09e6p+0f) { x = x - 1.0f; } else { x = 0.5f * x - 1.0f; k += 1; }
  const float z = x * x, fk = (float)k;
  float y;
  y = 0x1.204376p-4f;
  y = y * x - 0x1.d7a37p-4f;
  y = y * x + 0x1.de4a34p-4f;
  y = y * x - 0x1.fcba9ep-4f;
  y = y * x + 0x1.23d37ep-3f;
  y = y * x - 0x1.555cap-3f;
  y = y * x + 0x1.999d58p-3f;
  y = y * x - 0x1.fffff8p-3f;
  y = y * x + 0x1.555554p-2f;
  y = y * x * z;
  y = y + -0x1.bd0106p-13f * fk;
  y = y + -0.5f * z;
  return x + y + 0x1.63p-1f * fk;
}

/* sqrt(a), a > 0: Newton steps on the bit-trick 1 / sqrt(a), then one on sqrt(a) itself. */
inline float sqrt_pos(const float a) {
  float y = as_float(0x5f3759dfu - (as_uint(a) >> 1));
  const float h = 0.5f * a;
  y = y * (1.5f - h * y * y);
  y = y * (1.5f - h * y * y);
  y = y * (1.5f - h * y * y);
  const float r = a * y;
  return r + (a - r * r) * (0.5f * y);
}

/* sin and cos of 2 pi k / 2^11, Cephes' polynomials after an exact octant reduction. */
inline void sincos_turn(const uint k, float* s, float* c) {
  const uint q = k >> 9;
  uint r = k & 0x1ffu;
  const int swap = r > 0x100u;
  if (swap) r = 0x200u - r;
  const float x = (float)r * 0x1.921fb6p-9f, z = x * x;
  float ps, pc;
  ps = -0x1.9943f2p-13f;
  ps = ps * z + 0x1.11073cp-7f;
  ps = ps * z - 0x1.555546p-3f;
  pc = 0x1.99eb9cp-16f;
  pc = pc * z - 0x1.6c0c34p-10f;
  pc = pc * z + 0x1.55554ap-5f;
  const float sn = ps * z * x + x, cs = pc * z * z - 0.5f * z + 1.0f;
  const float a = swap ? cs : sn, b = swap ? sn : cs;
  *s = q == 0 ? a : q == 1 ? b : q == 2 ? -a : -b;
  *c = q == 0 ? b : q == 1 ? -a : q == 2 ? -b : a;
}

inline void box_muller(const uint w1, const uint w2, float* z0, float* z1) {
  const float a = -2.0f * log_unit((w1 >> 8) + 1u);
  const float r = a > 0.0f ? sqrt_pos(a) : 0.0f;
  float s, c;
  sincos_turn(w2 >> 21, &s, &c);
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
