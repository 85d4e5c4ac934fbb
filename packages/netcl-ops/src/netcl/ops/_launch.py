"""How ops launch kernels: kernel arguments of tensors, index widths, the 1-D launch.

Every 1-D launch of an op uses the device's one local size,
:func:`netcl.core.kernels.family.local_size_1d` (see NOTE [ The 1-D launch rule ] there);
:func:`launch_items` and ``_common.launch_1d`` both go through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.kernel_selector import get_kernel_selector
from netcl.core.kernels.family import local_size_1d
from netcl.core.kernels.header import index_macro
from netcl.core.kernels.primitives import launch, launch_values
from netcl.core.recording import pyopencl
from netcl.core.tensor import Tensor, output_tensor

__all__ = [
    "INT32_LIMIT",
    "Remembered",
    "device_buffer",
    "index_defs",
    "is_gpu",
    "launch_items",
    "launch_key",
    "launch_nd",
    "local_size",
    "queue_facts",
    "remember",
    "remembered",
    "run_remembered",
    "view_args",
]

INT32_LIMIT = 2**31 - 1


def device_buffer(t: Tensor) -> Any:
    """The OpenCL buffer behind ``t`` (its pending upload waited for); offsets go separately."""
    t.wait()
    return t.buffer


def view_args(*values: Any) -> list[Any]:
    """Kernel arguments with each Tensor as two, its buffer and its element offset (``long``),
    for kernels written ``__global T* x, const long xo`` that start with ``x += xo``; other
    values pass through. Views with an offset then work with no copy."""
    out: list[Any] = []
    for v in values:
        out += [device_buffer(v), np.int64(v.offset)] if isinstance(v, Tensor) else [v]
    return out


def index_defs(*extents: int) -> tuple[str, Callable[[int], Any]]:
    """``#define IDX`` for indices up to ``max(extents)`` and the matching argument converter.

    32-bit indices while every extent fits (fast division on GPUs), 64-bit beyond.

    Examples:
        >>> index_defs(10, 2**31)
        ('#define IDX long\\n', <class 'numpy.int64'>)
    """
    if max(extents, default=0) > INT32_LIMIT:
        return index_macro(True), np.int64
    return index_macro(False), np.int32


def local_size(device: Any) -> int:
    """The one 1-D local size of ``device``: :func:`netcl.core.kernels.family.local_size_1d`."""
    return local_size_1d(device)


# queue -> (queue, its device's selector, its local size); the queue is held in the value, so
# its id cannot be reused while the entry lives (an identity check guards the lookup)
_queue_selectors: dict[int, tuple[Any, Any, int]] = {}


def queue_facts(queue: Any) -> tuple[Any, Any, int]:
    """(queue, its device's selector, its local size), without a driver query per call."""
    facts = _queue_selectors.get(id(queue))
    if facts is None or facts[0] is not queue:
        device = queue.device
        facts = _queue_selectors[id(queue)] = (queue, get_kernel_selector(device),
                                               local_size_1d(device))
    return facts


def launch_nd(queue: Any, kernel: Any, global_size: Sequence[int], local: Sequence[int],
              *args: Any) -> None:
    """:func:`netcl.core.kernels.primitives.launch` (counted), float64 scalars kept 64-bit.

    ``launch`` turns Python floats into float32, and ``np.float64`` is a float subclass, so a
    float64 scalar goes as a 0-d array, which PyOpenCL passes by its 8 bytes.
    """
    launch(queue, kernel, global_size, local,
           *(np.array(a) if isinstance(a, np.float64) else a for a in args))


def launch_items(queue: Any, kernel: Any, items: int, *args: Any) -> None:
    """Launch ``kernel`` over ``items`` work items with the device's one local size."""
    if items <= 0:
        return
    local = queue_facts(queue)[2]
    launch_nd(queue, kernel, (-(-items // local) * local,), (local,), *args)


# NOTE [ Remembered launches ]
# An op called again with tensors of the same shapes, dtypes and offsets on the same queue, under
# the same selector epoch, launches the same kernel with the same sizes and scalars: only the
# buffers differ. Such an op keeps its checked launch under a key of all of that (the queue
# object itself, so a later queue never reuses an id) and, on a hit, leases its output and
# launches through launch_values with no checks, selection or argument conversion: what
# ``_elementwise_base.run_fast`` and ``_reduce`` do for their families, here for the others
# (softmax, log_softmax, max pooling and its gradient). A key only exists after the slow path
# ran the op successfully; the released-tensor check stays (device_buffer raises). The table
# is bounded and cleared when full.


@dataclass(frozen=True)
class Remembered:
    """A launch to repeat: ``args`` with ``None`` in the buffer slots, ``outputs`` as
    ``(slot, shape, dtype)`` of each tensor it makes, ``inputs`` the slots of the tensors
    :func:`run_remembered` is given, in order."""

    kernel: Any
    grid: tuple[int, ...]
    local: tuple[int, ...] | None
    args: tuple[Any, ...]
    outputs: tuple[tuple[int, tuple[int, ...], str], ...]
    inputs: tuple[int, ...]


_remembered: dict[tuple[Any, ...], Remembered] = {}
_MAX_REMEMBERED = 4096


def launch_key(*parts: Any) -> tuple[Any, ...] | None:
    """``parts`` as a key of :func:`remembered`; ``None`` when one is unhashable (a list given
    for a kernel size, say: such calls are not remembered).

    Examples:
        >>> launch_key("op", (2, 3)), launch_key("op", [2, 3])
        (('op', (2, 3)), None)
    """
    try:
        hash(parts)
    except TypeError:
        return None
    return parts


def remembered(key: tuple[Any, ...] | None) -> Remembered | None:
    """The launch remembered under ``key`` (NOTE [ Remembered launches ])."""
    return None if key is None else _remembered.get(key)


def remember(key: tuple[Any, ...] | None, kernel: Any, grid: Sequence[int],
             local: Sequence[int] | None, args: Sequence[Any],
             outputs: Sequence[tuple[int, Tensor]], inputs: Sequence[int]) -> None:
    """Keep the launch just made of ``kernel`` with ``args`` (kernel form: what
    ``launch_values`` takes) under ``key``; ``outputs`` are the (slot, tensor) it wrote."""
    if key is None:
        return
    slots = {i for i, _ in outputs} | set(inputs)
    frozen = tuple(None if i in slots else a for i, a in enumerate(args))
    if len(_remembered) >= _MAX_REMEMBERED:
        _remembered.clear()
    _remembered[key] = Remembered(
        kernel, tuple(grid), None if local is None else tuple(local), frozen,
        tuple((i, t.shape, t.dtype) for i, t in outputs), tuple(inputs))


def run_remembered(entry: Remembered, queue: Any, *inputs: Tensor) -> list[Tensor]:
    """Repeat ``entry`` on ``inputs``, into new output tensors."""
    args = list(entry.args)
    outs = []
    for i, shape, dtype in entry.outputs:
        out = output_tensor(queue, shape, dtype)
        args[i] = device_buffer(out)
        outs.append(out)
    for i, t in zip(entry.inputs, inputs):
        args[i] = device_buffer(t)
    launch_values(queue, entry.kernel, entry.grid, entry.local, args)
    return outs


_gpus: dict[Any, bool] = {}  # device -> whether it is a GPU


def is_gpu(device: Any) -> bool:
    """Whether the OpenCL ``device`` is a GPU (its type, asked of the driver once)."""
    gpu = _gpus.get(device)
    if gpu is None:
        gpu = _gpus[device] = bool(int(device.type) & int(pyopencl().device_type.GPU))
    return gpu
