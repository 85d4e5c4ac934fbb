"""Box-Muller normals that are bit-identical on every backend: the OpenCL helper
``box_muller`` and its NumPy twin, one operation for one operation.

# NOTE [ Portable Box-Muller ]
# OpenCL lets log, cos and sin be off by 3-4 ulp in float32 (float sqrt by 3, float division
# by 2.5), differently on each device and differently from NumPy, so Box-Muller written with
# the builtins gave normals up to 8 ulp apart across backends. Here each value is computed by
# the same sequence of IEEE-754 operations on both sides, using only what OpenCL's full
# profile rounds correctly: float32 and float64 +, - and *, float64 / and sqrt, conversions of
# integers that fit, and bit reinterpretation. The kernels build with
# ``#pragma OPENCL FP_CONTRACT OFF`` so that no ``a * b + c`` becomes one fma (one rounding
# instead of two); NumPy never fuses. So:
# - the range reductions are exact, done on integers: ``u1 = m * 2^-P`` with the integer
#   ``m``, whose float exponent and mantissa split ``log(u1)`` exactly, and the angle
#   ``2 pi k / 2^B`` with the integer ``k``, whose top two bits are the quadrant and whose
#   octant folds into ``[0, pi / 4]`` by ``2^(B-2) - r``;
# - float32 (float16 outputs too, computed in float32): Cephes' logf, sinf and cosf
#   polynomials, and a square root by three Newton steps on the bit-trick reciprocal square
#   root plus one correction (float32 sqrt itself is not correctly rounded in OpenCL);
# - float64: fdlibm's log (its one division is correctly rounded in float64), __kernel_sin and
#   __kernel_cos, and the (correctly rounded) float64 sqrt.
# No float32 intermediate is subnormal (the smallest nonzero one, about 1e-27, is a cosine term
# of the smallest angle), so devices that flush float32 subnormals agree too. Against float64
# libm the error is at most 3 float32 ulps of r = sqrt(-2 log u1) in float32 (2.4 measured
# over 2^20 pairs) and 1e-15 max(r, 1) in float64; test_random checks both bounds and the
# bit-identity on every device present. What could still differ: a device whose float32 add
# or multiply does not round to nearest even (only OpenCL's embedded profile allows that).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["box_muller_source", "np_box_muller"]

# Cephes logf: ln(1 + x) = x - x^2 / 2 + x^3 P(x), x in [sqrt(1/2) - 1, sqrt(2) - 1]
_LOGF_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
           1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
           3.3333331174e-1)
_LOGF_LN2_LO, _LOGF_LN2_HI = -2.12194440e-4, 0.693359375
# Cephes sinf / cosf on [0, pi / 4]: sin = x + x^3 S(x^2), cos = 1 - x^2 / 2 + x^4 C(x^2)
_SINF_S = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COSF_C = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
# fdlibm log (e_log.c): ln(f) = 2s + s R(s^2) with s = (f - 1) / (f + 1) on [sqrt(1/2), sqrt(2)]
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
       1.479819860511658591e-01)
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
# fdlibm __kernel_sin / __kernel_cos on [-pi / 4, pi / 4]
_KSIN = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
         2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
_KCOS = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
         -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)

_F32 = np.float32
_SQRT2_F32 = _F32(math.sqrt(2.0))
_RSQRT_MAGIC = 0x5F3759DF


def _angle_bits(dtype: str) -> int:
    """Bits of the angle's integer numerator: the resolution of ``uniform``'s unit value."""
    return {"float64": 32, "float16": 11}.get(dtype, 24)


def _hex(v: float) -> str:
    mantissa, exponent = float(v).hex().split("p")
    return f"{mantissa.rstrip('0').rstrip('.')}p{exponent}"


def _c32(v: float) -> str:
    """A float32 constant as an exact C literal (the value NumPy's ``np.float32(v)`` holds)."""
    return f"{_hex(float(_F32(v)))}f"


def _c64(v: float) -> str:
    """A float64 constant as an exact C literal."""
    return _hex(v)


def _horner_c(var: str, coeffs: tuple[float, ...], z: str, lit: Any) -> str:
    """C statements ``var = c0; var = var * z + c1; ...``, one per line: a multiply and an
    add per step, as :func:`_horner` does (``a - c`` is ``a + (-c)`` exactly)."""
    steps = [f"{var} = {lit(coeffs[0])};"]
    for c in coeffs[1:]:
        sign = "-" if c < 0 else "+"
        steps.append(f"{var} = {var} * {z} {sign} {lit(abs(c))};")
    return "\n  ".join(steps)


def box_muller_source(dtype: str) -> str:
    """OpenCL C defining ``box_muller(w1, w2, &z0, &z1)``: two standard normals in the compute
    type from two stream words, for a program of ``dtype`` built with FP_CONTRACT OFF."""
    bits = _angle_bits(dtype)
    if dtype == "float64":
        step = _c64(2 * math.pi / 2.0**bits)
        return f"""
/* NOTE [ Portable Box-Muller ]: fdlibm log of u = m * 2^-32 (m = w + 1 in [1, 2^32]). */
inline double log_unit(const ulong m) {{
  const ulong b = as_ulong((double)m);
  int k = (int)(b >> 52) - 1023 - 32;
  double f = as_double((b & 0x000FFFFFFFFFFFFFul) | 0x3FF0000000000000ul);
  if (f >= {_c64(math.sqrt(2.0))}) {{ f = 0.5 * f; k += 1; }}
  f = f - 1.0;
  const double hfsq = 0.5 * f * f, s = f / (2.0 + f), z = s * s, w = z * z;
  double t1, t2;
  {_horner_c("t1", _LG[5::-2], "w", _c64)}
  t1 = t1 * w;
  {_horner_c("t2", _LG[6::-2], "w", _c64)}
  t2 = t2 * z;
  const double dk = (double)k;
  return dk * {_c64(_LN2_HI)} - ((hfsq - (s * (hfsq + (t2 + t1)) + dk * {_c64(_LN2_LO)})) - f);
}}

/* sin and cos of 2 pi k / 2^32, fdlibm's kernels after an exact octant reduction. */
inline void sincos_turn(const uint k, double* s, double* c) {{
  const uint q = k >> 30;
  uint r = k & 0x3FFFFFFFu;
  const int swap = r > 0x20000000u;
  if (swap) r = 0x40000000u - r;
  const double x = (double)r * {step}, z = x * x, w = z * z;
  double ps, pc, pc2;
  {_horner_c("ps", _KSIN[:0:-1], "z", _c64)}
  const double sn = x + z * x * ({_c64(_KSIN[0])} + z * ps);
  {_horner_c("pc", _KCOS[2::-1], "z", _c64)}
  {_horner_c("pc2", _KCOS[:2:-1], "z", _c64)}
  const double hz = 0.5 * z, one_minus = 1.0 - hz;
  const double cs = one_minus + (((1.0 - one_minus) - hz) + z * (z * pc + w * w * pc2));
  const double a = swap ? cs : sn, b = swap ? sn : cs;
  *s = q == 0 ? a : q == 1 ? b : q == 2 ? -a : -b;
  *c = q == 0 ? b : q == 1 ? -a : q == 2 ? -b : a;
}}

inline void box_muller(const uint w1, const uint w2, double* z0, double* z1) {{
  const double r = sqrt(-2.0 * log_unit((ulong)w1 + 1ul));
  double s, c;
  sincos_turn(w2, &s, &c);
  *z0 = r * c;
  *z1 = r * s;
}}
"""
    step = _c32(2 * math.pi / 2.0**bits)
    quarter, eighth = 1 << (bits - 2), 1 << (bits - 3)
    return f"""
/* NOTE [ Portable Box-Muller ]: Cephes logf of u = m * 2^-24 (m = (w >> 8) + 1). */
inline float log_unit(const uint m) {{
  const uint b = as_uint((float)m);
  int k = (int)(b >> 23) - 127 - 24;
  float x = as_float((b & 0x007FFFFFu) | 0x3F800000u);
  if (x < {_c32(_SQRT2_F32)}) {{ x = x - 1.0f; }} else {{ x = 0.5f * x - 1.0f; k += 1; }}
  const float z = x * x, fk = (float)k;
  float y;
  {_horner_c("y", _LOGF_P, "x", _c32)}
  y = y * x * z;
  y = y + {_c32(_LOGF_LN2_LO)} * fk;
  y = y + -0.5f * z;
  return x + y + {_c32(_LOGF_LN2_HI)} * fk;
}}

/* sqrt(a), a > 0: Newton steps on the bit-trick 1 / sqrt(a), then one on sqrt(a) itself. */
inline float sqrt_pos(const float a) {{
  float y = as_float({_RSQRT_MAGIC:#x}u - (as_uint(a) >> 1));
  const float h = 0.5f * a;
  y = y * (1.5f - h * y * y);
  y = y * (1.5f - h * y * y);
  y = y * (1.5f - h * y * y);
  const float r = a * y;
  return r + (a - r * r) * (0.5f * y);
}}

/* sin and cos of 2 pi k / 2^{bits}, Cephes' polynomials after an exact octant reduction. */
inline void sincos_turn(const uint k, float* s, float* c) {{
  const uint q = k >> {bits - 2};
  uint r = k & {quarter - 1:#x}u;
  const int swap = r > {eighth:#x}u;
  if (swap) r = {quarter:#x}u - r;
  const float x = (float)r * {step}, z = x * x;
  float ps, pc;
  {_horner_c("ps", _SINF_S, "z", _c32)}
  {_horner_c("pc", _COSF_C, "z", _c32)}
  const float sn = ps * z * x + x, cs = pc * z * z - 0.5f * z + 1.0f;
  const float a = swap ? cs : sn, b = swap ? sn : cs;
  *s = q == 0 ? a : q == 1 ? b : q == 2 ? -a : -b;
  *c = q == 0 ? b : q == 1 ? -a : q == 2 ? -b : a;
}}

inline void box_muller(const uint w1, const uint w2, float* z0, float* z1) {{
  const float a = -2.0f * log_unit((w1 >> 8) + 1u);
  const float r = a > 0.0f ? sqrt_pos(a) : 0.0f;
  float s, c;
  sincos_turn(w2 >> {32 - bits}, &s, &c);
  *z0 = r * c;
  *z1 = r * s;
}}
"""


# -- the NumPy twin: the same operations, in the same order ------------------------------------


def _horner(coeffs: tuple[float, ...], z: np.ndarray[Any, Any], ct: Any) -> Any:
    y = np.full(z.shape, ct(coeffs[0]), dtype=ct)
    for c in coeffs[1:]:
        y = y * z + ct(c)
    return y


def _turn(k: np.ndarray[Any, Any], bits: int, ct: Any, sn: np.ndarray[Any, Any],
          cs: np.ndarray[Any, Any], swap: np.ndarray[Any, Any]
          ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(sin, cos) of the whole angle from those of its folded octant."""
    q = k >> (bits - 2)
    a, b = np.where(swap, cs, sn), np.where(swap, sn, cs)
    s = np.select([q == 0, q == 1, q == 2], [a, b, -a], -b).astype(ct)
    c = np.select([q == 0, q == 1, q == 2], [b, -a, -b], a).astype(ct)
    return s, c


def _fold(k: np.ndarray[Any, Any], bits: int) -> tuple[np.ndarray[Any, Any], Any]:
    quarter = 1 << (bits - 2)
    r = k & (quarter - 1)
    swap = r > (quarter >> 1)
    return np.where(swap, quarter - r, r), swap


def _np_f32(w1: np.ndarray[Any, Any], w2: np.ndarray[Any, Any], bits: int
            ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    f = _F32
    m = ((w1 >> 8) + 1).astype(np.float32)
    b = m.view(np.uint32)
    k = (b >> 23).astype(np.int32) - 127 - 24
    x = ((b & 0x007FFFFF) | 0x3F800000).astype(np.uint32).view(np.float32)
    low = x < _SQRT2_F32
    x = np.where(low, x - f(1), f(0.5) * x - f(1))
    k = np.where(low, k, k + 1)
    z, fk = x * x, k.astype(np.float32)
    y = _horner(_LOGF_P, x, f) * x * z
    y = y + f(_LOGF_LN2_LO) * fk
    y = y + f(-0.5) * z
    a = f(-2) * (x + y + f(_LOGF_LN2_HI) * fk)
    with np.errstate(invalid="ignore", over="ignore"):  # lanes with a <= 0 are discarded
        yr = (np.uint32(_RSQRT_MAGIC) - (a.view(np.uint32) >> 1)).view(np.float32)
        h = f(0.5) * a
        for _ in range(3):
            yr = yr * (f(1.5) - h * yr * yr)
        r0 = a * yr
        r = np.where(a > 0, r0 + (a - r0 * r0) * (f(0.5) * yr), f(0))
    kk = w2 >> (32 - bits)
    rr, swap = _fold(kk, bits)
    xa = rr.astype(np.float32) * f(2 * math.pi / 2.0**bits)
    za = xa * xa
    sn = _horner(_SINF_S, za, f) * za * xa + xa
    cs = _horner(_COSF_C, za, f) * za * za - f(0.5) * za + f(1)
    s, c = _turn(kk, bits, f, sn, cs, swap)
    return r * c, r * s


def _np_f64(w1: np.ndarray[Any, Any], w2: np.ndarray[Any, Any]
            ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    m = w1.astype(np.float64) + 1.0  # exact: an integer up to 2^32
    b = m.view(np.uint64)
    k = (b >> np.uint64(52)).astype(np.int64) - 1023 - 32
    f = ((b & np.uint64(0x000FFFFFFFFFFFFF)) | np.uint64(0x3FF0000000000000)).view(np.float64)
    high = f >= math.sqrt(2.0)
    f = np.where(high, 0.5 * f, f) - 1.0
    k = np.where(high, k + 1, k)
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = _horner(_LG[5::-2], w, np.float64) * w
    t2 = _horner(_LG[6::-2], w, np.float64) * z
    dk = k.astype(np.float64)
    log_u = dk * _LN2_HI - ((hfsq - (s * (hfsq + (t2 + t1)) + dk * _LN2_LO)) - f)
    r = np.sqrt(-2.0 * log_u)
    kk = w2.astype(np.uint64)
    rr, swap = _fold(kk, 32)
    x = rr.astype(np.float64) * (2 * math.pi / 2.0**32)
    z = x * x
    w = z * z
    sn = x + z * x * (_KSIN[0] + z * _horner(_KSIN[:0:-1], z, np.float64))
    pc = _horner(_KCOS[2::-1], z, np.float64)
    pc2 = _horner(_KCOS[:2:-1], z, np.float64)
    hz = 0.5 * z
    one_minus = 1.0 - hz
    cs = one_minus + (((1.0 - one_minus) - hz) + z * (z * pc + w * w * pc2))
    sin, cos = _turn(kk, 32, np.float64, sn, cs, swap)
    return r * cos, r * sin


def np_box_muller(w1: np.ndarray[Any, Any], w2: np.ndarray[Any, Any], dtype: str
                  ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """NumPy's ``box_muller``: the normals ``(z0, z1)`` of word pairs ``(w1, w2)`` (uint32), in
    float64 for ``dtype`` float64 and float32 otherwise, bit for bit as the kernel computes
    them."""
    if dtype == "float64":
        return _np_f64(w1, w2)
    return _np_f32(w1, w2, _angle_bits(dtype))
