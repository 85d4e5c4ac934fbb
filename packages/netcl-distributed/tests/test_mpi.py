"""MPIBackend under the env's mpiexec: every collective exact on integer-valued data for 2 and
4 ranks and odd sizes, mismatched calls reported as such, and a dead or hung rank ending the
job in bounded time. The ranks are this file run as a script (``python test_mpi.py <case>``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from netcl.distributed import DistributedError, MPIBackend

HERE = Path(__file__).resolve()


def mpiexec() -> str:
    pytest.importorskip("mpi4py", reason="the MPI backend needs mpi4py (pip install "
                        "'netcl-distributed[mpi]')")
    found = shutil.which("mpiexec", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("no mpiexec beside this Python (pip install mpich)")
    return found


def launch(world: int, case: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([mpiexec(), "-n", str(world), sys.executable, str(HERE), case],
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, NETCL_DIST_TIMEOUT_S="3"))


def collectives() -> None:
    b = MPIBackend(timeout_s=30)
    r, w = b.rank, b.world_size
    for dt in ["float32", "float64", "int32", "float16"]:
        for n in [0, 1, 7, 257]:
            base = np.arange(n)
            a = (base + r).astype(dt)
            b.all_reduce(a, "sum")
            assert np.array_equal(a, (base * w + w * (w - 1) // 2).astype(dt)), (dt, n)
            for op, want in (("max", base * w), ("min", base)):
                a = (base * (r + 1)).astype(dt)
                b.all_reduce(a, op)
                assert np.array_equal(a, want.astype(dt)), (op, dt, n)
            a = (base + r).astype(dt)
            b.broadcast(a, w - 1)
            assert np.array_equal(a, (base + w - 1).astype(dt))
            out = np.empty((w, n), dt)
            b.all_gather(np.full(n, r, dt), out)
            assert np.array_equal(out, np.repeat(np.arange(w), n).reshape(w, n).astype(dt))
            send = np.stack([np.full(n, r * 10 + k, dt) for k in range(w)])
            recv = np.empty(n, dt)
            b.reduce_scatter(send, recv, "sum")
            assert np.array_equal(recv, np.full(n, sum(q * 10 + r for q in range(w)), dt))
            b.scatter(send if r == 0 else None, recv, 0)
            assert np.array_equal(recv, np.full(n, r, dt))
            g = np.empty((w, n), dt) if r == 1 else None
            b.gather(np.full(n, r, dt), g, 1)
            if g is not None:
                assert np.array_equal(g, np.repeat(np.arange(w), n).reshape(w, n).astype(dt))
    a = np.full(5, r + 1.0, np.float32)
    b.all_reduce_async(a, "mean").wait()
    assert np.allclose(a, (w + 1) / 2)
    try:
        b.all_reduce(np.ones(3 + r, np.float32))
    except DistributedError as exc:
        assert "differ across ranks" in str(exc) and "(3,)" in str(exc) and "(4,)" in str(exc)
    else:
        raise AssertionError("mismatched shapes were not reported")
    b.barrier()
    b.close()
    print("collectives ok", r, flush=True)


def fault(kind: str) -> None:
    b = MPIBackend(timeout_s=2)
    b.barrier()
    if b.rank == 1:
        if kind == "dead":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # hung
    b.all_reduce(np.ones(4, np.float32))


@pytest.mark.parametrize("world", [2, 4])
def test_collectives(world: int) -> None:
    done = launch(world, "collectives")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("collectives ok") == world


@pytest.mark.parametrize("kind", ["dead", "hung"])
def test_faulty_rank_ends_the_job_in_bounded_time(kind: str) -> None:
    start = time.monotonic()
    done = launch(2, kind, timeout=60)
    assert done.returncode != 0
    assert time.monotonic() - start < 40
    if kind == "hung":  # rank 0 names rank 1 before the job is aborted
        assert "all_reduce: did not arrive" in done.stderr and "rank 1" in done.stderr, \
            done.stderr


if __name__ == "__main__":
    if sys.argv[1] == "collectives":
        collectives()
    else:
        fault(sys.argv[1])
