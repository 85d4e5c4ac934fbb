"""Warp-per-row softmax: ``softmax_warp``'s OpenCL source, :func:`warp_plan` and the switches
that choose it (``NETCL_SOFTMAX_KERNEL``, ``NETCL_SOFTMAX_SHUFFLE``).

# NOTE [ Warp-per-row softmax ]
# softmax_row (one work-group per row, local-memory trees) ran 4096x1024 at 0.58x PyTorch on an
# H200 (20.1 us, 42% of copy bandwidth) and softmax_mrow (rows of W lanes, the row's max and
# sum through local memory and two to four barriers) slower still (26.0 us). PyTorch's
# "persistent softmax" gives each row of <= 1024 elements one warp: the row in registers,
# max and sum by warp shuffles, no local memory, no barrier; 4 warps per block (11.6 us).
# softmax_warp does the same in OpenCL: W lanes per row (a power of two from 8: one warp, part
# of one, or W / 32 warps for rows of 1025..32768), get_local_size(0) / W rows per work-group.
# Lane l of a row holds the row's 4-vectors l, l + W, ... (``VPL4`` of them, a compile-time
# 1, 2, 4 or 8: the registers a row needs and no more) exactly as softmax_mrow reads them
# (``ROW_READ`` of ._softmax_rows: 16-byte loads contiguous across a warp; a scalar head and
# tail around each row's 4-aligned middle; scalars, element l + W k, for an input offset not a
# multiple of 4). The row max, then the sum of exp(v - max), each go through a butterfly of
# ``shfl.sync.bfly.b32`` over min(W, 32) lanes (inline PTX: NVIDIA's OpenCL has no
# sub-groups); for W > 32 lane 0 of each warp then puts its warp's value in local memory and,
# after one barrier, each lane folds its row's W / 32 of them in order. A butterfly leaves the
# same bits in every lane (each step combines the same pair on both lanes; a zero max may
# differ in sign, which changes no result), so every lane scales by the same max and sum.
# exp is computed once per element (kept in registers for softmax), each element read once
# and written once; float16 in 8-byte half4 loads and stores where the device has
# cl_khr_fp16 (vload_half4 elsewhere), computed in float. NaN, +inf and all -inf rows: the
# semantics of softmax_mrow (a NaN or +inf makes the row NaN, an all -inf row is NaN).
# Devices without PTX (and ``NETCL_SOFTMAX_SHUFFLE=emulate``) run the same kernel with each
# shuffle emulated through local memory (two barriers: every lane of the work-group reaches
# every shuffle, as the kernel is written), so CPU tests exercise the code the GPU runs; the
# choice is the compile-time ``SHFL_PTX``. Where it runs by default (measured): NVIDIA GPUs, rows of
# ``WARP_MIN``..``WARP_MAX`` elements of float32 or float16 (float64 keeps softmax_row);
# ``NETCL_SOFTMAX_KERNEL=row|mrow|warp`` forces a kernel (see :func:`forced_kernel`).
# Registers decide how many rows an SM holds at once (4096x1024 is 4096 warps; an H200 holds
# 132 x 64 at most, fewer the more registers a lane uses): ``NETCL_SOFTMAX_WARP_REGS=N``
# builds the PTX kernel with ``-cl-nv-maxrregcount=N`` (:func:`register_cap`) to measure that.
# Not yet timed on a GPU (benchmarks/bench_membound.py --only softmax,plans times it beside
# softmax_row, softmax_mrow and PyTorch, and prints its ptxas registers).
"""

from __future__ import annotations

import os
from typing import Any

from netcl.core.env import env_choice, env_raw

from ._softmax_rows import MATH_DEFINES, ROW_READ, ROW_STORE
from ._split_sync import ptx_fence
from ._warp_shuffle import SHUFFLE_SOURCE

__all__ = [
    "KERNEL_ENV",
    "KERNELS",
    "REGS_ENV",
    "SHUFFLE_ENV",
    "WARP_LOCAL",
    "WARP_MAX",
    "WARP_MIN",
    "WARP_SOURCE",
    "fast_math",
    "forced_kernel",
    "hardware_shuffle",
    "register_cap",
    "warp_plan",
]

