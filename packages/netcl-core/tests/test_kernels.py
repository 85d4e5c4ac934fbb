"""KernelSpec (both forms), the program cache, autotuning, elementwise builders, build errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernels.cache import KernelBuildError, get_kernel, get_program
from netcl.core.kernels.primitives import (
    PRIMITIVE_PREAMBLE,
    KernelSpec,
    PrimitiveBuilder,
    WorkGroupTuner,
    build_elementwise_kernel,
    count_launches,
    launch_count,
)
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("kernels need an OpenCL device")
    return dev


def test_params_body_form_source() -> None:
    src = KernelSpec(
        name="vec_add",
        params=["__global const float* a", "__global const float* b", "__global float* c"],
        preamble=PRIMITIVE_PREAMBLE,
        body="int gid = get_global_id(0); c[gid] = a[gid] + b[gid];",
    ).to_source()
    assert src.count("#define NETCL_ADD") == 1
    assert "__kernel void vec_add(__global const float* a, __global const float* b, " in src


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="name must be a C identifier"):
        KernelSpec(name="bad name", src="x")
    with pytest.raises(ValueError, match="give either src or params"):
        KernelSpec(name="empty")


@pytest.mark.parametrize("n", [1, 7, 33, 257, 4096])
def test_vec_add_runs(cl_dev: DeviceHandle, n: int) -> None:
    spec = KernelSpec(
        name="vec_add",
        params=["__global const float* a", "__global const float* b", "__global float* c",
                "const int n"],
        body="int gid = get_global_id(0); if (gid < n) c[gid] = NETCL_ADD(a[gid], b[gid]);",
    )
    q = cl_dev.queue
    a, b = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
    ta, tb = Tensor.from_host(q, a), Tensor.from_host(q, b)
    tc = Tensor.from_shape(q, (n,), fill=None)
    g, loc = WorkGroupTuner().launch_1d(n)
    spec.build(q).run(q, g, loc, ta, tb, tc, n)
    assert_close(tc.to_host(), a + b)
    assert spec.build(q) is spec.build(q.context)  # built once per context


def test_in_place_kernel_with_autotune_applies_once(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue
    spec = KernelSpec(
        name="scale_by_two",
        src="__kernel void scale_by_two(__global float* x) {"
        "  int gid = get_global_id(0);  x[gid] *= 2.0f; }",
    )
    host = np.arange(1024, dtype=np.float32)
    x = Tensor.from_host(q, host)
    prg = spec.build(q)
    prg.run(q, (x.size,), None, x)
    np.testing.assert_array_equal(x.to_host(), host * 2)
    assert (1024,) in prg.tuned  # the winner is kept per global size
    prg.run(q, (x.size,), None, x)
    np.testing.assert_array_equal(x.to_host(), host * 4)


def test_fixed_workgroup_size_and_no_tune(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue
    spec = KernelSpec(
        name="inc", src="__kernel void inc(__global int* x) { x[get_global_id(0)] += 1; }",
        workgroup_size=32, tune=False,
    )
    x = Tensor.from_host(q, np.zeros(96, dtype=np.int32))
    spec.build(q).run(q, 96, None, x)
    spec.build(q).run(q, 7, None, x)  # 32 does not divide 7: the driver picks
    expect = np.ones(96, np.int32)
    expect[:7] += 1
    np.testing.assert_array_equal(x.to_host(), expect)


@pytest.mark.parametrize("dtype", ["float", "half"])
def test_build_elementwise_kernel(cl_dev: DeviceHandle, dtype: str) -> None:
    q = cl_dev.queue
    spec, kernel = build_elementwise_kernel(
        q.context, name="mul_add", arity=2, expression="MUL(ADD(v0, v1), 2.0f)", dtype=dtype
    )
    if dtype == "half":
        assert "-cl-fast-relaxed-math" in spec.extra_flags
        has_fp16 = "cl_khr_fp16" in cl_dev.cl_device.extensions
        assert ("cl_khr_fp16 : enable" in kernel.source) == has_fp16
    n = 33
    a = np.linspace(-2, 2, n).astype(np.float32)
    ta = Tensor.from_host(q, a, dtype=dtype)
    out = Tensor.from_shape(q, (n,), dtype=dtype, fill=None)
    g, loc = WorkGroupTuner().launch_1d(n)
    kernel.run(q, g, loc, ta, ta, out, n)
    assert_close(out.to_host(), 4 * a, "float16" if dtype == "half" else "float32")


def test_builder_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="arity must be >= 1"):
        PrimitiveBuilder().elementwise_spec("k", 0, "v0")
    with pytest.raises(ValueError, match="float type"):
        PrimitiveBuilder(dtype="int32").elementwise_spec("k", 1, "v0")


def test_build_failure_carries_log_and_saved_source(
    cl_dev: DeviceHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path))
    spec = KernelSpec(name="broken", src="__kernel void broken(__global float* x) { x[0] = y; }")
    with pytest.raises(KernelBuildError) as info:
        spec.build(cl_dev.queue)
    err = info.value
    assert err.name == "broken" and err.device == cl_dev.device_name
    assert err.source_path.exists() and "x[0] = y" in err.source_path.read_text()
    assert "y" in err.log and "build log" in str(err) and str(err.source_path) in str(err)


def test_programs_and_kernels_are_cached(cl_dev: DeviceHandle) -> None:
    src = "__kernel void k1(__global float* x) { x[0] = 1.0f; }"
    ctx = cl_dev.context
    assert get_program(ctx, src) is get_program(ctx, src)
    assert get_kernel(ctx, src, "k1") is get_kernel(ctx, src, "k1")


def test_second_process_compiles_nothing(cl_dev: DeviceHandle, tmp_path: Path) -> None:
    code = (
        "import numpy as np\n"
        "from netcl.core.device import manager\n"
        "from netcl.core.kernels.primitives import build_elementwise_kernel\n"
        "from netcl.core.kernels.cache import build_stats\n"
        f"q = manager.default({os.environ.get('NETCL_DEVICE') or 'cl'!r}).queue\n"
        "build_elementwise_kernel(q.context, 'disk_cached', 1, 'v0 * 3.0f')\n"
        "print(build_stats()['compiled'], build_stats()['from_disk'])\n"
    )
    env = {**os.environ, "NETCL_CACHE_DIR": str(tmp_path), "NETCL_DISK_CACHE": "1"}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True).stdout.split()
    assert first == ["1", "0"] and second == ["0", "1"]


def test_launch_counter(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue
    _, kernel = build_elementwise_kernel(q.context, "cnt", 1, "v0")
    t = Tensor.from_host(q, np.ones(8))
    before = launch_count()
    with count_launches() as n:
        for _ in range(3):
            kernel.run(q, (8,), None, t, t, 8)
    assert n[0] == 3 and launch_count() - before == 3


def test_numpy_tensor_is_rejected_as_kernel_arg(cl_dev: DeviceHandle) -> None:
    from netcl.core.device import manager

    spec, kernel = build_elementwise_kernel(cl_dev.context, "rej", 1, "v0")
    host_t = Tensor.from_host(manager.default("cpu").queue, np.ones(4))  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="NumPy backend"):
        kernel.run(cl_dev.queue, (4,), None, host_t, host_t, 4)
    with pytest.raises(TypeError, match="needs an OpenCL queue"):
        spec.build(manager.default("cpu").queue)  # type: ignore[union-attr]


def test_dropping_inputs_while_kernels_are_queued(cl_dev: DeviceHandle) -> None:
    """A tensor dropped right after a launch that reads it must not free memory under the
    queued kernel (zero-copy buffers are retired behind a queue marker)."""
    q = cl_dev.queue
    _, kernel = build_elementwise_kernel(q.context, "acc_add", 2, "ADD(v0, v1)")
    n = 4099
    acc = Tensor.from_host(q, np.zeros(n, np.float32))
    expect = np.zeros(n, np.float32)
    rng = np.random.default_rng(0)
    g, loc = WorkGroupTuner().launch_1d(n)
    for _ in range(60):
        host = rng.standard_normal(n).astype(np.float32)
        expect += host
        kernel.run(q, g, loc, acc, Tensor.from_host(q, host), acc, n)  # input dies at once
    np.testing.assert_allclose(acc.to_host(), expect, rtol=1e-5, atol=1e-5)


def test_numpy_scalars_keep_their_width(cl_dev: DeviceHandle) -> None:
    if "cl_khr_fp64" not in cl_dev.cl_device.extensions:
        pytest.skip("needs fp64")
    spec = KernelSpec(name="put", src="__kernel void put(__global double* x, double v) {"
                      " x[0] = v; }")
    x = Tensor.from_host(cl_dev.queue, np.zeros(1), dtype="float64")
    spec.build(cl_dev.queue).run(cl_dev.queue, (1,), (1,), x, np.float64(1 / 3))
    assert x.to_host()[0] == 1 / 3  # not rounded through float32
