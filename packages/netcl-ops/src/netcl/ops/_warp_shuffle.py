"""The warp butterfly exchange that warp-per-row kernels share (softmax_warp, the layer norm
rows in warps): ``XOR(v, mask)`` is the value ``v`` of lane ``(this lane ^ mask)`` of the warp.

With ``SHFL_PTX`` 1 (NVIDIA's OpenCL, whose C has no sub-groups) it is ``shfl.sync.bfly.b32``
in inline PTX; with 0 an exchange through ``XOR_LOCALS``' local memory (``XOR_SCRATCH``
elements, the work-group's size) and two barriers, so every lane of the work-group must reach
every ``XOR``. A program defines ``CT`` (a 32-bit float: the PTX moves ``.b32``),
``SHFL_PTX``, ``XOR_SCRATCH`` and names its local id ``l``.
"""

from __future__ import annotations

__all__ = ["SHUFFLE_SOURCE"]

SHUFFLE_SOURCE = """#if SHFL_PTX
/* the value of lane (this lane ^ mask) of the warp: every lane of the warp calls it */
inline CT warp_xor(const CT v, const int mask)
{
  CT r;
  __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                   : "=f"(r) : "f"(v), "r"(mask));
  return r;
}
#define XOR(v, mask) warp_xor((v), (mask))
#define XOR_LOCALS
#else
/* the same through local memory: every lane of the work-group calls it (barriers) */
inline CT emu_xor(const CT v, const int mask, __local CT* sc, const int l)
{
  barrier(CLK_LOCAL_MEM_FENCE);
  sc[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  return sc[l ^ mask];
}
#define XOR(v, mask) emu_xor((v), (mask), sc, l)
#define XOR_LOCALS __local CT sc[XOR_SCRATCH];
#endif
"""
