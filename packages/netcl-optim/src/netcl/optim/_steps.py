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

from netcl.core.tensor import Tensor, copy_from_host

from ._kernels import run_tick

__all__ = ["INDEX_CACHE", "ParamState", "StepCounts", "StepRef", "check_found_inf"]

INDEX_CACHE = 8  # index lists kept per device: which parameters have gradients rarely changes


class StepCounts:
    """One float32 count per parameter of an optimizer (by its index over all groups) on
    ``queue``'s device, a zero ``never`` flag (the skip flag of a step nobody skips), and the
    index lists :meth:`tick` was given, uploaded once each."""

    def __init__(self, queue: Any, size: int) -> None:
        self.queue = queue
        self.steps = _persistent(Tensor.from_shape(queue, (size,), "float32", fill=0))
        self.never = _persistent(Tensor.from_shape(queue, (1,), "int32", fill=0))
        self._indices: dict[tuple[int, ...], Tensor] = {}

    @property
    def size(self) -> int:
        """How many parameters have a count here."""
        return self.steps.size

    def tick(self, indices: tuple[int, ...], skip: Tensor) -> None:
        """Add 1 to the counts at ``indices`` unless ``skip[0]`` is set (on the device: one
        launch, nothing read back)."""
        if self.steps.array is not None:
            flag: Any = skip.array
            if not flag[0]:
                self.steps.array[list(indices)] += 1
            return
        index = self._indices.get(indices)
        if index is None:
            if len(self._indices) >= INDEX_CACHE:
                self._indices.pop(next(iter(self._indices)))
            index = _persistent(Tensor.from_host(self.queue, np.array(indices, np.int32)))
            self._indices[indices] = index
        run_tick(self.steps, index, skip)

    def read(self) -> np.ndarray[Any, Any]:
        """The counts as host ints (one read of the device buffer)."""
        return self.steps.to_host().astype(np.int64)

    def write(self, counts: np.ndarray[Any, Any]) -> None:
        """Overwrite every count (``counts`` has one entry per parameter, a larger size grows
        the buffer)."""
        if counts.size != self.size:
            self.steps = _persistent(
                Tensor.from_shape(self.queue, (counts.size,), "float32", fill=0))
        copy_from_host(self.steps, counts.astype(np.float32))

    def grow(self, size: int) -> None:
        """Make room for ``size`` parameters, keeping the counts there are (a host round trip:
        only after ``add_param_group``)."""
        counts = np.zeros(size, np.int64)
        counts[:self.size] = self.read()
        self.write(counts)


@dataclass(frozen=True)
class StepRef:
    """Where one update's step count is: ``steps[index]`` (after this step's tick), and the
    flag that makes the update a no-op."""

    steps: Tensor
    index: int
    skip: Tensor

    def count(self) -> float:
        """The count, on the NumPy backend (its kernels read it on the device)."""
        array: Any = self.steps.array
        return float(array[self.index])


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
