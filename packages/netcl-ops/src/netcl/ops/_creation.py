"""Creation ops: fill, full, zeros, ones, arange, one_hot.

Creation functions take the device to create on as their first argument, like
:meth:`netcl.core.tensor.Tensor.from_shape`: a queue, ``None`` (the active device), a selector
string (``"cpu"``, ``"cl"``, ``"pthread"``, ...) or a DeviceHandle; ``device=`` is PyTorch's
keyword for it (see :mod:`netcl.core.placement`), and ``dtype=`` takes a dtype name or a NumPy
dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, INT_DTYPES, canonical_dtype
from netcl.core.kernels.family import KernelSource, kernel_family
from netcl.core.placement import resolve_queue
from netcl.core.recording import numpy_call, numpy_update
from netcl.core.tensor import CPU_BACKEND, Tensor, check_shape

from ._common import check_tensor, empty
from ._dtype_policy import SCALAR_FLOAT, kernel_scalar, np_compute, scalar_kind
from ._elementwise_dispatch import host, np_checked, np_result
from ._launch import device_buffer, index_defs, launch_items

__all__ = ["arange", "fill", "full", "one_hot", "ones", "zeros"]

_SOURCE = """
__kernel void fill_k(__global T* out, const IDX oo, const CT value, const IDX n) {
  const IDX i = get_global_id(0);
  if (i < n) ST(out, oo + i, value);
}