KERNEL_ENV = "NETCL_SOFTMAX_KERNEL"  # row | mrow | warp | auto: the row kernel softmax runs
KERNELS = ("auto", "row", "mrow", "warp")
SHUFFLE_ENV = "NETCL_SOFTMAX_SHUFFLE"  # hardware | emulate: softmax_warp's shuffles
SHUFFLES = ("hardware", "emulate")
REGS_ENV = "NETCL_SOFTMAX_WARP_REGS"  # N: -cl-nv-maxrregcount=N for the PTX kernel
MATH_ENV = "NETCL_SOFTMAX_MATH"  # exact | fast: NOTE [ Softmax arithmetic ] in ._softmax_rows
MATHS = ("exact", "fast")
WARP_LOCAL = 128  # work-group size by default (4 warps, as PyTorch's), or W where larger
# H200 (bench_membound --only softmax, 2026-11-29, device time; softmax_row / softmax_mrow /
# softmax_warp, x PyTorch): 16384x128 0.30 / 0.49 / 0.80, 4096x256 0.63 / 0.64 / 1.09,
# 4096x1024 0.52 / 0.38 / 0.40 (0.44 with 64 registers), 32768x1000 0.59 / 0.49 / 0.57,
# 8192x2048 0.67 / 0.53 / 0.63, 4096x4096 0.85 / 0.70 / 0.83: the warp kernel wins on short
# rows only.
WARP_MIN = 32  # rows this long to ...
WARP_MAX = 512  # ... this long take softmax_warp by default on NVIDIA GPUs (float32, float16)
_VEC4 = (1, 2, 4, 8)  # 4-vectors per lane, one program each
_MIN_W = 8  # the fewest lanes per row (a head and a tail need up to 6)

WARP_SOURCE = "#define XOR_SCRATCH LMAX\n" + SHUFFLE_SOURCE + MATH_DEFINES + """
#define MAXNAN(a, b) (((b) > (a) || isnan(b)) ? (b) : (a))
#define MAX4(v) MAXNAN(MAXNAN((v).x, (v).y), MAXNAN((v).z, (v).w))
#define ROW_REDUCE(a, is_max, part) \\
  row_reduce((a), (is_max), W, l, (part) XOR_ARG)
#if SHFL_PTX
#define XOR_ARG
#define XOR_PARAM
#else
#define XOR_ARG , sc
#define XOR_PARAM , __local CT* sc
#endif

/* Max (is_max) or sum of a over the W lanes of each row: a butterfly over min(W, 32) lanes,
   then for W > 32 the row's W / 32 warp values through part (one barrier; W is a kernel
   argument, so every lane takes the branch). */
inline CT row_reduce(CT a, const int is_max, const int W, const int l, __local CT* part
                     XOR_PARAM)
{
  for (int o = (W < 32 ? W : 32) >> 1; o > 0; o >>= 1) {
    const CT b = XOR(a, o);
    a = is_max ? MAXNAN(a, b) : a + b;
  }
  if (W > 32) {
    if ((l & 31) == 0) part[l >> 5] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    __local const CT* p = part + ((l & ~(W - 1)) >> 5);
    a = p[0];
    for (int i = 1; i < (W >> 5); ++i) a = is_max ? MAXNAN(a, p[i]) : a + p[i];
  }
  return a;
}

/* W lanes per row (a power of two from 8), get_local_size(0) / W rows per work-group (a
   multiple of 32 items), VPL4 4-vectors per lane (NOTE [ Warp-per-row softmax ]); vec:
   4-vectors with a scalar head and tail (xo a multiple of 4), else scalars. */
__kernel void softmax_warp(__global T* out, __global const T* x, const IDX xo,
                           const int take_log, const IDX R, const IDX nrows, const int W,
                           const int vec)
{
  __local CT pm[LMAX / 32], ps[LMAX / 32];
  XOR_LOCALS
  const int keep_exp = !take_log;
""" + ROW_READ + """
  const CT M = ROW_REDUCE(m, 1, pm);
  /* exp(-inf - M) pads add 0; an all -inf row (M = -inf) gets NaN, as a NaN or +inf does */
  CT s = SM_EXP(e - M);
  if (keep_exp) e = s;
#pragma unroll
  for (int j = 0; j < VPL4; ++j) {
    const CT4 z = SM_EXP(v[j] - M);
    if (keep_exp) v[j] = z;
    s += (z.x + z.y) + (z.z + z.w);
  }
  CT S = ROW_REDUCE(s, 0, ps);
  if (M == INFINITY) S = NAN;
  const CT lse = log(S);
  __global T* yr = out + base;
""" + ROW_STORE + "}\n"


