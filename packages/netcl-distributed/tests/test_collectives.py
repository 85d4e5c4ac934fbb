"""The public collectives (``netcl.distributed.all_reduce`` ...) on netcl Tensors and NumPy
arrays, across 2 and 4 processes, on the NumPy backend and on one OpenCL CPU device.

The ranks are this file run as a script (``python test_collectives.py``), started directly
with the launcher's environment (2 ranks) or by the launcher itself (4 ranks). Each rank, on
each device,
checks every collective against NumPy on integer-valued data (exact) in every dtype its device
has (float32 in sizes 0, 1, 257 and 3001: several rounds through 4 KiB slots), that a Tensor
keeps its storage, then prints ``ok``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import netcl.distributed as dist
from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor
from netcl.distributed.testing import segments, start_ranks

HERE = Path(__file__).resolve()
# every size in float32, one odd size in the other dtypes (test_shm.py runs the whole
# dtype x size matrix on the backend itself, cheaply, on threads)
SIZES = {"float32": (0, 1, 257, 3001), "float64": (7,), "int32": (7,), "float16": (7,)}
DTYPES = ("float32", "float64", "int32", "float16")
ENV = {"NETCL_SHM_CHUNK_BYTES": "4096", "NETCL_DIST_TIMEOUT_S": "60"}


def rank_data(rank: int, n: int, dtype: str, salt: int = 0) -> np.ndarray[Any, Any]:
    """Small integer values (exact in float16 too), different on each rank."""
    return ((np.arange(n) * (rank + 3) + salt) % 23 - 11 + rank).astype(dtype)


def _opencl_cpu_selector() -> str | None:
    """``NETCL_DEVICE`` for the one OpenCL CPU device these tests use, or None."""
    # imported here: the ranks (this file run as a script) need neither
    from netcl.core.testing import available_devices
    from netcl.ops.testing import one_opencl_cpu_device

    for d in available_devices():
        if d.backend == "cl" and d.device_type.lower() == "cpu" \
                and one_opencl_cpu_device(d) is None:
            return str(d.platform_name)
    return None


@pytest.mark.parametrize(("world", "launcher"), [(2, False), (4, True)])
def test_collectives_numpy_backend_and_opencl_cpu_device(world: int, launcher: bool) -> None:
    """One job per world size checks both devices (an interpreter start per rank is the
    expensive part here)."""
    selector = _opencl_cpu_selector()
    job = f"test-coll-{uuid.uuid4().hex[:8]}"
    env = {**ENV, "NETCL_TEST_DEVICES": "cpu" if selector is None else f"cpu;{selector}"}
    if launcher:
        proc = subprocess.run(
            [sys.executable, "-m", "netcl.distributed.launch", "-n", str(world), "--job-id", job,
             str(HERE)],
            env={**os.environ, **env}, capture_output=True, text=True, timeout=240)
        outs = [(proc.returncode, proc.stdout, proc.stderr)]
        assert proc.stdout.count("ok rank") == world, proc.stdout + proc.stderr
    else:
        procs = start_ranks([sys.executable, str(HERE)], world, job_id=job, env=env)
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=240)
            outs.append((p.returncode, out, err))
    for code, out, err in outs:
        assert code == 0, f"rank failed ({code}):\n{out}\n{err}"
        devices = 1 if selector is None else 2
        assert out.count("checked on") == devices * (world if launcher else 1), out
    assert f"netcl-dist-{job}" not in segments()


# -- the rank's side -------------------------------------------------------------------------


def _check(got: Any, expect: np.ndarray[Any, Any], what: str) -> None:
    host = np.asarray(got.to_host() if hasattr(got, "to_host") else got)
    if host.dtype != expect.dtype or host.shape != expect.shape \
            or not np.array_equal(host, expect):
        raise AssertionError(f"{what}: got {host.dtype} {host.shape} {host.ravel()[:8]}, "
                             f"expected {expect.dtype} {expect.shape} {expect.ravel()[:8]}")


def _storage(t: Any) -> Any:
    return t.array if t.array is not None else t.buffer


def _rank_main() -> None:
    pg = dist.init_process_group()
    pg.device()  # this rank's device by the group's rule (test_group.py checks the rule)
    for selector in os.environ["NETCL_TEST_DEVICES"].split(";"):
        dev = manager.default(selector)
        if dev is None:
            raise AssertionError(f"no device {selector!r}")
        _check_device(pg, dev)
        print(f"rank {pg.rank}: checked on {dev}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    print(f"ok rank {pg.rank}", flush=True)


def _check_device(pg: dist.ProcessGroup, dev: DeviceHandle) -> None:
    r, w, q = pg.rank, pg.world_size, dev.queue

    def tensor(a: np.ndarray[Any, Any]) -> Tensor:
        return Tensor.from_host(q, a, dtype=str(a.dtype))

    for dtype in DTYPES:
        try:
            tensor(np.zeros(1, dtype))
        except (TypeError, ValueError) as exc:  # the device lacks the dtype (fp64, fp16)
            print(f"rank {r}: skip {dtype} on {dev}: {exc}")
            continue
        for n in SIZES[dtype]:
            data = [rank_data(k, n, dtype) for k in range(w)]
            stacked = np.stack(data)
            what = f"{dtype} n={n} on {dev}"

            t = tensor(data[r])
            storage = _storage(t)
            dist.all_reduce(t, op="sum")
            _check(t, stacked.sum(axis=0).astype(dtype), f"all_reduce sum {what}")
            if _storage(t) is not storage:
                raise AssertionError(f"all_reduce reallocated the tensor ({what})")
            a = data[r].copy()
            dist.all_reduce(a, op="max")
            _check(a, stacked.max(axis=0), f"all_reduce max ndarray {what}")
            t = tensor(data[r])
            dist.all_reduce(t, op="min", async_op=True).wait()  # type: ignore[union-attr]
            _check(t, stacked.min(axis=0), f"async all_reduce min {what}")

            t = tensor(data[r])
            dist.broadcast(t, src=w - 1)
            _check(t, data[w - 1], f"broadcast {what}")

            outs = [tensor(np.zeros(n, dtype)) for _ in range(w)]
            dist.all_gather(outs, tensor(data[r]))
            for k in range(w):
                _check(outs[k], data[k], f"all_gather [{k}] {what}")
            into = tensor(np.zeros((w, n), dtype))
            dist.all_gather_into_tensor(into, tensor(data[r]))
            _check(into, stacked, f"all_gather_into_tensor {what}")

            parts = [np.stack([rank_data(k, n, dtype, salt=j) for j in range(w)])
                     for k in range(w)]  # parts[k][j]: rank k's part for rank j
            expect = sum(p[r].astype(np.float64) for p in parts).astype(dtype)
            out = tensor(np.zeros(n, dtype))
            dist.reduce_scatter(out, [tensor(p) for p in parts[r]])
            _check(out, expect, f"reduce_scatter {what}")
            out = tensor(np.zeros(n, dtype))
            dist.reduce_scatter_tensor(out, tensor(parts[r]))
            _check(out, expect, f"reduce_scatter_tensor {what}")

            out = tensor(np.zeros(n, dtype))
            dist.scatter(out, [tensor(p) for p in parts[0]] if r == 0 else None, src=0)
            _check(out, parts[0][r], f"scatter {what}")

            got = [tensor(np.zeros(n, dtype)) for _ in range(w)] if r == w - 1 else None
            dist.gather(tensor(data[r]), got, dst=w - 1)
            for k in range(w if got is not None else 0):
                _check(got[k], data[k], f"gather [{k}] {what}")  # type: ignore[index]


if __name__ == "__main__":
    _rank_main()
