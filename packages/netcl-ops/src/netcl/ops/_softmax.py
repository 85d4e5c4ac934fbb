"""``softmax``, ``log_softmax`` (max-subtracted, so stable) and ``nll_gather``.

# NOTE [ Softmax kernels ]
# The input is viewed as (outer, R, inner) around ``axis``. Two kernels, chosen with
# ``select_reduction_kernel(R, "max")``:
# - REDUCTION_SEQUENTIAL: one work item per (outer, inner) position walks R three times
#   (max, sum of exp, write); coalesced across inner, so it also serves every inner > 1;
# - REDUCTION_PARALLEL / REDUCTION_WORKGROUP with inner == 1: ``softmax_row``, one work-group
#   per row (:func:`row_plan`). A row of at most 32 elements per lane (the fewest lanes, 32 up
#   to 1024 or what the kernel allows: a 32-lane group is one warp, its barriers cheap; long
#   rows get the most lanes, loads in flight for the few groups there are) is read once into
#   registers, then written: one read and one write of each element. A longer row takes an
#   online max and rescaled sum in one read (4-vectors where the rows are 4-aligned), then the
#   write pass reads it again (``softmax_row_online``, a kernel of its own: the registers
#   kernel's register use limited both to 256 lanes on an H100). Either way each lane's
#   (max, sum) pair is merged by one local-memory tree. H100, float32, vs PyTorch: 4096x1024
#   0.63x, 32768x1000 0.92x (32 lanes, registers), 256x50257 0.50x (256 lanes, online; more
#   lanes since), 256x50256 0.87x (256 lanes, 4-vectors).
# - on GPUs, rows of 32 to 255 elements: ``softmax_mrow``, several rows per work-group of
#   256 items in 16-byte vectors (NOTE [ Several rows per work-group ] in ._softmax_rows),
#   below the reduction rule's 256 (it picks one work item per row there, which on a GPU
#   reads rows apart with a few warps), unless a variant is forced. Longer rows measured
#   slower with it on an H200 (4096x1024 26.0 us against softmax_row's 20.1, 32768x1000 140
#   against 116; PyTorch 10.0 and 68 us), so they keep softmax_row.
#   Other devices keep softmax_row; ``softmax_rows`` forces any kernel, path, lanes and rows
#   per group (paths 3, 4: ``ROW_PATHS``) for benchmarks/bench_membound.py.
# - on NVIDIA GPUs, float32 and float16 rows of 256 to 4096 elements: ``softmax_warp``, a
#   warp (or a few) per row, max and sum by ``shfl.sync`` butterflies, as PyTorch's
#   persistent softmax (NOTE [ Warp-per-row softmax ] in ._softmax_warp; paths 5, 6).
#   ``NETCL_SOFTMAX_KERNEL=row|mrow|warp`` forces a row kernel for every row it can run
#   (``auto``: this rule); ``NETCL_SOFTMAX_SHUFFLE=emulate`` softmax_warp's shuffles in local
#   memory (how CPU devices run it).
# The online path's 4-vectors (path 2) now take any row length from a 4-aligned offset (a
# scalar head and tail around each row's 4-aligned middle): 256x50257 ran the scalar path at
# 0.39x PyTorch on an H200 (256x50256 in 4-vectors: 0.87x on an H100).
# float16 is computed in float32. A NaN anywhere in a row makes the row NaN, as in PyTorch.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, c_type
from netcl.core.env import env_raw
from netcl.core.kernel_selector import KernelVariant, get_kernel_selector
from netcl.core.kernels.cache import KernelBuildError
from netcl.core.kernels.family import LOCAL_1D as _LOCAL
from netcl.core.kernels.family import Geometry, KernelSource, kernel_family
from netcl.core.kernels.primitives import launch_values
from netcl.core.keywords import resolve_dim
from netcl.core.recording import check_flag, pyopencl
from netcl.core.selection import forced_variant
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty, normalize_axis, same_device
from ._dtype_policy import np_compute, require_float
from ._elementwise_dispatch import host, np_checked, np_result
from ._launch import (
    device_buffer,
    index_defs,
    is_gpu,
    launch_items,
    local_size,
    queue_facts,
    remember,
    remembered,
    run_remembered,
)
from ._softmax_rows import MATH_DEFINES, MROW_SOURCE, VPL4, XENT_SOURCE, mrow_plan
from ._softmax_warp import (
    KERNEL_ENV,
    MATH_ENV,
    REGS_ENV,
    SHUFFLE_ENV,
    WARP_MAX,
    WARP_MIN,
    WARP_SOURCE,
    fast_math,
    forced_kernel,
    hardware_shuffle,
    register_cap,
    warp_plan,
)
from ._split_sync import fence_defines, ptx_fence

__all__ = ["log_softmax", "nll_gather", "softmax"]

_VPL = 32  # row elements each lane of softmax_row holds in registers (NOTE [ Softmax kernels ])
_ROW_PER_LANE = 32  # ... and how many row_plan gives each (lanes: R / this, 32 to the most)
_ONLINE_LANES = 1024  # lanes (at most) for rows too long for registers
# softmax_rows' ``path`` argument, by number: softmax_row's paths 0-2, softmax_mrow's 3-4,
# softmax_warp's 5-6 (NOTE [ Warp-per-row softmax ] in ._softmax_warp)
ROW_PATHS = ("registers", "online", "online4", "rows4", "rows1", "warp4", "warp1")
_WARP_DTYPES = ("float32", "float16")  # softmax_warp's (float64 keeps softmax_row)

# softmax and log_softmax share each kernel (``take_log``), and the row kernel (barriers, slow
# to compile on PoCL) is a program of its own: fewer, smaller compiles on a first run.
_SOURCE = MATH_DEFINES + (
    "#define MAXNAN(a, b) (((b) > (a) || isnan(b)) ? (b) : (a))\n"
    "#define RESULT (take_log ? v - m - lse : SM_DIV(SM_EXP(v - m), sum))\n"
)

_KERNELS = {
    "softmax_row": """
