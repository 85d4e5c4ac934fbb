"""Registers, spills and local memory of netcl.ops kernels on an NVIDIA OpenCL device.

Builds every golden source of netcl.ops (``netcl.ops._golden``) whose file name contains one
of the filters, plus the hardware (not emulated) tensor-core attention kernels, with
``-cl-nv-verbose`` and prints what ptxas reports per program: registers per work item, spill
stores/loads and static local memory. What limits a kernel's occupancy is read from here
(65536 registers and 228 KiB of local memory per SM on an H100/H200; at most 48 KiB static
local memory per work-group through OpenCL). With ``PTX_DUMP_DIR`` set, the PTX of every
golden program built goes there too.

    python3 scripts/gpu/ptxas_info.py attention softmax
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pyopencl as cl


def summary(log: str) -> str:
    """``regs=R spill=S/L smem=B`` per kernel from the ptxas lines of a verbose build log."""
    out = []
    for block in re.split(r"ptxas info\s*: Compiling entry function ", log)[1:]:
        name = re.match(r"'?(\w+)'?", block)
        regs = re.search(r"Used (\d+) registers", block)
        spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", block)
        smem = re.search(r"(\d+) bytes smem", block)
        out.append(f"{name.group(1) if name else '?'}: regs={regs.group(1) if regs else '?'}"
                   f" spill={spill.group(1) + '/' + spill.group(2) if spill else '?'}"
                   f" smem={smem.group(1) if smem else '0'}")
    return "; ".join(out) or log.strip().replace("\n", " | ")[:300]


def build(ctx: Any, device: Any, source: str, options: str = "", name: str = "") -> str:
    try:
        prg = cl.Program(ctx, source).build(options=f"{options} -cl-nv-verbose".strip())
        dump = os.environ.get("PTX_DUMP_DIR")
        if dump and name:  # the PTX NVIDIA's driver made (its program binary)
            path = Path(dump) / (name.replace("/", "_") + ".ptx")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(prg.get_info(cl.program_info.BINARIES)[0])
        return summary(prg.get_build_info(device, cl.program_build_info.LOG))
    except cl.RuntimeError as exc:  # a build failure: its log
        return "BUILD FAILED: " + str(exc).replace("\n", " | ")[:400]


def main(filters: list[str]) -> None:
    from netcl.ops import _golden
    from netcl.ops._attention_kernels import attention_family

    platform = next(p for p in cl.get_platforms() if "NVIDIA" in p.name)
    device = platform.get_devices()[0]
    ctx = cl.Context([device])
    print(f"device: {device.name}; driver {device.driver_version}")
    for file, golden in sorted(_golden.golden_sources(device.extensions).items()):
        if filters and not any(f in file for f in filters):
            continue
        print(f"{file:60s} {build(ctx, device, golden.source, name=file)}", flush=True)
    if filters and not any("attention" in f or "mma" in f for f in filters):
        return
    for kernel in ("attn_fwd_mma", "attn_bwd_dq_mma", "attn_bwd_dkdv_mma"):
        for e in (64, 128):
            try:
                from netcl.ops._attention_mma import MMA_ROWS, mma_block_keys

                src = attention_family.source(kernel, "float16", e, e, "none", MMA_ROWS,
                                              mma_block_keys(e, e), False)
            except Exception as exc:  # a kernel or head dim this version does not build
                print(f"{kernel} e{e}: not rendered ({exc})")
                continue
            print(f"hardware {kernel}-float16-e{e}".ljust(60),
                  build(ctx, device, src.render(ctx), src.options), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
