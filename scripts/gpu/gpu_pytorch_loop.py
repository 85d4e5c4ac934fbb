"""The PyTorch digits loop of tests-integration/test_pytorch_loop.py on the GPU: netcl (the
program renamed torch -> netcl, device "cl") beside PyTorch (device "cuda" when available):
held-out accuracy per model and wall time per run (the first netcl run builds its kernels,
the second finds them cached). Each line is flushed as it is printed, so a run cut short keeps
what it measured. Run from the repository root: python3 scripts/gpu/gpu_pytorch_loop.py
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
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
    with contextlib.redirect_stdout(io.StringIO()):  # the program's per-epoch lines
        results = loop.run(source, device, name)
    return {k: round(v, 4) for k, v in results.items()}, time.perf_counter() - start


def main() -> None:
    agops.implicit_tape(True)
    print(f"epochs per model: {loop.EPOCHS} (MLP with Adam, then CNN with SGD)", flush=True)
    results, seconds = timed(loop.netcl_loop(), "cl", "netcl_loop")
    print(f"netcl cl, first run (builds kernels): {results}  {seconds:.1f} s", flush=True)
    torch: Any = None
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        pass
    if torch is not None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        results, seconds = timed(loop.PYTORCH_LOOP, device, "pytorch_loop")
        print(f"torch {device}, first run: {results}  {seconds:.1f} s", flush=True)
    results, seconds = timed(loop.netcl_loop(), "cl", "netcl_loop")
    print(f"netcl cl, second run (kernels cached): {results}  {seconds:.1f} s", flush=True)
    if torch is not None:
        results, seconds = timed(loop.PYTORCH_LOOP, device, "pytorch_loop")
        print(f"torch {device}, second run: {results}  {seconds:.1f} s", flush=True)


if __name__ == "__main__":
    main()
