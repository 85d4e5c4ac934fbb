"""The PyTorch digits loop of tests-integration/test_pytorch_loop.py on the GPU: netcl (the
program renamed torch -> netcl, device "cl") beside PyTorch (device "cuda" when available):
held-out accuracy per model and wall time per run (the first netcl run builds its kernels,
the second finds them cached). Run from the repository root: python3 scripts/gpu/gpu_pytorch_loop.py
"""

from __future__ import annotations

import importlib.util
import pathlib
import time
from typing import Any

import netcl.autograd.ops as agops

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "pytorch_loop", ROOT / "tests-integration" / "test_pytorch_loop.py")
assert _spec is not None and _spec.loader is not None
loop: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loop)


def timed(source: str, device: Any, name: str) -> tuple[dict[str, float], float]:
    start = time.perf_counter()
    results = loop.run(source, device, name)
    return results, time.perf_counter() - start


def main() -> None:
    agops.implicit_tape(True)
    print(f"epochs per model: {loop.EPOCHS} (MLP with Adam, then CNN with SGD)")
    for attempt in ("first (builds kernels)", "second (cached)"):
        results, seconds = timed(loop.netcl_loop(), "cl", "netcl_loop")
        print(f"netcl cl   {attempt}: {results}  {seconds:.1f} s")
    try:
        import torch
    except ImportError:
        print("torch not installed")
        return
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for attempt in ("first", "second"):
        results, seconds = timed(loop.PYTORCH_LOOP, device, "pytorch_loop")
        print(f"torch {device} {attempt}: {results}  {seconds:.1f} s")


if __name__ == "__main__":
    main()
