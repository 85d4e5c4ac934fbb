"""The code examples on spec pages 000 (core), 002 (PyOpenCL), 003 (KernelSpec) and 004 (Tensor),
as written, with only undefined placeholders filled in. Examples that use ops or autograd live in
those packages' tests."""

from __future__ import annotations

import numpy as np
import pytest

from netcl.core.device import DeviceHandle


def test_page_000_device_manager(dev: DeviceHandle) -> None:
    from netcl.core.device import manager

    dev_ = manager.default("auto")
    assert dev_ is not None
    print(dev_.platform_name, dev_.device_name, dev_.backend, dev_.device_type)
    print(type(dev_.queue), type(dev_.context))

    from netcl.core.device import device, get_active_device

    with device("cpu") as d:
        assert get_active_device() is d


def test_page_000_tensor_pool_backend(dev: DeviceHandle) -> None:
    from netcl.core.device import manager
    from netcl.core.tensor import Tensor

    q = dev.queue
    host_ndarray = np.random.rand(4, 8).astype(np.float32)
    a = Tensor.from_host(q, host_ndarray)
    b = Tensor.from_shape(q, (4, 8), dtype="float32")
    assert a.shape == b.shape == (4, 8)

    from netcl.core.memory import BufferPool

    pool = BufferPool(dev.context)
    h = pool.allocate(1024)
    h.release()
    print(pool.stats.hits, pool.stats.misses, pool.stats.bytes_cached)

    from netcl.core.memory import get_persistent_pool

    print(get_persistent_pool(q).get_stats())

    from netcl.core.backend.cpu import CPUBackend

    be = CPUBackend()
    host_arr = np.arange(32)
    x = be.from_host(host_arr, dtype="float32")
    y = be.from_shape((4, 8), dtype="float32")
    print(be.to_host(x, (4, 8), "float32"), y)
    assert manager.default("cpu") is not None


def test_page_000_kernel_primitives(dev: DeviceHandle) -> None:
    from netcl.core.kernels.primitives import PRIMITIVE_PREAMBLE, KernelSpec

    src = KernelSpec(
        name="vec_add",
        params=[
            "__global const float* a",
            "__global const float* b",
            "__global float* c",
        ],
        preamble=PRIMITIVE_PREAMBLE,
        body="int gid = get_global_id(0); c[gid] = a[gid] + b[gid];",
    ).to_source()
    assert "vec_add" in src

    from netcl.core.kernels.primitives import PrimitiveBuilder, WorkGroupTuner

    builder = PrimitiveBuilder(dtype="float", tuner=WorkGroupTuner())
    spec = builder.elementwise_spec(name="mul_add", arity=2, expression="MUL(ADD(v0, v1), 2.0f)")
    assert isinstance(spec, KernelSpec)
    if dev.backend != "cl":
        return
    context = dev.context
    from netcl.core.kernels.primitives import build_elementwise_kernel

    spec, kernel = build_elementwise_kernel(
        context, name="mul_add", arity=2,
        expression="MUL(ADD(v0, v1), 2.0f)",
        dtype="float",
    )
    assert kernel.kernel is not None


def test_page_000_capabilities(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("device_profile takes an OpenCL device")
    from netcl.core.capabilities import device_profile
    from netcl.core.tensor import Tensor

    queue = dev.queue
    prof = device_profile(queue.device)
    if prof.has_fp16:
        x = Tensor.from_shape(queue, (4, 4), dtype="float16")
    else:
        x = Tensor.from_shape(queue, (4, 4), dtype="float32")
    assert x.shape == (4, 4)


def test_pages_002_003_scale_by_two(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("KernelSpec runs on OpenCL devices")
    import netcl.core as nc  # the root shortcut form is tested in the meta-package
    from netcl.core.device import device, get_active_device

    queue = dev.queue
    n = 257
    numpy_array = np.arange(n, dtype=np.float32)
    with device(dev):
        assert get_active_device() is dev
        spec = nc.KernelSpec(
            name="scale_by_two",
            src="""__kernel void scale_by_two(__global float* x) {
            int gid = get_global_id(0);
            x[gid] *= 2.0f;
            }""",
        )
        prg = spec.build(queue)
        x = nc.Tensor.from_host(numpy_array)
        prg.run(queue, (x.size,), None, x)
    np.testing.assert_array_equal(x.to_host(), numpy_array * 2)


def test_page_003_autotuned_matmul(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("KernelSpec runs on OpenCL devices")
    import netcl.core as nc  # the root shortcut form is tested in the meta-package
    from netcl.core.device import device

    queue = dev.queue
    M, N, K = 32, 48, 16
    rng = np.random.default_rng(0)
    ha, hb = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    with device(dev):
        a, b = nc.Tensor.from_host(ha), nc.Tensor.from_host(hb)
        c = nc.Tensor.from_shape(None, (M, N))
    spec = nc.KernelSpec(
        name="matmul_tiled",
        src="""__kernel void matmul_tiled(
        __global const float* a, __global const float* b,
        __global float* c, int M, int N, int K) {
            int i = get_global_id(0), j = get_global_id(1);
            if (i >= M || j >= N) return;
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += a[i * K + k] * b[k * N + j];
            c[i * N + j] = acc;
        }""",
        workgroup_size=None,  # autotune
    )
    prg = spec.build(queue)
    prg.run(queue, (M, N), None, a, b, c, M, N, K)
    prg.run(queue, (M, N), None, a, b, c, M, N, K)
    assert (M, N) in prg.tuned
    np.testing.assert_allclose(c.to_host(), ha @ hb, rtol=1e-4, atol=1e-4)


def test_page_004_examples(dev: DeviceHandle) -> None:
    from netcl.core.memory import BufferPool
    from netcl.core.tensor import Tensor, reshape

    q = dev.queue
    a = Tensor.from_host(q, np.eye(4, dtype=np.float32))
    host_array = np.random.rand(3, 3)
    b = Tensor.from_host(q, host_array, dtype="float16")
    assert a.dtype == "float32" and b.dtype == "float16"
    x = Tensor.from_shape(q, (4, 8), dtype="float32")
    assert x.to_host().shape == (4, 8)

    host = np.random.randn(3, 4).astype(np.float32)
    dev_t = Tensor.from_host(q, host)
    back = dev_t.to_host()
    assert np.allclose(host, back)

    custom_pool = BufferPool(q.context)
    x = Tensor.from_shape(q, (128, 128), dtype="float32", pool=custom_pool)
    if dev.backend == "cl":
        assert x.pool_handle is not None and x.pool_handle._pool is custom_pool

    flat = Tensor.from_shape(q, (12,), dtype="float32")
    mat = reshape(flat, (3, 4))
    print(mat.shape, mat._base is flat)
    assert mat._base is flat

    out_features, in_features = 5, 7
    w = Tensor.from_shape(q, (out_features, in_features), dtype="float32")
    w.persistent = True
