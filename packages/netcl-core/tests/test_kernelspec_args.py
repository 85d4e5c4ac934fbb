"""KernelSpec arguments checked against the parameters the kernel's source declares: Python
numbers converted to the declared scalar types, Tensor dtypes checked against the declared
element types, NumPy arrays refused, and no bad call breaking the calls after it."""

from __future__ import annotations

import numpy as np
import pytest

from netcl.core._cl import cl
from netcl.core.device import DeviceHandle
from netcl.core.kernels._signature import parse_signature, type_aliases
from netcl.core.kernels.primitives import KernelSpec
from netcl.core.tensor import Tensor

FILL = "__kernel void fill(__global float* x, const float k) { x[get_global_id(0)] = k; }"


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("KernelSpec runs on OpenCL devices")
    return dev


def _zeros(dev: DeviceHandle, n: int = 8, dtype: str = "float32") -> Tensor:
    return Tensor.from_host(dev.queue, np.zeros(n), dtype=dtype)


# -- scalars -------------------------------------------------------------------------------


def test_python_int_for_float_parameter_is_converted(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue
    x = _zeros(cl_dev)
    KernelSpec("fill", src=FILL).run(q, (8,), None, x, 2)  # was the bits of int 2: 2.8e-45
    np.testing.assert_array_equal(x.to_host(), np.full(8, 2.0, np.float32))
    KernelSpec("fill", src=FILL).run(q, (8,), None, x, np.int64(3))
    np.testing.assert_array_equal(x.to_host(), np.full(8, 3.0, np.float32))


def test_bad_call_then_good_call_works(cl_dev: DeviceHandle) -> None:
    """A bad call used to leave set_scalar_arg_dtypes typed wrongly: every later call of a kernel
    with that source then failed with ``std::bad_cast``."""
    q = cl_dev.queue
    x = _zeros(cl_dev)
    spec = KernelSpec("fill", src=FILL)
    with pytest.raises(TypeError, match=r"fill.*'k'.*float32.*complex"):
        spec.run(q, (8,), None, x, 1j)
    with pytest.raises(TypeError, match=r"fill.*'x'.*NumPy float32 array"):
        spec.run(q, (8,), None, np.zeros(8, np.float32), 1.0)
    spec.run(q, (8,), None, x, np.float32(4.5))
    np.testing.assert_array_equal(x.to_host(), np.full(8, 4.5, np.float32))
    other = KernelSpec("fill", src=FILL)  # the same source: the same cached cl.Kernel
    other.run(q, (8,), None, x, 5.25)
    np.testing.assert_array_equal(x.to_host(), np.full(8, 5.25, np.float32))


def test_float_for_int_parameter_raises(cl_dev: DeviceHandle) -> None:
    spec = KernelSpec("put", src="__kernel void put(__global int* x, int v) { x[0] = v; }")
    x = _zeros(cl_dev, 1, "int32")
    with pytest.raises(TypeError) as err:
        spec.run(cl_dev.queue, (1,), None, x, 2.5)
    message = str(err.value)
    assert "'put'" in message and "'v'" in message and "int32" in message
    assert "Python float (2.5)" in message
    with pytest.raises(TypeError, match=r"NumPy float32 scalar"):
        spec.run(cl_dev.queue, (1,), None, x, np.float32(2))
    spec.run(cl_dev.queue, (1,), None, x, True)  # bools are integers
    assert x.to_host().tolist() == [1]


def test_integer_out_of_range_raises(cl_dev: DeviceHandle) -> None:
    spec = KernelSpec("put", src="__kernel void put(__global uchar* x, uchar v) { x[0] = v; }")
    x = _zeros(cl_dev, 1, "uint8")
    with pytest.raises(ValueError, match=r"'v'.*256 is out of the range of uint8 \[0, 255\]"):
        spec.run(cl_dev.queue, (1,), None, x, 256)
    spec.run(cl_dev.queue, (1,), None, x, 255)
    assert x.to_host().tolist() == [255]


def test_long_unsigned_and_short_parameters(cl_dev: DeviceHandle) -> None:
    src = ("__kernel void put(__global long* x, long v, unsigned int u, short s) {"
           " x[0] = v; x[1] = u; x[2] = s; }")
    x = _zeros(cl_dev, 3, "int64")
    KernelSpec("put", src=src).run(cl_dev.queue, (1,), None, x, 2**40, 2**32 - 1, -9)
    assert x.to_host().tolist() == [2**40, 2**32 - 1, -9]


def test_unresolved_type_takes_numpy_scalars_only(cl_dev: DeviceHandle) -> None:
    src = ("#ifdef WIDE\n#define IDX long\n#else\n#define IDX int\n#endif\n"
           "__kernel void put(__global int* x, const IDX v) { x[0] = (int)v; }")
    spec = KernelSpec("put", src=src)
    x = _zeros(cl_dev, 1, "int32")
    with pytest.raises(TypeError, match=r"cannot resolve its type 'IDX'.*np.int32"):
        spec.run(cl_dev.queue, (1,), None, x, 5)
    spec.run(cl_dev.queue, (1,), None, x, np.int32(5))
    assert x.to_host().tolist() == [5]


def test_kernel_without_a_found_signature_takes_numpy_scalars(cl_dev: DeviceHandle) -> None:
    src = "#define KERNEL(n) __kernel void n\nKERNEL(put)(__global int* x, int v) { x[0] = v; }"
    spec = KernelSpec("put", src=src)
    x = _zeros(cl_dev, 1, "int32")
    with pytest.raises(TypeError, match=r"found no `__kernel void put"):
        spec.run(cl_dev.queue, (1,), None, x, 5)
    spec.run(cl_dev.queue, (1,), None, x, np.int32(6))
    assert x.to_host().tolist() == [6]


def test_wrong_number_of_arguments(cl_dev: DeviceHandle) -> None:
    with pytest.raises(TypeError, match=r"'fill' takes 2 arguments \(x, k\), got 3"):
        KernelSpec("fill", src=FILL).run(cl_dev.queue, (8,), None, _zeros(cl_dev), 1.0, 2.0)


# -- buffers -------------------------------------------------------------------------------


def test_float64_tensor_for_float_pointer_raises(cl_dev: DeviceHandle) -> None:
    if "cl_khr_fp64" not in cl_dev.cl_device.extensions:
        pytest.skip("float64 tensors need cl_khr_fp64")
    x = _zeros(cl_dev, 8, "float64")
    with pytest.raises(TypeError) as err:
        KernelSpec("fill", src=FILL).run(cl_dev.queue, (8,), None, x, 1.0)
    message = str(err.value)
    assert "'fill'" in message and "'x'" in message and "float32" in message
    assert "float64 Tensor" in message and "double*" in message


@pytest.mark.parametrize(("ctype", "dtype", "wrong"), [
    ("int", "int32", "float32"), ("uchar", "uint8", "int32"), ("long", "int64", "int32"),
    ("half", "float16", "float32"), ("float", "float32", "int32"),
])
def test_element_types_are_checked(cl_dev: DeviceHandle, ctype: str, dtype: str,
                                   wrong: str) -> None:
    if ctype == "half":
        body = "vstore_half(vload_half(i, src) * 2.0f, i, dst);"
    else:
        body = f"dst[i] = ({ctype})(src[i] * 2);"
    spec = KernelSpec("twice", src=f"__kernel void twice(__global const {ctype}* src, "
                      f"__global {ctype}* dst) {{ int i = get_global_id(0); {body} }}")
    host = np.arange(6)
    src, dst = Tensor.from_host(cl_dev.queue, host, dtype=dtype), _zeros(cl_dev, 6, dtype)
    spec.run(cl_dev.queue, (6,), None, src, dst)
    np.testing.assert_array_equal(dst.to_host(), (host * 2).astype(dtype))
    with pytest.raises(TypeError, match=rf"'src'.*{dtype}.*{wrong} Tensor"):
        spec.run(cl_dev.queue, (6,), None, _zeros(cl_dev, 6, wrong), dst)


def test_macro_and_typedef_element_types_are_checked(cl_dev: DeviceHandle) -> None:
    body = "{ x[get_global_id(0)] = (T)1; }"
    forms = [
        KernelSpec("k", src=f"#define T int\n__kernel void k(__global T* x) {body}"),
        KernelSpec("k", src=f"typedef int T;\n__kernel void k(__global T* x) {body}"),
        KernelSpec("k", src=f"__kernel void k(__global T* x) {body}", extra_flags=("-D T=int",)),
        KernelSpec("k", params=["__global T* x"], body=body, preamble="#define T int"),
    ]
    for spec in forms:
        x = _zeros(cl_dev, 4, "int32")
        spec.run(cl_dev.queue, (4,), None, x)
        assert x.to_host().tolist() == [1, 1, 1, 1]
        with pytest.raises(TypeError, match=r"'x'.*int32.*float32 Tensor"):
            spec.run(cl_dev.queue, (4,), None, _zeros(cl_dev, 4, "float32"))


def test_buffers_local_memory_and_null(cl_dev: DeviceHandle) -> None:
    src = ("__kernel void k(__global float* x, __local float* tmp, __global const float* maybe)"
           " { int i = get_local_id(0); tmp[i] = maybe ? maybe[i] : 7.0f;"
           " barrier(CLK_LOCAL_MEM_FENCE); x[i] = tmp[i]; }")
    spec = KernelSpec("k", src=src)
    x = _zeros(cl_dev, 4)
    spec.run(cl_dev.queue, (4,), (4,), x.buffer, cl().LocalMemory(16), None)
    assert x.to_host().tolist() == [7.0] * 4
    with pytest.raises(TypeError, match=r"'tmp'.*__local pointer: pass pyopencl.LocalMemory"):
        spec.run(cl_dev.queue, (4,), (4,), x, _zeros(cl_dev, 4), None)
    with pytest.raises(TypeError, match=r"'x'.*global pointer, got pyopencl.LocalMemory"):
        spec.run(cl_dev.queue, (4,), (4,), cl().LocalMemory(16), cl().LocalMemory(16), None)
    with pytest.raises(TypeError, match=r"'maybe'.*Python float"):
        spec.run(cl_dev.queue, (4,), (4,), x, cl().LocalMemory(16), 1.0)


# -- parsing (no device) -------------------------------------------------------------------


def test_parse_signature_forms() -> None:
    src = """
    // __kernel void k(int fake)
    #define REAL double
    typedef unsigned char byte;
    void helper(int x);
    __kernel __attribute__((reqd_work_group_size(16, 16, 1)))
    void k(__global const REAL* restrict a,   /* a comment, with a comma */
           __constant byte* lut, __local float4* tile, const unsigned long n,
           read_only image2d_t img, struct pair p, short s)
    { helper(1); }
    """
    params = parse_signature(src, "k", type_aliases(src))
    assert params is not None
    got = [(p.name, p.kind, None if p.dtype is None else p.dtype.name) for p in params]
    assert got == [
        ("a", "buffer", "float64"), ("lut", "buffer", "uint8"), ("tile", "local", "float32"),
        ("n", "scalar", "uint64"), ("img", "opaque", None), ("p", "unknown", None),
        ("s", "scalar", "int16"),
    ]
    assert parse_signature("__kernel void k(void) {}", "k") == ()
    assert parse_signature("__kernel void other(int x) {}", "k") is None


def test_vector_parameter_passes_numpy_values_and_refuses_python_numbers(
    cl_dev: DeviceHandle,
) -> None:
    float4 = np.dtype([("x", np.float32), ("y", np.float32), ("z", np.float32),
                       ("w", np.float32)])  # pyopencl.cltypes.float4's layout
    spec = KernelSpec("v", src="__kernel void v(__global float* x, float4 v) { x[0] = v.x + v.w; }")
    x = _zeros(cl_dev, 1)
    spec.run(cl_dev.queue, (1,), None, x, np.array((1, 2, 3, 4), dtype=float4)[()])
    assert x.to_host().tolist() == [5.0]
    with pytest.raises(TypeError, match=r"'v'.*passes its type 'float4' through unchecked"):
        spec.run(cl_dev.queue, (1,), None, x, 1.0)
