"""The compile-time parameters of one GEMM kernel (``GemmParams``), shared by the kernel
source modules (:mod:`._matmul_kernels`, :mod:`._matmul_blocked`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GemmParams"]


@dataclass(frozen=True)
class GemmParams:
    """Compile-time parameters of one GEMM kernel.

    ``bm x bn`` is the work-group tile, ``bk`` its depth, ``tm x tn`` the block of one
    work-item (rows x columns; a micro-tile of the vectorized variant), ``vw`` the vector
    width of the vectorized variant and ``lx x ly`` the work-group shape. ``vec_a``/``vec_b``/
    ``vec_c`` promise 4-aligned contiguous dimensions (``vw``-aligned for the vectorized C).
    ``b_loader`` (C macros defining ``B_AT``) and ``extra_params`` replace the matrix B.
    ``fma`` multiplies-adds with ``fma()`` (GPUs); otherwise with ``a * b + c``, which the
    compiler contracts (CPU devices: see the note in :mod:`._matmul_kernels`). ``warp_n`` > 0
    lays the register-tiled kernel's warps out as ``warp_n`` x ``32 / warp_n`` work-items
    (see the note in :mod:`._matmul_blocked`); ``swizzle`` > 0 walks the register-tiled
    kernel's work-groups down columns of ``swizzle`` tile rows (L2 reuse, NOTE there);
    ``lds_pad`` >= 0 (a multiple of 4) pads both of its local tiles' rows by that many
    elements instead of the automatic choice (-1); -2: no padding when both operands are
    vector-loaded, else the automatic choice. ``split_merge``: the register-tiled kernel runs
    one K slice per batch entry and the last work-group of each output tile merges the slices
    (NOTE [ Split-K ] in :mod:`._matmul_launch`); ``ptx_fence``: its device-wide fence in
    NVIDIA's inline PTX (NOTE [ Device-wide fence ] in :mod:`._split_sync`).
    """

    variant: str
    dtype: str = "float32"
    bm: int = 1
    bn: int = 1
    bk: int = 1
    tm: int = 1
    tn: int = 1
    vw: int = 1
    lx: int = 1
    ly: int = 1
    trans_a: bool = False
    trans_b: bool = False
    vec_a: bool = False
    vec_b: bool = False
    vec_c: bool = False
    b_loader: str = ""
    extra_params: str = ""
    fma: bool = True
    warp_n: int = 0
    swizzle: int = 0
    lds_pad: int = -1
    split_merge: bool = False
    ptx_fence: bool = False
