"""Kernel arguments checked against the declared parameters: ``BuiltKernel.run``'s conversions.

One converter per parameter, made once when a kernel is built (see :mod:`._signature`):

- a scalar of a known type takes Python and NumPy numbers, converted to that type; a float for
  an integer parameter, a value out of the type's range, or anything that is not a number is
  refused;
- a ``__global``/``__constant`` pointer takes a Tensor (its dtype must be the declared element
  type where that is known), a pyopencl memory object or ``None`` (NULL), never a NumPy array;
- a ``__local`` pointer takes ``pyopencl.LocalMemory``;
- a parameter whose type is not known, or not a plain scalar (a vector, an image, a sampler),
  takes NumPy values and memory objects as they are, but no Python number, whose width netcl
  would have to guess.

Examples:
    >>> from netcl.core.kernels._signature import parse_signature
    >>> params = parse_signature("__kernel void k(const float a, int n) {}", "k")
    >>> convert = converters("k", params)
    >>> [type(c(v)).__name__ for c, v in zip(convert, (2, 3))]
    ['float32', 'int32']
    >>> try:
    ...     convert[1](2.5)
    ... except TypeError as err:
    ...     print(str(err).replace(") takes", ")\\ntakes"))
    kernel 'k': parameter 'n' (argument 2, declared `int n`)
    takes an integer (int32), got a Python float (2.5); pass an int
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._cl import cl
from ..dtypes import c_type
from ..tensor import Tensor
from ._signature import KernelParam

__all__ = ["Converter", "converters", "describe", "tensor_buffer", "unparsed_converter"]

Converter = Callable[[Any], Any]


def describe(value: Any) -> str:
    """A short description of a kernel argument for error messages.

    Examples:
        >>> describe(2), describe(np.float64(0.5))
        ('a Python int (2)', 'a NumPy float64 scalar (0.5)')
        >>> describe(np.zeros((2, 3), np.float32))
        'a NumPy float32 array of shape (2, 3)'
    """
    if isinstance(value, Tensor):
        return f"a {value.dtype} Tensor of shape {value.shape}"
    if isinstance(value, np.ndarray):
        return f"a NumPy {value.dtype} array of shape {value.shape}"
    if isinstance(value, np.generic):
        return f"a NumPy {value.dtype} scalar ({value.item()!r})"
    if isinstance(value, (bool, int, float, complex)):
        return f"a Python {type(value).__name__} ({value!r})"
    if value is None:
        return "None"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def _where(kernel: str, p: KernelParam) -> str:
    return (f"kernel {kernel!r}: parameter {p.name!r} (argument {p.index + 1}, "
            f"declared `{p.declaration}`)")


def tensor_buffer(kernel: str, where: str, value: Tensor) -> Any:
    """The buffer of an OpenCL ``value``, after its pending writes; typed errors otherwise."""
    if value.array is not None:
        raise TypeError(f"{where}: got a Tensor on the NumPy backend, not an OpenCL one; "
                        "create it on the kernel's queue")
    if value.offset:
        raise ValueError(f"{where}: the Tensor has element offset {value.offset}; pass the "
                         "offset as a kernel argument instead")
    value.wait()
    return value.buffer


def _scalar(kernel: str, p: KernelParam, dtype: np.dtype[Any]) -> Converter:
    where = _where(kernel, p)
    exact = dtype.type
    integral = dtype.kind in "iu"
    what = f"an integer ({dtype})" if integral else f"a number ({dtype})"
    low, high = (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)) if integral else (0, 0)

    def convert(value: Any) -> Any:
        if type(value) is exact:
            return value
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if isinstance(value, (int, np.integer, np.bool_)):
            number = int(value)
            if integral and not low <= number <= high:
                raise ValueError(f"{where}: {number} is out of the range of {dtype} "
                                 f"[{low}, {high}]")
            if integral:
                return exact(number)
            return _float(where, dtype, number)
        if isinstance(value, (float, np.floating)):
            if integral:
                raise TypeError(f"{where} takes {what}, got {describe(value)}; pass an int")
            return _float(where, dtype, float(value))
        raise TypeError(f"{where} takes {what}, got {describe(value)}")

    return convert


def _float(where: str, dtype: np.dtype[Any], number: float) -> Any:
    with np.errstate(over="ignore"):
        out = dtype.type(number)
    if not np.isfinite(out) and np.isfinite(number):
        raise ValueError(f"{where}: {number!r} is out of the range of {dtype}")
    return out


def _buffer(kernel: str, p: KernelParam) -> Converter:
    where = _where(kernel, p)
    element = p.dtype.name if p.dtype is not None else None
    memory = tuple(t for t in (getattr(cl(), "MemoryObjectHolder", None),
                               getattr(cl(), "SVMPointer", None)) if t is not None)
    local, buffer = cl().LocalMemory, cl().Buffer

    def convert(value: Any) -> Any:
        if type(value) is buffer:  # the hot path of callers that pass buffers
            return value
        if isinstance(value, Tensor):
            if element is not None and value.dtype != element:
                raise TypeError(
                    f"{where} points to {p.type_name} ({element}), got {describe(value)}; "
                    f"convert the tensor (astype) or declare the parameter "
                    f"{c_type(value.dtype)}*")
            return tensor_buffer(kernel, where, value)
        if value is None or isinstance(value, memory):
            return value
        if isinstance(value, local):
            raise TypeError(f"{where} is a global pointer, got pyopencl.LocalMemory (that is "
                            "for __local parameters)")
        hint = ""
        if isinstance(value, np.ndarray):
            hint = "; a kernel reads device memory: pass Tensor.from_host(queue, array)"
        raise TypeError(f"{where} takes a Tensor or a pyopencl Buffer, got "
                        f"{describe(value)}{hint}")

    return convert


def _local(kernel: str, p: KernelParam) -> Converter:
    where = _where(kernel, p)
    local = cl().LocalMemory

    def convert(value: Any) -> Any:
        if isinstance(value, local):
            return value
        raise TypeError(f"{where} is a __local pointer: pass pyopencl.LocalMemory(nbytes), "
                        f"got {describe(value)}")

    return convert


def _unresolved(kernel: str, where: str, why: str) -> Converter:
    def convert(value: Any) -> Any:
        if isinstance(value, Tensor):
            return tensor_buffer(kernel, where, value)
        if isinstance(value, (bool, int, float, complex)):
            raise TypeError(
                f"{where}: {why}, so it will not guess the width of {describe(value)}; pass "
                "a NumPy scalar of the parameter's type (np.int32(...), np.float32(...))")
        return value

    return convert


def converters(kernel: str, params: Sequence[KernelParam] | None) -> list[Converter] | None:
    """One converter per parameter of ``kernel``; ``None`` when ``params`` is ``None``."""
    if params is None:
        return None
    out: list[Converter] = []
    for p in params:
        if p.kind == "scalar" and p.dtype is not None:
            out.append(_scalar(kernel, p, p.dtype))
        elif p.kind == "buffer":
            out.append(_buffer(kernel, p))
        elif p.kind == "local":
            out.append(_local(kernel, p))
        elif p.kind == "opaque":  # vectors, images, samplers: passed as given
            why = f"netcl passes its type {p.type_name!r} through unchecked"
            out.append(_unresolved(kernel, _where(kernel, p), why))
        else:
            why = f"netcl cannot resolve its type {p.type_name!r} from the source"
            out.append(_unresolved(kernel, _where(kernel, p), why))
    return out


def unparsed_converter(kernel: str, index: int) -> Converter:
    """The converter for argument ``index`` of a kernel whose parameter list was not found."""
    why = f"netcl found no `__kernel void {kernel}(...)` in the source to read its type from"
    return _unresolved(kernel, f"kernel {kernel!r}: argument {index + 1}", why)
