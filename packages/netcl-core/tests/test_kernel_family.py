"""netcl.core.kernels.family and .header: per-context caches, kernel families, the header."""

from __future__ import annotations

import doctest
import gc

import numpy as np
import pytest

from netcl.core._cl import cl
from netcl.core.device import DeviceHandle
from netcl.core.kernels import cache, family, header
from netcl.core.kernels.cache import ContextCache
from netcl.core.kernels.family import (
    Geometry,
    KernelSource,
    grid_1d,
    kernel_family,
    local_size_1d,
)
from netcl.core.kernels.header import kernel_header
from netcl.core.kernels.primitives import KernelSpec
from netcl.core.tensor import Tensor


@pytest.mark.parametrize("module", [family, header, cache])
def test_doctests(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.failed == 0


class _Context:
    pass


def test_context_cache_drops_entries_with_the_context() -> None:
    store = ContextCache("test")
    a, b = _Context(), _Context()
    store.of(a)["k"] = 1
    store.of(b)["k"] = 2
    assert (store.of(a)["k"], store.of(b)["k"], len(store)) == (1, 2, 2)
    del a
    gc.collect()
    assert len(store) == 1 and list(store) == [(b, "k")]


def test_context_cache_holds_unweakrefable_contexts_strongly() -> None:
    store = ContextCache("test")
    key = (1, 2)  # tuples take no weak references
    store.of(key)["x"] = 3
    assert store.of(key)["x"] == 3 and len(store) == 1


def test_the_one_1d_rule() -> None:
    class Dev:
        def __init__(self, largest: int) -> None:
            self.max_work_group_size = largest

    assert [local_size_1d(Dev(n)) for n in (8192, 1024, 256, 200, 64, 1)] == [
        256, 256, 256, 128, 64, 1]
    assert grid_1d(257, 256) == ((512,), (256,))


def test_header_pragmas_follow_the_device() -> None:
    assert kernel_header("cl_khr_fp16", "float16").startswith("#pragma OPENCL EXTENSION "
                                                              "cl_khr_fp16 : enable\n")
    assert not kernel_header("", "float16").startswith("#pragma")
    assert "#pragma" not in kernel_header("cl_khr_fp64", "float32")
    assert "#define LD(p, i) vload_half((i), (p))" in kernel_header(None, "float16")


@kernel_family("test.twice")
def _twice(dtype: str) -> KernelSource:
    return KernelSource(
        "__kernel void twice(__global T* x, const int n) {\n"
        "  const int i = get_global_id(0);\n  if (i < n) ST(x, i, LD(x, i) * 2);\n}\n",
        ("twice",), dtype, Geometry())


def test_family_source_is_pure_and_memoized() -> None:
    assert _twice.source("float32") is _twice.source("float32")
    assert _twice.source("float32").render("cl_khr_fp64").startswith("#ifndef NETCL_PRIMITIVES")
    assert family.families("test.") == [_twice]
    with pytest.raises(ValueError, match="exists already"):
        kernel_family("test.twice")(lambda: _twice.source("float32"))


def test_family_builds_once_per_context_and_launches(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("kernels need an OpenCL device")
    q = dev.queue
    built = _twice(q.context, "float32")
    assert _twice(q.context, "float32") is built
    x = Tensor.from_host(q, np.arange(300, dtype=np.float32))
    built.launch(q, 300, x, np.int32(300))
    np.testing.assert_array_equal(x.to_host(), 2 * np.arange(300, dtype=np.float32))
    assert built.grid(q, 300) == ((512,), (256,)) or built.grid(q, 300)[1][0] < 256


def test_a_dead_context_leaves_no_cache_entry(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("kernels need an OpenCL device")
    ctx = cl().Context([dev.cl_device])
    spec = KernelSpec("one", src="__kernel void one(__global float* x) { x[0] = 1.0f; }")
    before = (len(cache._programs), len(cache._kernels), len(_twice._built))
    built = _twice(ctx, "float32")
    assert built.kernels["twice"] is not None and spec.build(ctx).kernel is not None
    assert (len(cache._programs), len(cache._kernels), len(_twice._built)) == (
        before[0] + 2, before[1] + 2, before[2] + 1)
    del ctx, built
    gc.collect()
    assert (len(cache._programs), len(cache._kernels), len(_twice._built)) == before
    assert len(spec._built) == 0
