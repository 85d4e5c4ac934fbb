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

__kernel void rng_dropout(__global T* out, __global uchar* mask, __global const T* x,
                          const IDX xo, const IDX n, const ulong offset,
                          const uint k0, const uint k1, const uint threshold, const CT scale) {
  BLOCK_WORDS
  FOR_LANES
    const uchar keep = (w[lane] >> 8) >= threshold;
    mask[e] = keep;
    ST(out, e, keep ? LD(x, xo + e) * scale : (CT)0);
  END_LANES
}