/* (max, sum of exp(v - max)) pairs merged across the work-group. */
inline void group_max_sum(CT* m, CT* s, __local CT* bm, __local CT* bs, const IDX l,
                          const IDX L)
{
  bm[l] = *m;
  bs[l] = *s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (IDX h = L / 2; h > 0; h >>= 1) {
    if (l < h) {
      const CT m1 = bm[l], m2 = bm[l + h];
      const CT M = MAXNAN(m1, m2);
      bs[l] = (m1 == -INFINITY ? (CT)0 : bs[l] * exp(m1 - M))
            + (m2 == -INFINITY ? (CT)0 : bs[l + h] * exp(m2 - M));
      bm[l] = M;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  *m = bm[0];
  *s = bs[0];
}

/* Fold v into the running (m, sum) of exp(. - m); m4 is the max of the elements folded. */
#define RESCALE(m4) \\
  if ((m4) > m || isnan(m4)) { sum = m == -INFINITY ? (CT)0 : sum * exp(m - (m4)); m = (m4); }
#define MAX4(v) MAXNAN(MAXNAN((v).x, (v).y), MAXNAN((v).z, (v).w))
#define EXPSUM4(v) ((SM_EXP((v).x - m) + SM_EXP((v).y - m)) + \\
                    (SM_EXP((v).z - m) + SM_EXP((v).w - m)))

/* Two kernels (the registers one needs many registers, which would limit the other's
   work-group size and occupancy), the same arguments; each lane's (max, sum) pair is merged
   by one tree, the barriers outside the branches.
   softmax_row (path 0): the row in registers (R <= VPL * L): one read, one write.
   softmax_row_online: path 1, online max and sum in one read, then the write pass reads
   the row again; path 2, the same in 4-vectors (xo a multiple of 4; a scalar head and tail around
   each row's 4-aligned middle). */
#define ROW_PROLOGUE \\
  __local CT bm[LMAX], bs[LMAX]; \\
  const IDX L = get_local_size(0), l = get_local_id(0); \\
  const IDX base = get_group_id(0) * R; \\
  __global const T* xr = x + xo + base; \\
  __global T* yr = out + base; \\
  CT m = -INFINITY, sum = 0;

__kernel void softmax_row(__global T* out, __global const T* x, const IDX xo,
                          const int take_log, const IDX R, const int path)
{
  ROW_PROLOGUE
  CT v[VPL];
#pragma unroll
  for (int k = 0; k < VPL; ++k) {
    const IDX r = l + k * L;
    v[k] = r < R ? LD(xr, r) : -INFINITY;
    m = MAXNAN(m, v[k]);
  }
  if (m != -INFINITY) {
#pragma unroll
    for (int k = 0; k < VPL; ++k) sum += SM_EXP(v[k] - m);  /* -inf pads add 0 */
  }
  group_max_sum(&m, &sum, bm, bs, l, L);
  if (m == INFINITY) sum = NAN;
  const CT lse = log(sum);
#pragma unroll
  for (int k = 0; k < VPL; ++k) {
    const IDX r = l + k * L;
    const CT vk = v[k];
    if (r < R) { const CT v = vk; ST(yr, r, RESULT); }
  }
}

__kernel void softmax_row_online(__global T* out, __global const T* x, const IDX xo,
                                 const int take_log, const IDX R, const int path)
{
  ROW_PROLOGUE
  /* path 2: the row from its first 4-aligned element (h of them before, t after the R4
     4-vectors; the output at the same alignment: xo a multiple of 4) */
  IDX h = (IDX)((4 - (int)((xo + base) & 3)) & 3);
  if (path != 2) h = 0;
  if (h > R) h = R;
  const IDX R4 = (R - h) >> 2, t = path == 2 ? R - h - (R4 << 2) : 0;
  __global const T* xb = xr + h;
  __global T* yb = yr + h;
  if (path == 1) {
    IDX r = l;
    for (; r + 3 * L < R; r += 4 * L) {  /* four loads in flight, one rescale per four */
      const CT v0 = LD(xr, r), v1 = LD(xr, r + L), v2 = LD(xr, r + 2 * L);
      const CT v3 = LD(xr, r + 3 * L);
      const CT m4 = MAXNAN(MAXNAN(v0, v1), MAXNAN(v2, v3));
      RESCALE(m4)
      if (m != -INFINITY)
        sum += (SM_EXP(v0 - m) + SM_EXP(v1 - m)) + (SM_EXP(v2 - m) + SM_EXP(v3 - m));
    }
    for (; r < R; r += L) {
      const CT u = LD(xr, r);
      RESCALE(u)
      if (m != -INFINITY) sum += SM_EXP(u - m);
    }
  } else {
    IDX i = l;
    for (IDX k = l; k < h + t; k += L) {  /* the scalar head and tail around the middle */
      const CT u = LD(xr, k < h ? k : (R4 << 2) + k);
      RESCALE(u)
      if (m != -INFINITY) sum += SM_EXP(u - m);
    }
    for (; i + L < R4; i += 2 * L) {  /* two 4-vectors in flight */
      const CT4 a = LD4(xb, i), b = LD4(xb, i + L);
      const CT m8 = MAXNAN(MAX4(a), MAX4(b));
      RESCALE(m8)
      if (m != -INFINITY) sum += EXPSUM4(a) + EXPSUM4(b);
    }
    if (i < R4) {
      const CT4 a = LD4(xb, i);
      const CT m4 = MAX4(a);
      RESCALE(m4)
      if (m != -INFINITY) sum += EXPSUM4(a);
    }
  }
  group_max_sum(&m, &sum, bm, bs, l, L);
  if (m == INFINITY) sum = NAN;
  const CT lse = log(sum);
  if (path == 1) {
    for (IDX r = l; r < R; r += L) { const CT v = LD(xr, r); ST(yr, r, RESULT); }
  } else {
    for (IDX k = l; k < h + t; k += L) {
      const IDX r = k < h ? k : (R4 << 2) + k;
      const CT v = LD(xr, r);
      ST(yr, r, RESULT);
    }
    for (IDX i = l; i < R4; i += L) {
      const CT4 a = LD4(xb, i);
      ST4(yb, i, take_log ? a - m - lse : SM_DIV(SM_EXP(a - m), sum));
    }
  }
}
""",
    "softmax_col": """
__kernel void softmax_col(__global T* out, __global const T* x, const IDX xo,
                          const int take_log, const IDX outer, const IDX R, const IDX inner)
{
  const IDX gid = get_global_id(0);
  if (gid >= outer * inner) return;
  const IDX o = gid / inner;
  const IDX base = o * R * inner + (gid - o * inner);
  CT m = -INFINITY;
  for (IDX r = 0; r < R; ++r) { const CT v = LD(x, xo + base + r * inner); m = MAXNAN(m, v); }
  CT sum = 0;
  for (IDX r = 0; r < R; ++r) sum += exp(LD(x, xo + base + r * inner) - m);
  const CT lse = log(sum);
  for (IDX r = 0; r < R; ++r) {
    const CT v = LD(x, xo + base + r * inner);
    ST(out, base + r * inner, RESULT);
  }
}
""",
}

_NLL = """
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
"""

# NOTE [ Out-of-range labels ]
# A label outside [0, C) that is not ignore_index raises the same ValueError on every backend,
# from nll_gather itself. The NumPy backend checks the labels it gathers with. On OpenCL the
# gather kernel already reads every label, so it also raises a device flag for a bad one (every
# writer stores 1: a benign race); nll_gather reads that int back, and only when it is set
# downloads the labels to name the first bad one as NumPy does. That costs a 4-byte fill, a
# 4-byte read and no extra pass over the labels -- a min/max reduction would add a kernel (two
# for min and max) and a read, and would need the ignore_index rows masked out first. The read
# waits for the queue, one host sync per loss: the price of raising where NumPy raises instead
# of returning a NaN loss that surfaces steps later.
# The read goes through netcl.core.recording.check_flag: eagerly it is the read above; in a
# graph captured by netcl.runtime the flag is read back without waiting, and the error raised
# at a later call (a replay cannot read device data inside the step).


def _vector_defines(dtype: str) -> str:
    """``CT4`` and ``LD4``/``ST4``: the 4-vector at ``p + 4 * i`` (``p`` 4-aligned)."""
    if dtype == "float16":
        return ("#define CT4 float4\n#define LD4(p, i) vload_half4((i), (p))\n"
                "#define ST4(p, i, v) vstore_half4((v), (i), (p))\n")
    ct = c_type(dtype)
    return (f"#define CT4 {ct}4\n#define LD4(p, i) (((__global const {ct}4*)(p))[(i)])\n"
            f"#define ST4(p, i, v) (((__global {ct}4*)(p))[(i)] = (v))\n")


def _program_source(name: str, local: int, wide: bool, dtype: str = "float32") -> str:
    """Kernel ``name`` (``softmax_row``, with ``softmax_row_online`` and ``softmax_mrow``, or
    ``softmax_col``) for work-groups of up to ``local`` items, with 64-bit indices if ``wide``;
    the dtype header comes from :func:`softmax_family`."""
    defs = index_defs(2**31 if wide else 0)[0]
    row = name == "softmax_row"
    vectors = _vector_defines(dtype) + f"#define VPL4 {VPL4}\n" if row else ""
    body = _KERNELS[name] + (MROW_SOURCE if row else "")
    return f"{defs}#define LMAX {local}\n#define VPL {_VPL}\n{vectors}{_SOURCE}{body}"


def _nll_source(label_dtype: str, wide: bool, dtype: str = "float32", ptx: bool = False
                ) -> str:
    """``nll_k`` and the cross-entropy kernels (``xent_row``, ``xent_sum``: NOTE [ Several rows
    per work-group ]) reading ``label_dtype`` (int32 or int64) labels; ``ptx``: the
    device-wide fence in NVIDIA's PTX (NOTE [ Device-wide fence ] in ._split_sync)."""
    defs = index_defs(2**31 if wide else 0)[0]
    lt = "int" if label_dtype == "int32" else "long"
    return (f"{defs}#define LT {lt}\n#define LMAX {_ROW_LANES_MAX}\n#define VPL4 {VPL4}\n"
            f"{fence_defines(ptx)}{_vector_defines(dtype)}{_SOURCE}{_NLL}{XENT_SOURCE}")


def _warp_source(local: int, wide: bool, dtype: str, ptx: bool, vec4: int) -> str:
    """``softmax_warp`` for work-groups of up to ``local`` items, ``vec4`` 4-vectors per lane,
    shuffles in PTX if ``ptx`` (NOTE [ Warp-per-row softmax ] in ._softmax_warp)."""
    defs = index_defs(2**31 if wide else 0)[0]
    vectors = _vector_defines(dtype)
    if dtype == "float16":  # 8-byte half4 loads and stores where the device has half
        vectors += _HALF4_DEFINES
    return (f"{defs}#define LMAX {local}\n#define VPL4 {vec4}\n#define SHFL_PTX {int(ptx)}\n"
            f"{vectors}{WARP_SOURCE}")


# vload_half4 need only be 2-byte aligned, so a compiler may split it into four loads; the
# 4-vectors of softmax_warp are 8-byte aligned (a multiple of 4 elements from the buffer)
_HALF4_DEFINES = """#ifdef cl_khr_fp16
#undef LD4
#undef ST4
#define LD4(p, i) convert_float4(((__global const half4*)(p))[(i)])
#define ST4(p, i, v) (((__global half4*)(p))[(i)] = convert_half4_rte(v))
#endif
"""


def _softmax_golden() -> list[tuple[str, tuple[str, str, bool, int, str, bool, int]]]:
    cases = [(f"softmax/{kernel}-{dt}", (kernel, dt, False, _LOCAL, "", False, 0))
             for dt in FLOAT_DTYPES for kernel in ("softmax_row", "softmax_col")]
    cases += [(f"softmax/nll-{dt}-labels-{labels}", ("nll_k", dt, False, 0, labels, False, 0))
              for dt, labels in (("float32", "int64"), ("float16", "int32"),
                                 ("float64", "int64"))]
    # the emulated shuffle (it builds on every device; the PTX one is in the source too)
    cases += [(f"softmax/softmax_warp-{dt}", ("softmax_warp", dt, False, _ROW_LANES_MAX, "",
                                              False, 8)) for dt in _WARP_DTYPES]
    return cases


@kernel_family("ops.softmax", golden=_softmax_golden)
def softmax_family(kernel: str, dtype: str, wide: bool, local: int = 0,
                   labels: str = "", ptx: bool = False, vec4: int = 0, regs: int = 0,
                   fast: bool = False) -> KernelSource:
    """``softmax_row`` (one work-group of ``local`` items per row; with ``softmax_row_online``
    and ``softmax_mrow``, several rows per group), ``softmax_col`` (one work item per column),
    ``softmax_warp`` (W lanes per row, ``vec4`` 4-vectors each, shuffles in PTX if ``ptx``,
    at most ``regs`` registers a lane if given: NVIDIA's ``-cl-nv-maxrregcount``) or
    ``nll_k`` (one work item per row, ``labels`` dtype labels; with ``xent_row`` and
    ``xent_sum``); ``fast``: NOTE [ Softmax arithmetic ] in ._softmax_rows."""
    fast_define = "#define SM_FAST 1\n" if fast else ""
    if kernel == "softmax_warp":
        options = f"-cl-nv-maxrregcount={regs}" if regs else ""
        return KernelSource(fast_define + _warp_source(local, wide, dtype, ptx, vec4),
                            (kernel,), dtype, options=options)
    if kernel == "nll_k":
        return KernelSource(_nll_source(labels, wide, dtype, ptx),
                            ("nll_k", "xent_row", "xent_sum"), dtype)
    geometry = Geometry(local=local) if kernel == "softmax_row" else Geometry()
    names = ((kernel, "softmax_row_online", "softmax_mrow") if kernel == "softmax_row" else
             (kernel,))
    return KernelSource(fast_define + _program_source(kernel, local, wide, dtype), names, dtype,
                        geometry)


def _softmax(op: str, x: Tensor, axis: int) -> Tensor:
    if isinstance(x, Tensor) and x.array is None:  # NOTE [ Remembered launches ] in ._launch
        key = (op, x.shape, x.dtype, x.offset, x.queue, axis,
               queue_facts(x.queue)[1].epoch("reduction"), env_raw(KERNEL_ENV),
               env_raw(SHUFFLE_ENV), env_raw(REGS_ENV), env_raw(MATH_ENV))
        entry = remembered(key)
        if entry is not None:
            return run_remembered(entry, x.queue, x)[0]
    x = check_tensor(op, x)
    require_float(op, x)
    ax = normalize_axis(op, axis, x.ndim)
    if x.array is not None:
        return np_result(x, x.dtype, _softmax_np, host(x), np_compute(x.dtype), ax,
                         op == "log_softmax")
    out = empty(x.queue, x.shape, x.dtype)
    if x.size == 0:
        return out
    dims = x.shape or (1,)
    outer, R = math.prod(dims[:ax]), dims[ax]
    inner = math.prod(dims[ax + 1:])
    local = local_size(x.queue.device)
    _, idx = index_defs(x.offset + x.size)
    wide = idx is np.int64
    variant = get_kernel_selector(x.queue.device).select_reduction_kernel(R, "max").variant
    args = [device_buffer(out), device_buffer(x), idx(x.offset), np.int32(op == "log_softmax")]
    # the rule's one item per row below 256 elements: on a GPU only a few warps, reading rows
    # apart (16384x128: 128 warps for 132 SMs); softmax_mrow packs 8-lane rows instead (a
    # forced variant is kept)
    # NETCL_SOFTMAX_KERNEL forces a row kernel whatever the rule (a forced variant is kept)
    if (variant is KernelVariant.REDUCTION_SEQUENTIAL and inner == 1
            and forced_variant("reduction") is None
            and ((R >= _MROW_MIN and is_gpu(x.queue.device)) or forced_kernel() is not None)):
        variant = KernelVariant.REDUCTION_PARALLEL
    if variant is KernelVariant.REDUCTION_SEQUENTIAL or inner > 1:
        kernel = softmax_family(x.queue.context, "softmax_col", x.dtype, wide, local).kernel
        items = outer * inner
        grid, lsize = (-(-items // local) * local,), (local,)
        args += [idx(outer), idx(R), idx(inner)]
    else:
        kernel, grid, lsize, tail = _row_launch(x, wide, R, outer, idx)
        args += tail
    launch_values(x.queue, kernel, grid, lsize, args)
    remember(key, kernel, grid, lsize, args, [(0, out)], [1])
    return out


_warp_refused: set[Any] = set()  # contexts whose driver would not build softmax_warp
_MROW_MIN = 32  # on GPUs rows from this long take softmax_mrow whatever the reduction rule
# ... up to this long: from 256 softmax_row measured faster on an H200 (bench_membound,
# 2026-11-29, device time: 4096x1024 20.1 us against softmax_mrow's 26.0, 32768x1000 116 against
# 140; PyTorch 10.0 and 68 us)
_MROW_MAX = 255
_ROW_LANES_MAX = 1024  # softmax_row's programs are built for work-groups of up to this many
_row_limits: dict[Any, int] = {}  # kernel -> the most lanes it launches with (a power of two)


def _most_lanes(kernel: Any, device: Any) -> int:
    """The largest power of two <= 1024 lanes ``kernel`` can run with on ``device`` (its
    registers may allow fewer than the device's maximum work-group size)."""
    most = _row_limits.get(kernel)
    if most is None:
        try:
            allowed = int(kernel.get_work_group_info(
                pyopencl().kernel_work_group_info.WORK_GROUP_SIZE, device))
        except Exception:  # a driver without the query: the device's limit
            allowed = int(device.max_work_group_size)
        largest = max(1, min(_ROW_LANES_MAX, allowed))
        most = _row_limits[kernel] = 1 << (largest.bit_length() - 1)
    return most




def _row_launch(x: Tensor, wide: bool, R: int, nrows: int, idx: Any, lanes: int | None = None,
                path: int | None = None, rows: int | None = None, kernel: str | None = None,
                shuffle: str | None = None
                ) -> tuple[Any, tuple[int], tuple[int], list[Any]]:
    """(kernel, grid, local size, the arguments after ``take_log``) for ``nrows`` rows of
    ``x`` of ``R`` elements: ``softmax_row`` or ``softmax_row_online`` with :func:`row_plan`
    (paths 0-2), ``softmax_mrow`` with :func:`mrow_plan` (path 3 in 4-vectors, 4 in scalars;
    ``rows`` rows per group), ``softmax_warp`` with :func:`warp_plan` (path 5 in 4-vectors, 6
    in scalars; ``lanes`` per row, ``rows`` per group; ``shuffle`` forces its shuffles).
    Without a path, ``kernel`` (else ``NETCL_SOFTMAX_KERNEL``: ``row``, ``mrow``, ``warp``)
    picks the kernel where it can run the rows (else the default); by default a GPU runs
    softmax_mrow for rows of up to ``_MROW_MAX`` elements (NOTE [ Several rows per
    work-group ]), an NVIDIA GPU softmax_warp for float32 and float16 rows of ``WARP_MIN`` to
    ``WARP_MAX`` elements (NOTE [ Warp-per-row softmax ]), everything else :func:`row_plan`'s
    choice."""
    device = x.queue.device
    if path is None:
        chosen = _row_kernel(x, R, lanes, rows, kernel)
    else:
        chosen = "warp" if path in (5, 6) else "mrow" if path in (3, 4) else "row"
    if chosen == "warp":
        try:
            return _warp_launch(x, wide, R, nrows, idx, lanes, path, rows, shuffle)
        except ValueError:
            if path is not None or kernel is not None:
                raise
            chosen = _row_kernel(x, R, lanes, rows, "auto")  # the variable's kernel cannot
        except KernelBuildError as exc:
            if path is not None or kernel is not None or forced_kernel() is not None:
                raise
            # the default rule's PTX refused by a driver: say so once, run softmax_row
            _warp_refused.add(x.queue.context)
            warnings.warn(f"softmax: softmax_warp does not build on this device, using "
                          f"softmax_row ({exc})", RuntimeWarning, stacklevel=4)
            chosen = "row"
    kernels = softmax_family(x.queue.context, "softmax_row", x.dtype, wide,
                             _ROW_LANES_MAX, fast=fast_math(x.dtype)).kernels
    if chosen == "mrow":
        multi = kernels["softmax_mrow"]
        vec = None if path is None else path == 3
        W, per, vec = mrow_plan(R, x.offset, _most_lanes(multi, device), lanes, rows, vec)
        groups = -(-nrows // per)
        return (multi, (groups * W * per,), (W * per,),
                [idx(R), idx(nrows), np.int32(W), np.int32(vec)])
    held, online = kernels["softmax_row"], kernels["softmax_row_online"]
    lanes, path = row_plan(R, x.offset, _most_lanes(held, device), lanes, path,
                           _most_lanes(online, device))
    return (held if path == 0 else online), (nrows * lanes,), (lanes,), [idx(R), np.int32(path)]


def _warp_launch(x: Tensor, wide: bool, R: int, nrows: int, idx: Any, lanes: int | None,
                 path: int | None, rows: int | None, shuffle: str | None
                 ) -> tuple[Any, tuple[int], tuple[int], list[Any]]:
    """:func:`_row_launch` for ``softmax_warp`` (:func:`warp_plan`; ``path`` 5 or 6 forces
    4-vectors or scalars).

    Raises:
        ValueError: float64, or a plan that cannot run.
    """
    if x.dtype not in _WARP_DTYPES:
        raise ValueError(f"softmax: softmax_warp runs {' and '.join(_WARP_DTYPES)}, got "
                         f"{x.dtype}")
    device = x.queue.device
    vec = None if path is None else path == 5
    vec4 = warp_plan(R, x.offset, _ROW_LANES_MAX, lanes, rows, vec)[3]
    ptx = hardware_shuffle(device, shuffle)
    warp = softmax_family(x.queue.context, "softmax_warp", x.dtype, wide, _ROW_LANES_MAX, "",
                          ptx, vec4, register_cap() if ptx else 0,
                          fast_math(x.dtype)).kernel
    W, per, vec, _ = warp_plan(R, x.offset, _most_lanes(warp, device), lanes, rows, vec)
    return (warp, (-(-nrows // per) * W * per,), (W * per,),
            [idx(R), idx(nrows), np.int32(W), np.int32(vec)])


def _row_kernel(x: Tensor, R: int, lanes: int | None, rows: int | None, kernel: str | None
                ) -> str:
    """The row kernel (``row``, ``mrow`` or ``warp``) for rows of ``R`` elements of ``x``
    without a forced path: ``kernel`` if given, else ``NETCL_SOFTMAX_KERNEL``'s where it can
    run (softmax_warp: float32 and float16), else ``mrow`` with ``rows`` given, ``row`` with
    ``lanes``, else the default (see :func:`_row_launch`)."""
    if kernel is not None and kernel != "auto":
        forced_kernel(kernel)  # a ValueError for a name it does not know
        return kernel
    forced = forced_kernel(kernel)
    if forced == "warp" and x.dtype in _WARP_DTYPES:
        return "warp"
    if forced == "mrow" and R <= 4 * VPL4 * _ROW_LANES_MAX:
        return "mrow"
    if forced == "row" or (lanes is not None and rows is None):
        return "row"
    if rows is not None:
        return "mrow"
    device = x.queue.device
    if not is_gpu(device):
        return "row"
    if (WARP_MIN <= R <= WARP_MAX and x.dtype in _WARP_DTYPES and ptx_fence(device)
            and x.queue.context not in _warp_refused):
        return "warp"
    if R <= _MROW_MAX:
        return "mrow"
    return "row"


def row_plan(R: int, offset: int, local: int, lanes: int | None = None,
             path: int | None = None, online_local: int | None = None) -> tuple[int, int]:
    """``(lanes, path)`` of ``softmax_row`` for rows of ``R`` elements from element ``offset``
    with work-groups of at most ``local`` lanes (``online_local`` for the online paths, by
    default ``local``; NOTE [ Softmax kernels ]): by default the fewest lanes (a power of two
    from 32) that hold the row in registers, ``_VPL`` each; a longer row takes the online path
    on the most lanes, in 4-vectors where ``offset`` is a multiple of 4. ``lanes`` and
    ``path`` force them (the multi-row paths 3 and 4 are :func:`mrow_plan`'s).

    Raises:
        ValueError: a forced plan that cannot run (lanes not a power of two in 1..local, the
            registers path for a row longer than ``_VPL * lanes``, 4-vectors from an unaligned
            offset).

    Examples:
        >>> row_plan(1000, 0, 1024), row_plan(50257, 0, 1024), row_plan(50256, 0, 1024)
        ((32, 0), (1024, 2), (1024, 2))
    """
    online_local = local if online_local is None else online_local
    vec = offset % 4 == 0
    if lanes is None:
        lanes = min(local, max(32, 1 << ((R - 1) // _ROW_PER_LANE).bit_length()))
        if path not in (None, 0) or R > _VPL * lanes:  # noqa: SIM300 (R: no constant)
            lanes = min(online_local, _ONLINE_LANES)
    fits = R <= _VPL * lanes  # noqa: SIM300
    if path is None:
        path = 0 if fits else 2 if vec else 1
    limit = local if path == 0 else online_local
    if (not 0 < lanes <= limit or lanes & (lanes - 1) or path not in (0, 1, 2)
            or (path == 0 and not fits) or (path == 2 and not vec)):
        raise ValueError(f"softmax: row plan ({lanes} lanes, path {path}) cannot run rows of "
                         f"{R} elements from offset {offset} (at most {limit} lanes)")
    return lanes, path


def softmax_rows(x: Tensor, take_log: bool, lanes: int | None = None,
                 path: int | None = None, rows: int | None = None, kernel: str | None = None,
                 shuffle: str | None = None) -> Tensor:
    """Softmax (log-softmax with ``take_log``) over the last axis of an OpenCL tensor with a
    forced plan, for benchmarks and tests: ``path`` 0-2 (``ROW_PATHS``) runs ``softmax_row``
    with :func:`row_plan`'s ``lanes``; 3 (4-vectors) or 4 (scalars) ``softmax_mrow`` with
    ``lanes`` lanes per row and ``rows`` rows per work-group (:func:`mrow_plan`; ``rows``
    alone picks path 3 or 4 by the offset); 5 (4-vectors) or 6 (scalars) ``softmax_warp``
    the same way (:func:`~netcl.ops._softmax_warp.warp_plan`), its shuffles in PTX or
    emulated as ``shuffle`` (``"hardware"``, ``"emulate"``) forces. Without a path,
    ``kernel`` (``"row"``, ``"mrow"``, ``"warp"``; by default ``NETCL_SOFTMAX_KERNEL``) runs
    that kernel with its default plan (the 4-vectors where the offset allows). Nothing forced:
    what ``softmax`` runs.

    Raises:
        ValueError: an empty or 0-d tensor, an unknown kernel or shuffle, or a plan that
            cannot run (softmax_warp on float64).
        RuntimeError: the hardware shuffle forced on a device without NVIDIA's PTX.
    """
    if x.ndim == 0 or x.size == 0:
        raise ValueError(f"softmax_rows: needs a non-empty tensor with an axis, got {x.shape}")
    R = x.shape[-1]
    _, idx = index_defs(x.offset + x.size)
    built, grid, lsize, tail = _row_launch(x, idx is np.int64, R, x.size // R, idx, lanes,
                                           path, rows, kernel, shuffle)
    out = empty(x.queue, x.shape, x.dtype)
    launch_values(x.queue, built, grid, lsize,
                  [device_buffer(out), device_buffer(x), idx(x.offset), np.int32(take_log),
                   *tail])
    return out


def softmax(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``, in ``x``'s float dtype.

    ``axis`` defaults to -1; ``dim`` is PyTorch's name for it (both given: ``TypeError``).

    Raises:
        TypeError: an integer tensor.
        IndexError: ``axis`` out of range.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[0.0, np.log(3.0)]]))
        >>> softmax(x).to_host().astype(float).round(4).tolist()
        [[0.25, 0.75]]
    """
    return _softmax("softmax", x, resolve_dim("softmax", axis, dim, -1))


def log_softmax(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``, in ``x``'s float dtype.

    ``axis`` defaults to -1; ``dim`` is PyTorch's name for it (both given: ``TypeError``).

    Raises:
        TypeError: an integer tensor.
        IndexError: ``axis`` out of range.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[0.0, 0.0]]))
        >>> log_softmax(x).to_host().astype(float).round(4).tolist()
        [[-0.6931, -0.6931]]
    """
    return _softmax("log_softmax", x, resolve_dim("log_softmax", axis, dim, -1))


def nll_gather(logp: Tensor, labels: Tensor, ignore_index: int = -100) -> Tensor:
    """``-logp[i, labels[i]]`` per row (0 where ``labels[i] == ignore_index``).

    ``logp`` is (N, C) log-probabilities, ``labels`` (N,) int32/int64 class indices; the
    result is (N,) in ``logp``'s dtype (average it for the NLL loss).

    Raises:
        TypeError: float labels, or integer ``logp``.
        ValueError: shapes other than (N, C) and (N,), or a label outside ``[0, C)`` that is
            not ``ignore_index`` (on every backend; see NOTE [ Out-of-range labels ]).

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> logp = Tensor.from_host(q, np.log(np.array([[0.5, 0.5], [0.25, 0.75]])))
        >>> y = Tensor.from_host(q, np.array([1, -100]))
        >>> nll_gather(logp, y).to_host().astype(float).round(4).tolist()
        [0.6931, 0.0]
    """
    logp = check_tensor("nll_gather", logp, "logp")
    labels = check_tensor("nll_gather", labels, "labels")
    require_float("nll_gather", logp)
    if labels.dtype not in ("int32", "int64"):
        raise TypeError(f"nll_gather: labels must be int32 or int64, got {labels.dtype}")
    if logp.ndim != 2 or labels.shape != logp.shape[:1]:
        raise ValueError(f"nll_gather: expected logp (N, C) and labels (N,), got {logp.shape} "
                         f"and {labels.shape}")
    same_device("nll_gather", logp, labels)
    N, C = logp.shape
    if logp.array is not None:
        # a NumPy capture checks the labels of each replay (NOTE [ Out-of-range labels ])
        np_checked(logp, _check_label_array, host(labels), C, ignore_index)
        return np_result(logp, logp.dtype, _nll_np, host(logp), host(labels), ignore_index)
    out = empty(logp.queue, (N,), logp.dtype)
    if N == 0:
        return out
    _, idx = index_defs(logp.offset + logp.size, labels.offset + N)
    kernel = softmax_family(logp.queue.context, "nll_k", logp.dtype, idx is np.int64, 0,
                            labels.dtype).kernel
    bad = Tensor.from_shape(logp.queue, (1,), "int32", fill=0)
    launch_items(logp.queue, kernel, N, device_buffer(out), device_buffer(logp) if C else None,
                 idx(logp.offset), device_buffer(labels), idx(labels.offset), idx(C),
                 np.int64(ignore_index), idx(N), device_buffer(bad))
    # NOTE [ Out-of-range labels ]
    check_flag(bad, lambda: _check_labels(labels.to_host().astype(np.int64), C, ignore_index))
    return out


def _softmax_np(x: np.ndarray[Any, Any], ct: np.dtype[Any], ax: int, log: bool
                ) -> np.ndarray[Any, Any]:
    a = x.astype(ct, copy=False)
    m = np.max(a, axis=ax, keepdims=True) if a.size else a
    z = a - m
    s = np.sum(np.exp(z), axis=ax, keepdims=True)
    return np.asarray(z - np.log(s) if log else np.exp(z) / s)


def _nll_np(logp: np.ndarray[Any, Any], labels: np.ndarray[Any, Any], ignore_index: int
            ) -> np.ndarray[Any, Any]:
    N, C = logp.shape
    y = labels.astype(np.int64)
    keep = y != ignore_index
    # with C = 0 every row is ignored (else the labels check raised): nothing to gather; a
    # label out of range gathers row 0 (a replay's check raises after it, NOTE [ Out-of-range
    # labels ])
    rows = logp[np.arange(N), np.where(keep & (y >= 0) & (y < C), y, 0)] if C else np.zeros(N)
    return np.asarray(np.where(keep, -rows, 0))


def _check_label_array(labels: np.ndarray[Any, Any], C: int, ignore_index: int) -> None:
    _check_labels(labels.astype(np.int64), C, ignore_index)


def _check_labels(y: np.ndarray[Any, Any], C: int, ignore_index: int,
                  op: str = "nll_gather") -> None:
    """``ValueError`` naming the first label outside ``[0, C)`` that is not ``ignore_index``."""
    bad = (y != ignore_index) & ((y < 0) | (y >= C))
    if bad.any():
        raise ValueError(f"{op}: label {int(y[bad][0])} is out of range for {C} classes "
                         f"(ignore_index is {ignore_index}); class labels must be in [0, {C})")
