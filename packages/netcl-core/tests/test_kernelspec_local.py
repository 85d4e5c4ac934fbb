"""KernelSpec local sizes: a kernel whose result depends on its work-group size (``__local``
tiles, barriers, local ids) is never autotuned or given a guessed size; the README's
``spec.build(q).run(q, g, None, ...)`` must give the right answer every time or raise."""

from __future__ import annotations

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernels._local_size import pick_local
from netcl.core.kernels.primitives import KernelSpec
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close

TILED = """
#define TS 16
__kernel {attribute} void matmul_tiled(__global const float* a, __global const float* b,
                                      __global float* c, const int M, const int N, const int K) {{
  __local float as[TS][TS];
  __local float bs[TS][TS];
  const int lr = get_local_id(0), lc = get_local_id(1);
  const int row = get_global_id(0), col = get_global_id(1);
  float acc = 0.0f;
  for (int t = 0; t < K; t += TS) {{
    as[lr][lc] = a[row * K + t + lc];
    bs[lr][lc] = b[(t + lr) * N + col];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TS; ++k) acc += as[lr][k] * bs[k][lc];
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  c[row * N + col] = acc;
}}
"""
REQUIRED = "__attribute__((reqd_work_group_size(16, 16, 1)))"


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("KernelSpec runs on OpenCL devices")
    return dev


def _operands(dev: DeviceHandle, m: int, n: int, k: int) -> tuple[Tensor, ...]:
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    q = dev.queue
    return (Tensor.from_host(q, a), Tensor.from_host(q, b),
            Tensor.from_shape(q, (m, n), fill=None))


def test_tiled_matmul_with_required_size_is_right_every_run(cl_dev: DeviceHandle) -> None:
    """The issue's case: tune=True (the default) and local=None. The tuner used to try None and
    (16, 8) for this kernel and returned wrong products in 5 of 6 runs."""
    m, n, k = 48, 80, 64
    a, b, c = _operands(cl_dev, m, n, k)
    expect = a.to_host() @ b.to_host()
    spec = KernelSpec("matmul_tiled", src=TILED.format(attribute=REQUIRED))
    q = cl_dev.queue
    for _ in range(6):
        c = Tensor.from_shape(q, (m, n), fill=0)
        prg = spec.build(q)
        prg.run(q, (m, n), None, a, b, c, m, n, k)
        assert_close(c.to_host(), expect)
    assert prg.required_local == (16, 16, 1)
    assert prg.tuned == {}  # never autotuned


def test_tiled_matmul_without_a_size_raises_instead_of_guessing(cl_dev: DeviceHandle) -> None:
    m, n, k = 32, 32, 32
    a, b, c = _operands(cl_dev, m, n, k)
    expect = a.to_host() @ b.to_host()
    q = cl_dev.queue
    spec = KernelSpec("matmul_tiled", src=TILED.format(attribute=""))
    with pytest.raises(ValueError, match=r"'matmul_tiled': its source uses __local, barrier, "
                                         r"get_local_id.*reqd_work_group_size"):
        spec.build(q).run(q, (m, n), None, a, b, c, m, n, k)
    spec.build(q).run(q, (m, n), (16, 16), a, b, c, m, n, k)  # the caller's size
    assert_close(c.to_host(), expect)
    fixed = KernelSpec("matmul_tiled", src=TILED.format(attribute=""), workgroup_size=(16, 16))
    for _ in range(3):
        fixed.build(q).run(q, (m, n), None, a, b, c, m, n, k)  # the spec's size
        assert_close(c.to_host(), expect)
    with pytest.raises(ValueError, match=r"global_size \(40, 32\) does not fit the local size"):
        fixed.build(q).run(q, (40, 32), None, a, b, c, m, n, k)


def test_required_size_contradicted_or_not_dividing_raises(cl_dev: DeviceHandle) -> None:
    m, n, k = 32, 32, 32
    a, b, c = _operands(cl_dev, m, n, k)
    q = cl_dev.queue
    prg = KernelSpec("matmul_tiled", src=TILED.format(attribute=REQUIRED)).build(q)
    with pytest.raises(ValueError, match=r"reqd_work_group_size\(16, 16, 1\); local_size \(8, 8\)"):
        prg.run(q, (m, n), (8, 8), a, b, c, m, n, k)
    with pytest.raises(ValueError, match=r"global_size \(24, 32\) does not fit"):
        prg.run(q, (24, 32), None, a, b, c, m, n, k)
    with pytest.raises(ValueError, match=r"launched over 1 dimension"):
        prg.run(q, (m * n,), None, a, b, c, m, n, k)


def test_independent_kernel_is_tuned_and_right(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue
    spec = KernelSpec("twice", src="__kernel void twice(__global float* x) "
                      "{ x[get_global_id(0)] *= 2.0f; }")
    host = np.arange(4096, dtype=np.float32)
    x = Tensor.from_host(q, host)
    for i in range(1, 4):
        spec.run(q, (4096,), None, x)
        np.testing.assert_array_equal(x.to_host(), host * 2**i)
    assert (4096,) in spec.build(q).tuned
    assert spec.build(q).work_group_features == ()


def test_pick_local_rules() -> None:
    assert pick_local("k", (64,), (32,), None, None, ("barrier",), True) == (32,)
    assert pick_local("k", (64,), None, None, 16, ("barrier",), True) == (16,)
    assert pick_local("k", (64,), None, None, None, (), True) == "tune"
    assert pick_local("k", (64,), None, None, None, (), False) == (64,)
    assert pick_local("k", (7,), None, None, 16, (), True) is None  # any size is right
    with pytest.raises(ValueError, match=r"local_size.*different numbers of dimensions"):
        pick_local("k", (64, 64), (8,), None, None, (), True)
