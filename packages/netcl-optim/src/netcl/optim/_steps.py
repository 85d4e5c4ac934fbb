"""Step counts kept where the update kernels read them (NOTE [ Step counts on the device ] in
``_kernels.py``): :class:`StepCounts` on one device, :class:`StepRef` for one update, and
:class:`ParamState`, a parameter's state dict whose ``"step"`` is read from the counts.

Examples:
    >>> from netcl.core import manager
    >>> counts = StepCounts(manager.default("cpu").queue, 3)
    >>> counts.tick((0, 2), counts.never)
    >>> counts.tick((0,), counts.never)
    >>> counts.read().tolist()
    [2, 0, 1]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.recording import numpy_update
from netcl.core.tensor import Tensor, copy_from_host

from ._kernels import run_tick

__all__ = ["INDEX_CACHE", "STRIDE", "ParamState", "StepCounts", "StepRef", "check_found_inf"]

INDEX_CACHE = 8  # index lists kept per device: which parameters have gradients rarely changes
STRIDE = 3  # floats per parameter in StepCounts.steps: t, 1 - b1**t, 1 - b2**t


class StepCounts:
    """Per parameter of an optimizer (by its index over all groups), on ``queue``'s device:
    ``steps`` holds ``(t, 1 - b1**t, 1 - b2**t)`` (``STRIDE`` float32 each), ``hyper`` the
    ``(1 - b1, 1 - b2)`` pair the corrections are computed from; plus a zero ``never`` flag
    (the skip flag of a step nobody skips) and the index lists :meth:`tick` was given,
    uploaded once each."""

    def __init__(self, queue: Any, size: int) -> None:
        self.queue = queue
        self.steps = _persistent(Tensor.from_shape(queue, (STRIDE * size,), "float32", fill=0))
        self.hyper = _persistent(Tensor.from_shape(queue, (2 * size,), "float32", fill=0))
        self.never = _persistent(Tensor.from_shape(queue, (1,), "int32", fill=0))
        self._hyper_host: np.ndarray[Any, Any] | None = None
        self._indices: dict[tuple[int, ...], Tensor] = {}

    @property
    def size(self) -> int:
        """How many parameters have a count here."""
        return self.steps.size // STRIDE

    def set_hyper(self, pairs: np.ndarray[Any, Any]) -> None:
        """Use the ``1 - beta`` ``pairs`` (float32, two per parameter); uploaded only when
        given another array than last time (the optimizer keeps one until its betas change)."""
        if pairs is self._hyper_host:
            return
        if pairs.size != self.hyper.size:
            self.hyper = _persistent(
                Tensor.from_shape(self.queue, (pairs.size,), "float32", fill=0))
        copy_from_host(self.hyper, pairs)
        self._hyper_host = pairs

    def tick(self, indices: tuple[int, ...], skip: Tensor) -> None:
        """Add 1 to the counts at ``indices`` and compute their bias corrections, unless
        ``skip[0]`` is set (on the device: one launch, nothing read back; on the NumPy backend
        the counts only: its updates compute the corrections from them)."""
        if self.steps.array is not None:
            numpy_update(_tick_np, self.steps.array, [STRIDE * i for i in indices], skip.array)
            return
        index = self._indices.get(indices)
        if index is None:
            if len(self._indices) >= INDEX_CACHE:
                self._indices.pop(next(iter(self._indices)))
            index = _persistent(Tensor.from_host(self.queue, np.array(indices, np.int32)))
            self._indices[indices] = index
        run_tick(self.steps, self.hyper, index, skip)

    def read(self) -> np.ndarray[Any, Any]:
        """The counts as host ints (one read of the device buffer)."""
        return self.steps.to_host()[::STRIDE].astype(np.int64)

    def write(self, counts: np.ndarray[Any, Any]) -> None:
        """Overwrite every count (``counts`` has one entry per parameter, a larger size grows
        the buffer); the corrections follow at each parameter's next tick."""
        if counts.size != self.size:
            self.steps = _persistent(
                Tensor.from_shape(self.queue, (STRIDE * counts.size,), "float32", fill=0))
        host = np.zeros(STRIDE * counts.size, np.float32)
        host[::STRIDE] = counts
        copy_from_host(self.steps, host)

    def grow(self, size: int) -> None:
        """Make room for ``size`` parameters, keeping the counts there are (a host round trip:
        only after ``add_param_group``)."""
        counts = np.zeros(size, np.int64)
        counts[:self.size] = self.read()
        self.write(counts)


@dataclass(frozen=True)
class StepRef:
    """Where one update's step count is: ``steps[STRIDE * index]`` (after this step's tick),
    and the flag that makes the update a no-op."""

    steps: Tensor
    index: int
    skip: Tensor

    def count(self) -> float:
        """The count, on the NumPy backend (its kernels read it on the device)."""
        array: Any = self.steps.array
        return float(array[STRIDE * self.index])


class ParamState(dict[str, Any]):
    """A parameter's optimizer state (its tensors by name). ``state["step"]`` reads the step
    count from where the updates keep it (a host read on OpenCL: a query for outside the
    training step); iteration lists the tensors only.

    Examples:
        >>> s = ParamState(lambda: 3)
        >>> s["step"], list(s)
        (3, [])
    """

    def __init__(self, read_step: Callable[[], int]) -> None:
        super().__init__()
        self._read_step = read_step

    def __missing__(self, key: str) -> int:
        if key == "step":
            return self._read_step()
        raise KeyError(key)


def check_found_inf(op: str, found_inf: Tensor, queue: Any) -> None:
    """Raise unless ``found_inf`` is a one-element int32 flag on ``queue``'s device.

    Raises:
        TypeError: not an int32 Tensor.
        ValueError: more than one element, or on another device.
    """
    if not isinstance(found_inf, Tensor) or found_inf.dtype != "int32":
        what = found_inf.dtype if isinstance(found_inf, Tensor) else type(found_inf).__name__
        raise TypeError(f"{op}: found_inf must be an int32 Tensor, got {what}")
    if found_inf.size != 1:
        raise ValueError(f"{op}: found_inf must have one element, got shape {found_inf.shape}")
    if found_inf.queue is not queue:
        raise ValueError(f"{op}: found_inf is on another device than the parameters")


def _persistent(t: Tensor) -> Tensor:
    t.persistent = True
    return t


def _tick_np(steps: Any, at: list[int], skip: Any) -> None:
    """The NumPy tick: add 1 to the counts at ``at`` unless ``skip[0]`` is set."""
    if not skip[0]:
        steps[at] += 1
