"""The shared-memory backend's collectives against NumPy references.

The ranks are threads of this process over one shared-memory job
(:func:`netcl.distributed.testing.run_threads`): the same segment, barriers and slots as
processes, without an interpreter start per rank. Slots of 4 KiB make the larger sizes take
several rounds. Integer-valued data must come back exact (sums of small integers are exact in
every dtype here); ``mean`` within the dtype's tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.distributed import DistributedError, ShmBackend
from netcl.distributed.testing import run_threads, segments

SIZES = (0, 1, 7, 257, 3001)
DTYPES = ("float32", "float64", "int32", "float16")
CHUNK = 4096
TOL = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-12}


def rank_data(rank: int, n: int, dtype: str, salt: int = 0) -> np.ndarray[Any, Any]:
    """Small integer values (exact in float16 too), different on each rank."""
    return ((np.arange(n) * (rank + 3) + salt) % 23 - 11 + rank).astype(dtype)


@pytest.fixture(autouse=True)
def _no_segment_left() -> Any:
    before = set(segments())
    yield
    assert set(segments()) <= before, f"segments left: {set(segments()) - before}"


def check_all(backend: ShmBackend) -> None:
    r, w = backend.rank, backend.world_size
    for dtype in DTYPES:
        for n in SIZES:
            mine = [rank_data(k, n, dtype) for k in range(w)]
            for op, ref in (("sum", np.sum), ("max", np.max), ("min", np.min)):
                x = mine[r].copy()
                backend.all_reduce(x, op)
                np.testing.assert_array_equal(x, ref(np.stack(mine), axis=0).astype(dtype),
                                              err_msg=f"all_reduce {op} {dtype} n={n}")
            if dtype != "int32":
                x = mine[r].copy()
                backend.all_reduce(x, "mean")
                expect = np.stack(mine).astype(np.float64).mean(axis=0)
                np.testing.assert_allclose(x, expect, rtol=TOL[dtype], atol=TOL[dtype])

            x = mine[r].copy()
            backend.broadcast(x, src=w - 1)
            np.testing.assert_array_equal(x, mine[w - 1])

            recv = np.empty((w, n), dtype)
            backend.all_gather(mine[r], recv)
            np.testing.assert_array_equal(recv, np.stack(mine))

            parts = [np.stack([rank_data(k, n, dtype, salt=j) for j in range(w)])
                     for k in range(w)]  # parts[k][j]: rank k's part for rank j
            out = np.empty(n, dtype)
            backend.reduce_scatter(parts[r], out, "sum")
            np.testing.assert_array_equal(
                out, sum(p[r].astype(np.float64) for p in parts).astype(dtype))

            out = np.empty(n, dtype)
            backend.scatter(parts[0] if r == 0 else None, out, src=0)
            np.testing.assert_array_equal(out, parts[0][r])

            dst = min(1, w - 1)
            gathered = np.empty((w, n), dtype) if r == dst else None
            backend.gather(mine[r], gathered, dst=dst)
            if gathered is not None:
                np.testing.assert_array_equal(gathered, np.stack(mine))
    backend.barrier()


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_collective_matches_numpy(world: int) -> None:
    run_threads(check_all, world, chunk_bytes=CHUNK)


def test_shapes_survive_multi_dimensional_buffers() -> None:
    def work(b: ShmBackend) -> list[Any]:
        x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5) + b.rank
        b.all_reduce(x)
        recv = np.empty((2, 2, 3, 5), np.float32)
        b.all_gather(x, recv)
        return [x, recv]

    (x0, recv0), (x1, _) = run_threads(work, 2, chunk_bytes=CHUNK)
    expect = 2 * np.arange(30, dtype=np.float32).reshape(2, 3, 5) + 1
    np.testing.assert_array_equal(x0, expect)
    np.testing.assert_array_equal(x1, expect)
    np.testing.assert_array_equal(recv0, np.stack([expect, expect]))


def test_async_all_reduce_keeps_order_with_sync_calls() -> None:
    def work(b: ShmBackend) -> list[float]:
        xs = [np.full(100, float(b.rank + k), np.float32) for k in range(5)]
        works = [b.all_reduce_async(x, "sum") for x in xs]
        y = np.full(3, float(b.rank), np.float64)
        b.all_reduce(y, "max")  # waits for the async ones first: same order on every rank
        for wk in works:
            wk.wait()
            assert wk.is_completed()
        return [float(x[0]) for x in xs] + [float(y[0])]

    results = run_threads(work, 3, chunk_bytes=CHUNK)
    assert results[0] == results[1] == results[2] == [3.0, 6.0, 9.0, 12.0, 15.0, 2.0]


def test_mismatched_shapes_and_dtypes_raise_on_every_rank_and_the_group_goes_on() -> None:
    def work(b: ShmBackend) -> list[str]:
        messages = []
        for shape, dtype in (((7 + b.rank,), "float32"), ((7,), ("float32", "float64")[b.rank])):
            with pytest.raises(DistributedError) as info:
                b.all_reduce(np.zeros(shape, dtype))
            messages.append(str(info.value))
        with pytest.raises(DistributedError, match="different calls"):
            if b.rank == 0:
                b.all_reduce(np.zeros(3, np.float32))
            else:
                b.broadcast(np.zeros(3, np.float32))
        x = np.ones(4, np.float32)
        b.all_reduce(x)  # a mismatch breaks nothing
        assert x.tolist() == [2.0] * 4
        return messages

    msgs = run_threads(work, 2, chunk_bytes=CHUNK)
    assert "shapes or dtypes differ across ranks" in msgs[0][0]
    assert "rank 0 all_reduce(sum) float32 (7,)" in msgs[0][0]
    assert "rank 1 all_reduce(sum) float32 (8,)" in msgs[1][0]
    assert "rank 1 all_reduce(sum) float64 (7,)" in msgs[0][1]


def test_bad_arguments_raise_typed_errors_before_any_exchange() -> None:
    b = ShmBackend(0, 1, "test-bad-args", timeout_s=1)
    try:
        with pytest.raises(ValueError, match="op must be one of"):
            b.all_reduce(np.zeros(3, np.float32), "prod")
        with pytest.raises(TypeError, match="'mean' needs a floating-point"):
            b.all_reduce(np.zeros(3, np.int32), "mean")
        with pytest.raises(ValueError, match="C-contiguous"):
            b.all_reduce(np.zeros((4, 4), np.float32)[:, ::2])
        with pytest.raises(TypeError, match="NumPy array"):
            b.broadcast([1.0, 2.0])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="src must be a rank"):
            b.broadcast(np.zeros(3), src=1)
        with pytest.raises(ValueError, match=r"recv must be float32 of shape \(1, 3\)"):
            b.all_gather(np.zeros(3, np.float32), np.zeros((2, 3), np.float32))
        with pytest.raises(ValueError, match=r"send must be float32 of shape \(1, 3\)"):
            b.reduce_scatter(np.zeros((3,), np.float32), np.zeros(3, np.float32))
        with pytest.raises(ValueError, match="needs send, got None"):
            b.scatter(None, np.zeros(3, np.float32))
    finally:
        b.close()
    with pytest.raises(DistributedError, match="already left"):
        b.barrier()
    with pytest.raises(ValueError, match="job id must be"):
        ShmBackend(0, 1, "no/slashes")


def test_many_dimensions_and_async_errors() -> None:
    def work(b: ShmBackend) -> str:
        x = np.ones((1,) * 11 + (3,), np.float64)
        b.all_reduce(x, "sum")  # more dimensions than a header lists: still checked
        assert x.ravel().tolist() == [2.0] * 3
        bad = np.ones((1,) * 11 + (3 + b.rank,), np.float64)
        work = b.all_reduce_async(bad, "sum")
        with pytest.raises(DistributedError) as info:
            work.wait()
        return str(info.value)

    msgs = run_threads(work, 2, chunk_bytes=CHUNK)
    assert "rank 0 all_reduce(sum) float64 <12-d, 3 elements>" in msgs[0]
    assert "rank 1 all_reduce(sum) float64 <12-d, 4 elements>" in msgs[0]