def warp_plan(R: int, offset: int, local: int, lanes: int | None = None,
              rows: int | None = None, vec: bool | None = None) -> tuple[int, int, bool, int]:
    """``(lanes per row, rows per work-group, vec, 4-vectors per lane)`` of ``softmax_warp``
    for rows of ``R`` elements from element ``offset``, work-groups of at most ``local`` items
    (NOTE [ Warp-per-row softmax ]). By default one warp per row up to 1024 elements, else
    the fewest lanes (a power of two) holding 32 elements each; the fewest 4-vectors per lane
    (1, 2, 4 or 8) that hold the row; ``WARP_LOCAL`` items per group (or one row of more);
    4-vectors where ``offset`` is a multiple of 4. ``lanes``, ``rows`` and ``vec`` force them.

    Raises:
        ValueError: a plan that cannot run (lanes not a power of two from 8, a row longer than
            32 elements a lane, a work-group not a multiple of 32 items or over ``local``,
            4-vectors from an unaligned offset).

    Examples:
        >>> warp_plan(1024, 0, 1024), warp_plan(256, 3, 1024), warp_plan(4096, 0, 1024)
        ((32, 4, True, 8), (32, 4, False, 2), (128, 1, True, 8))
        >>> warp_plan(4096, 0, 1024, lanes=256), warp_plan(1000, 0, 1024, rows=8)
        ((256, 1, True, 4), (32, 8, True, 8))
    """
    if lanes is None:
        lanes = max(32, 1 << ((R - 1) // 32).bit_length())
    per = -(-R // (4 * lanes))  # 4-vectors a lane holds (a bound: a head and a tail included)
    vec4 = next((k for k in _VEC4 if k >= per), 0)
    if rows is None:
        rows = max(1, min(local, WARP_LOCAL) // lanes)
    aligned = offset % 4 == 0
    vec = aligned if vec is None else vec
    items = lanes * rows
    if (lanes < _MIN_W or lanes & (lanes - 1) or not vec4 or rows < 1 or items % 32
            or items > local or (vec and not aligned)):
        raise ValueError(f"softmax: warp plan ({lanes} lanes x {rows} rows, "
                         f"{'4-vectors' if vec else 'scalars'}) cannot run rows of {R} "
                         f"elements from offset {offset} (lanes a power of two from {_MIN_W}, "
                         f"at most {4 * _VEC4[-1]} elements each, groups of 32 to {local} "
                         f"items in whole warps)")
    return lanes, rows, vec, vec4


def forced_kernel(kernel: str | None = None) -> str | None:
    """The row kernel ``kernel`` (else ``NETCL_SOFTMAX_KERNEL``) forces: ``"row"``
    (softmax_row and its online path), ``"mrow"`` (softmax_mrow), ``"warp"`` (softmax_warp),
    or ``None`` (``"auto"``, unset: the default rule).

    Raises:
        ValueError: an unknown name (the message lists the choices).

    Examples:
        >>> forced_kernel("warp"), forced_kernel("auto")
        ('warp', None)
    """
    if kernel is None:
        kernel = env_choice(KERNEL_ENV, KERNELS)
    elif kernel not in KERNELS:
        raise ValueError(f"softmax: kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    return None if kernel in (None, "auto") else kernel


def hardware_shuffle(device: Any, shuffle: str | None = None) -> bool:
    """Whether softmax_warp on ``device`` shuffles in PTX (``SHFL_PTX``): on NVIDIA's OpenCL,
    unless ``shuffle`` (else ``NETCL_SOFTMAX_SHUFFLE``) is ``"emulate"``.

    Raises:
        ValueError: an unknown ``shuffle``.
        RuntimeError: ``"hardware"`` forced on a device without NVIDIA's PTX.
    """
    if shuffle is None:
        shuffle = env_choice(SHUFFLE_ENV, SHUFFLES)
    elif shuffle not in SHUFFLES:
        raise ValueError(f"softmax: shuffle must be one of {', '.join(SHUFFLES)}, "
                         f"got {shuffle!r}")
    ptx = ptx_fence(device)  # NVIDIA's driver: inline PTX compiles
    if shuffle == "hardware" and not ptx:
        raise RuntimeError(f"softmax: the hardware shuffle ({SHUFFLE_ENV}=hardware) needs "
                           f"NVIDIA's OpenCL (inline PTX), device {device.name!r} has none; "
                           f"use emulate")
    return ptx and shuffle != "emulate"


def register_cap() -> int:
    """``NETCL_SOFTMAX_WARP_REGS``: the registers per lane NVIDIA's compiler may give the PTX
    softmax_warp (``-cl-nv-maxrregcount``; 0, unset: its own choice).

    Raises:
        ValueError: not an integer from 16 to 255.

    Examples:
        >>> register_cap()
        0
    """
    if env_raw(REGS_ENV) is None:  # the common case, cheap
        return 0
    raw = os.environ.get(REGS_ENV, "").strip()
    if not raw:
        return 0
    if not raw.isdigit() or not 16 <= int(raw) <= 255:
        raise ValueError(f"softmax: {REGS_ENV} must be an integer from 16 to 255, got {raw!r}")
    return int(raw)


def fast_math(dtype: str, math: str | None = None) -> bool:
    """Whether the softmax row kernels of ``dtype`` use the fast exponential and reciprocal
    (NOTE [ Softmax arithmetic ] in :mod:`._softmax_rows`): ``math`` (else
    ``NETCL_SOFTMAX_MATH``) ``"fast"``, for float32 and float16 (float64 stays exact).

    Raises:
        ValueError: an unknown ``math`` (the message lists the choices).

    Examples:
        >>> fast_math("float32", "fast"), fast_math("float64", "fast"), fast_math("float32")
        (True, False, False)
    """
    if math is None:
        math = env_choice(MATH_ENV, MATHS)
    elif math not in MATHS:
        raise ValueError(f"softmax: math must be one of {', '.join(MATHS)}, got {math!r}")
    return math == "fast" and dtype != "float64"
