"""The local size of a ``BuiltKernel.run`` launch, and the autotuner that may choose it.

# NOTE [ Local sizes of custom kernels ]
# A kernel that uses work-group features (``__local`` memory, ``barrier``, ``get_local_id``,
# ``get_group_id``, ...) may compute something else with another local size: a tiled matmul
# with 16x16 ``__local`` tiles is only right with 16x16 work-groups. Before this rule the
# autotuner tried ``None`` (the driver's choice) and (16, 8) for such a kernel and returned
# wrong products in 5 of 6 runs. So the size comes, in order, from: the caller's
# ``local_size``; the kernel's ``reqd_work_group_size`` attribute (read back from the built
# kernel, so macros in it are resolved); the spec's ``workgroup_size``. A kernel with
# work-group features and none of those is an error, never a guess. Only kernels without them
# are autotuned (``tune=True``) or left to the default, and for those every local size gives
# the same result by construction: tuning changes speed, never the answer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._cl import cl

__all__ = ["DEFAULT_LOCAL", "autotune", "kernel_local_limits", "pick_local", "size_tuple"]

DEFAULT_LOCAL = 64
_TUNE = "tune"


def size_tuple(kernel: str, what: str, value: Any, minimum: int) -> tuple[int, ...]:
    """``value`` (an int or a sequence of 1 to 3 ints >= ``minimum``) as a tuple.

    Examples:
        >>> size_tuple("k", "global_size", 8, 0), size_tuple("k", "local_size", (16, 16), 1)
        ((8,), (16, 16))
    """
    if type(value) is tuple and 1 <= len(value) <= 3:  # the hot path: checked cheaply
        for s in value:
            if type(s) is not int or s < minimum:
                break
        else:
            return value
    sizes = (value,) if isinstance(value, (int, np.integer)) else value
    try:
        out = tuple(sizes)
    except TypeError:
        raise TypeError(f"kernel {kernel!r}: {what} must be an int or a sequence of ints, "
                        f"got {value!r}") from None
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in out):
        raise TypeError(f"kernel {kernel!r}: {what} must hold ints, got {value!r}")
    if not 1 <= len(out) <= 3 or any(s < minimum for s in out):
        raise ValueError(f"kernel {kernel!r}: {what} must have 1 to 3 dimensions, each "
                         f">= {minimum}, got {value!r}")
    return tuple(int(s) for s in out)


def kernel_local_limits(kernel: Any, device: Any) -> tuple[tuple[int, ...] | None, int]:
    """The kernel's ``reqd_work_group_size`` (``None`` without one) and its largest local size
    on ``device`` (registers and local memory may make it smaller than the device's)."""
    info = cl().kernel_work_group_info
    try:
        required = tuple(int(v) for v in
                         kernel.get_work_group_info(info.COMPILE_WORK_GROUP_SIZE, device))
    except Exception:  # a driver without the query
        required = ()
    try:
        largest = int(kernel.get_work_group_info(info.WORK_GROUP_SIZE, device))
    except Exception:
        largest = int(device.max_work_group_size)
    return (required if any(required) else None), largest


def _required_for(kernel: str, required: tuple[int, ...], dims: int) -> tuple[int, ...]:
    if any(r != 1 for r in required[dims:]):
        raise ValueError(
            f"kernel {kernel!r} declares reqd_work_group_size{tuple(required)} but is launched "
            f"over {dims} dimension(s)")
    return tuple(required[:dims])


def pick_local(
    kernel: str,
    gsize: tuple[int, ...],
    given: tuple[int, ...] | None,
    required: tuple[int, ...] | None,
    fixed: int | Sequence[int] | None,
    features: Sequence[str],
    tune: bool,
) -> tuple[int, ...] | str | None:
    """The local size for a launch over ``gsize``, ``None`` for the driver's choice, or
    ``"tune"`` when the autotuner should choose (see NOTE [ Local sizes of custom kernels ]).

    Args:
        kernel: the kernel's name, for errors.
        gsize: the global size.
        given: the caller's ``local_size``.
        required: the kernel's ``reqd_work_group_size``.
        fixed: the spec's ``workgroup_size``.
        features: the work-group features the source uses (empty: any local size is right).
        tune: the spec's ``tune``.

    Raises:
        ValueError: the local size contradicts the kernel's attribute, does not divide the
            global size where the kernel needs it to, or cannot be known.

    Examples:
        >>> pick_local("k", (64, 64), None, (16, 16, 1), None, ("__local",), True)
        (16, 16)
        >>> pick_local("k", (1000,), None, None, None, (), False) is None
        True
    """
    dims = len(gsize)
    if given is not None:
        if len(given) != dims:
            raise ValueError(f"kernel {kernel!r}: local_size {given} and global_size {gsize} "
                             "have different numbers of dimensions")
        if required is not None and given != _required_for(kernel, required, dims):
            raise ValueError(f"kernel {kernel!r} declares reqd_work_group_size{required}; "
                             f"local_size {given} differs (pass None to use it)")
        return given
    if required is not None:
        local = _required_for(kernel, required, dims)
        _check_divides(kernel, gsize, local, "its reqd_work_group_size")
        return local
    if fixed is not None:
        local = (fixed,) if isinstance(fixed, int) else tuple(fixed)
        if len(local) == dims and all(g % c == 0 for g, c in zip(gsize, local)):
            return local
        if features:
            _check_divides(kernel, gsize, local, "KernelSpec.workgroup_size")
        return None  # any local size gives this kernel the same result
    if features:
        raise ValueError(
            f"kernel {kernel!r}: its source uses {', '.join(features)}, so its result can "
            "depend on the local size, and netcl will not guess or autotune it: pass local_size "
            "to run(), "
            "set KernelSpec.workgroup_size, or declare "
            "__attribute__((reqd_work_group_size(X, Y, Z))) on the kernel")
    if tune:
        return _TUNE
    return (DEFAULT_LOCAL,) if dims == 1 and gsize[0] % DEFAULT_LOCAL == 0 else None


def _check_divides(kernel: str, gsize: tuple[int, ...], local: tuple[int, ...],
                   source: str) -> None:
    if len(local) != len(gsize) or any(g % c for g, c in zip(gsize, local)):
        raise ValueError(
            f"kernel {kernel!r}: global_size {gsize} does not fit the local size {local} "
            f"from {source} (same number of dimensions, a multiple in each); round the global "
            "size up (and guard the tail in the kernel) or pass local_size")


def _candidates(gsize: tuple[int, ...], largest: int,
                item_sizes: Sequence[int]) -> list[tuple[int, ...] | None]:
    if len(gsize) == 1:
        sizes: list[tuple[int, ...]] = [(s,) for s in (32, 64, 128, 256, 512)]
    else:
        sizes = [(8, 8), (16, 16), (8, 32), (32, 8), (16, 8)]
        sizes = [s + (1,) * (len(gsize) - 2) for s in sizes]
    ok: list[tuple[int, ...] | None] = [
        s for s in sizes
        if math.prod(s) <= largest
        and all(g % c == 0 and c <= m for g, c, m in zip(gsize, s, item_sizes))
    ]
    return [*ok, None]


def _scratch_copy(queue: Any, value: Any) -> Any:
    """A device-side copy of a buffer argument (other arguments pass through)."""
    if isinstance(value, cl().Buffer):
        copy = cl().Buffer(queue.context, cl().mem_flags.READ_WRITE, value.size)
        cl().enqueue_copy(queue, copy, value, byte_count=value.size)
        return copy
    return value


def autotune(queue: Any, kernel: Any, gsize: tuple[int, ...], values: Sequence[Any],
             largest: int) -> tuple[int, ...] | None:
    """The fastest candidate local size for ``kernel`` over ``gsize`` (``None``: the driver's).

    ``values`` are the arguments in kernel form (buffers, not Tensors). Each candidate runs
    twice on scratch copies of the buffer arguments (so an in-place kernel is not applied to
    the caller's data); only kernels whose result does not depend on the local size come here
    (see :func:`pick_local`).
    """
    item_sizes = [int(s) for s in queue.device.max_work_item_sizes]
    candidates = _candidates(gsize, largest, item_sizes)
    if len(candidates) == 1:
        return None
    scratch = [_scratch_copy(queue, v) for v in values]
    best: tuple[float, tuple[int, ...] | None] = (math.inf, None)
    for cand in candidates:
        try:
            kernel.set_args(*scratch)
            cl().enqueue_nd_range_kernel(queue, kernel, gsize, cand)
            queue.finish()
            start = time.perf_counter()
            cl().enqueue_nd_range_kernel(queue, kernel, gsize, cand)
            queue.finish()
            elapsed = time.perf_counter() - start
        except Exception:
            continue  # the device rejects this local size for this kernel
        if elapsed < best[0]:
            best = (elapsed, cand)
    return best[1]