__kernel void arange_k(__global T* out, const CT start, const CT step, const IDX n) {
  const IDX i = get_global_id(0);
  if (i < n) ST(out, i, start + (CT)i * step);
}
"""

_ONE_HOT = """
__kernel void one_hot_k(__global T* out, __global const LT* labels, const IDX lo,
                        const IDX C, const IDX n) {
  const IDX i = get_global_id(0);
  if (i >= n) return;
  const long label = (long)labels[lo + i / C];
  ST(out, i, label == (long)(i % C) ? (CT)1 : (CT)0);  /* out of range: a row of zeros */
}
"""


def device_queue(queue: Any, device: Any = None, op: str = "device") -> Any:
    """The queue a creation op's device argument names: ``queue`` or its PyTorch spelling
    ``device`` (a queue, ``None`` for the active device, a selector string or a DeviceHandle).

    Raises:
        TypeError: both ``queue`` and ``device`` are given.

    Examples:
        >>> device_queue(None, "cpu").backend
        'cpu'
    """
    if device is not None:
        if queue is not None:
            raise TypeError(f"{op}: got both a queue ({queue!r}) and device={device!r}; give one")
        queue = device
    return resolve_queue(queue, op)


def _program_source(wide: bool, extra: str = "", source: str = _SOURCE) -> str:
    """``source`` (``fill_k``/``arange_k`` or ``one_hot_k``) after the ``IDX`` definition (64-bit
    if ``wide``) and ``extra`` defines; the dtype header comes from :func:`creation_family`."""
    return index_defs(2**31 if wide else 0)[0] + extra + source


def _one_hot_defines(label_dtype: str) -> str:
    return f"#define LT {'int' if label_dtype == 'int32' else 'long'}\n"


def _creation_golden() -> list[tuple[str, tuple[str, str, bool, str]]]:
    cases = [(f"creation/fill_arange-{dt}", ("fill_arange", dt, False, ""))
             for dt in (*FLOAT_DTYPES, "int32")]
    cases += [(f"creation/one_hot-{dt}-labels-{labels}", ("one_hot", dt, False, labels))
              for dt, labels in (("int64", "int64"), ("float32", "int32"))]
    return cases


@kernel_family("ops.creation", golden=_creation_golden)
def creation_family(kind: str, dtype: str, wide: bool, labels: str = "") -> KernelSource:
    """``fill_k`` and ``arange_k`` (``kind="fill_arange"``) or ``one_hot_k`` (reading
    ``labels`` dtype labels) writing ``dtype``; one work item per element (``launch_items``)."""
    if kind == "one_hot":
        return KernelSource(_program_source(wide, _one_hot_defines(labels), _ONE_HOT),
                            ("one_hot_k",), dtype)
    return KernelSource(_program_source(wide), ("fill_k", "arange_k"), dtype)


def _kernel(queue: Any, name: str, dtype: str, wide: bool, labels: str = "") -> Any:
    kind = "one_hot" if name == "one_hot_k" else "fill_arange"
    return creation_family(queue.context, kind, dtype, wide, labels).kernels[name]


def fill(x: Tensor, value: float) -> Tensor:
    """Set every element of ``x`` to ``value`` in place; returns ``x``.

    Raises:
        ValueError: an integer ``value`` out of range for ``x``'s integer dtype.
        TypeError: a float ``value`` for an integer tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = zeros(manager.default("cpu").queue, (2,))
        >>> fill(x, 7).to_host().tolist()
        [7.0, 7.0]
    """
    return fill_for("fill", x, value)


def fill_for(op: str, x: Tensor, value: float) -> Tensor:
    """:func:`fill` on behalf of ``op`` (``full``, ``pad``): its errors name ``op``."""
    x = check_tensor(op, x)
    if x.dtype in INT_DTYPES and scalar_kind(op, value) == SCALAR_FLOAT:
        raise TypeError(f"{op}: float value {value!r} for an integer tensor ({x.dtype})")
    v = kernel_scalar(op, value, x.dtype)
    if x.array is not None:
        numpy_update(_fill_np, x.array, v)
        return x
    n = x.size
    if n:
        _, idx = index_defs(x.offset + n)
        kernel = _kernel(x.queue, "fill_k", x.dtype, idx is np.int64)
        launch_items(x.queue, kernel, n, device_buffer(x), idx(x.offset), v, idx(n))
    return x


def full(queue: Any, shape: int | Sequence[int], value: float, dtype: Any = None, *,
         device: Any = None) -> Tensor:
    """A new tensor of ``shape`` filled with ``value``.

    ``dtype=None`` gives int64 for an int ``value`` and float32 for a float one (as PyTorch).

    Examples:
        >>> from netcl.core.device import manager
        >>> full(manager.default("cpu").queue, (2,), 1.5).to_host().tolist()
        [1.5, 1.5]
    """
    return _full("full", device_queue(queue, device, "full"), shape, value, dtype)


def _full(op: str, queue: Any, shape: int | Sequence[int], value: float, dtype: Any) -> Tensor:
    """:func:`full` on behalf of ``op`` (``zeros``, ``ones``): its errors name ``op``."""
    kind = scalar_kind(op, value)
    if dtype is None:
        dtype = "float32" if kind == SCALAR_FLOAT else "int64"
    q, dims, dtype = device_queue(queue, None, op), shape_arg(shape, op), canonical_dtype(dtype, op)
    if getattr(q, "backend", None) == "cpu":  # one recordable NumPy call, no empty + fill
        if dtype in INT_DTYPES and kind == SCALAR_FLOAT:
            raise TypeError(f"{op}: float value {value!r} for an integer tensor ({dtype})")
        # the backend's allocation: its MemoryError names the size, as Tensor.from_shape's
        arr = numpy_call(CPU_BACKEND.from_shape, check_shape(dims, op), dtype,
                         kernel_scalar(op, value, dtype))
        return Tensor(shape=arr.shape, dtype=dtype, queue=q, array=arr, _backend=CPU_BACKEND)
    return fill_for(op, empty(q, dims, dtype), value)


def zeros(queue: Any, shape: int | Sequence[int], dtype: Any = "float32", *,
          device: Any = None) -> Tensor:
    """A new tensor of ``shape`` filled with 0.

    Examples:
        >>> from netcl.core.device import manager
        >>> zeros(manager.default("cpu").queue, (1, 2)).to_host().tolist()
        [[0.0, 0.0]]
        >>> zeros(None, 3, "int32", device="cpu").to_host().tolist()
        [0, 0, 0]
    """
    return _full("zeros", device_queue(queue, device, "zeros"), shape, 0, dtype)


def ones(queue: Any, shape: int | Sequence[int], dtype: Any = "float32", *,
          device: Any = None) -> Tensor:
    """A new tensor of ``shape`` filled with 1.

    Examples:
        >>> from netcl.core.device import manager
        >>> ones(manager.default("cpu").queue, (2,), "int32").to_host().tolist()
        [1, 1]
    """
    return _full("ones", device_queue(queue, device, "ones"), shape, 1, dtype)


def shape_arg(shape: Any, op: str = "shape") -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints >= 0) as a tuple; errors name ``op``."""
    return check_shape(shape, op)


def arange(queue: Any, start: float, stop: float | None = None, step: float = 1,
           dtype: Any = None, *, device: Any = None) -> Tensor:
    """``start, start + step, ...`` below ``stop`` (one argument: ``0 .. start``), as NumPy.

    ``dtype=None`` gives int64 when every argument is an int, else float32. Element ``i`` is
    ``start + i * step`` computed in the dtype.

    Raises:
        ValueError: ``step`` is 0.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> arange(q, 4).to_host().tolist(), arange(q, 1, 2, 0.25).to_host().tolist()
        ([0, 1, 2, 3], [1.0, 1.25, 1.5, 1.75])
    """
    if stop is None:
        start, stop = 0, start
    kinds = [scalar_kind("arange", v) for v in (start, stop, step)]
    if step == 0:
        raise ValueError("arange: step must not be 0")
    if dtype is None:
        dtype = "float32" if SCALAR_FLOAT in kinds else "int64"
    dtype = canonical_dtype(dtype, "arange")
    n = max(0, math.ceil((stop - start) / step))
    if SCALAR_FLOAT not in kinds:
        n = max(0, -(-(int(stop) - int(start)) // int(step)))
    q = device_queue(queue, device, "arange")
    a, d = kernel_scalar("arange", start, dtype), kernel_scalar("arange", step, dtype)
    if getattr(q, "backend", None) == "cpu":
        arr = numpy_call(_arange_np, a, d, n, np_compute(dtype), np.dtype(dtype))
        return Tensor(shape=arr.shape, dtype=dtype, queue=q, array=arr, _backend=CPU_BACKEND)
    out = empty(q, (n,), dtype)
    if n:
        _, idx = index_defs(n)
        kernel = _kernel(q, "arange_k", dtype, idx is np.int64)
        launch_items(q, kernel, n, device_buffer(out), a, d, idx(n))
    return out


def one_hot(labels: Tensor, num_classes: int, dtype: Any = "int64") -> Tensor:
    """``labels`` (int32/int64, any shape) as one-hot rows: shape ``labels.shape + (C,)``.

    ``num_classes`` is required (inferring it would need the labels on the host).

    Raises:
        TypeError: labels that are not int32/int64.
        ValueError: ``num_classes < 1``; on the NumPy backend a label outside
            ``[0, num_classes)``. On OpenCL such a label gives a row of zeros (checking would
            need a host round trip).

    Examples:
        >>> from netcl.core.device import manager
        >>> y = Tensor.from_host(manager.default("cpu").queue, np.array([2, 0]))
        >>> one_hot(y, 3).to_host().tolist()
        [[0, 0, 1], [1, 0, 0]]
    """
    labels = check_tensor("one_hot", labels, "labels")
    if labels.dtype not in ("int32", "int64"):
        raise TypeError(f"one_hot: labels must be int32 or int64, got {labels.dtype}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or \
            num_classes < 1:
        raise ValueError(f"one_hot: num_classes must be an int >= 1, got {num_classes!r}")
    dtype = canonical_dtype(dtype, "one_hot")
    C = int(num_classes)
    shape = (*labels.shape, C)
    if labels.array is not None:
        np_checked(labels, _check_one_hot, host(labels), C)  # each replay's labels too
        return np_result(labels, dtype, _one_hot_np, host(labels), C)
    out = empty(labels.queue, shape, dtype)
    n = out.size
    if n:
        _, idx = index_defs(n, labels.offset + labels.size)
        kernel = _kernel(labels.queue, "one_hot_k", dtype, idx is np.int64, labels.dtype)
        launch_items(labels.queue, kernel, n, device_buffer(out), device_buffer(labels),
                     idx(labels.offset), idx(C), idx(n))
    return out



# -- NumPy backend (NOTE [ NumPy work under a recorder ] in netcl.core.recording) -----------


def _fill_np(a: Any, value: Any) -> None:
    a[...] = value


def _arange_np(start: Any, step: Any, n: int, ct: Any, dtype: Any) -> Any:
    return np.asarray(start + np.arange(n).astype(ct) * step, dtype=dtype)


def _check_one_hot(y: Any, C: int) -> None:
    bad = (y < 0) | (y >= C)
    if bad.any():
        raise ValueError(f"one_hot: label {int(y[bad][0])} is out of range for {C} classes")


def _one_hot_np(y: Any, C: int) -> Any:
    return np.arange(C) == y[..., None]
