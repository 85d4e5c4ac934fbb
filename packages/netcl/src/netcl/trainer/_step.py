"""The Trainer's training step: run eagerly, or captured once and replayed
(:func:`netcl.runtime.capture`).

# NOTE [ The captured training step ]
# The whole step -- forward, backward, GradScaler, optimizer step, zero_grad, and the batch's
# hit count -- is one function, wrapped in ``capture`` (one eager warm-up call, then a trace and
# replays) on every backend: on the NumPy backend the replay repeats the step's NumPy calls
# (NOTE [ Replaying NumPy calls ] in netcl.runtime._numpy_graph).
#
# * Inputs. The graph takes the shapes of the first batch it saw; a batch of other shapes (the
#   last, partial batch of an epoch) runs the same function eagerly. Interleaving is exact: the
#   eager call updates the same parameter and optimizer-state tensors the graph reads (in
#   place), and the graph holds its own buffers so the eager call cannot lease them.
# * Learning rates. Each param group's ``lr`` is a graph parameter, so a scheduler changes it
#   without a new capture. Groups whose rates are equal share one parameter (the capture finds a
#   parameter's kernel arguments by probing its value; two parameters with one value could not
#   be told apart), and the grouping and every other hyperparameter (momentum, betas, weight
#   decay) are compared before each replay: when they changed, the graph is released and the
#   step captured again (what it bakes in must match what eager execution would use).
# * Failure. A step capture cannot repeat (a host read such as a GradScaler's inf check, a
#   host-side counter such as Adam's bias correction before it moved to the device) raises a
#   CaptureError while tracing. Tracing runs no device work, but the step's Python state has
#   advanced (optimizer step counts, scaler stages, gradients set to never-computed tensors): it
#   is put back as it was before the attempt, the Trainer warns once, and that batch and every
#   later one run eagerly -- the results are those of an eager run.
# * Outputs. A replay returns the same loss and hit tensors each time, overwritten by the next
#   replay: the Trainer copies them into its device-side tally (:class:`ScalarTally`) at once.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import netcl.ops as ops
from netcl.core.recording import pyopencl
from netcl.core.tensor import Tensor
from netcl.runtime import CapturedStep, CaptureError, Param, capture

__all__ = ["ScalarTally", "TrainStep", "hits"]

StepFn = Callable[[Tensor, Tensor], tuple[Tensor, ...]]
_NOT_HYPER = ("params", "lr")  # group entries that are not baked into a graph


def hits(logits: Tensor, labels: Tensor) -> Tensor:
    """How many rows' argmax equals the label, as a device scalar (no host read)."""
    same = ops.eq(ops.argmax(logits, axis=1), labels)
    return ops.sum(ops.cast(same, "int32"))


class TrainStep:
    """``fn(x, y)`` run eagerly, or captured when ``capture``.

    ``fn`` is the complete step and returns device tensors; a replay returns the same tensors
    each call (copy them before the next). ``optimizer`` and ``scaler`` are the state ``fn``
    advances: their learning rates become graph parameters and their host state is put back
    when a capture fails (NOTE [ The captured training step ]).
    """

    def __init__(self, fn: StepFn, optimizer: Any, scaler: Any, capture: bool = True) -> None:
        self.fn, self.optimizer, self.scaler = fn, optimizer, scaler
        self.enabled = capture
        self.graph_step: CapturedStep | None = None
        self.failure: CaptureError | None = None
        self._inputs: tuple[tuple[tuple[int, ...], str], ...] | None = None
        self._signature: Any = None

    @property
    def mode(self) -> str:
        """``"eager"``, ``"pending"`` (warming up) or ``"graph"`` (replaying)."""
        if self.graph_step is None:
            return "pending" if self.enabled else "eager"
        return self.graph_step.mode

    def __call__(self, x: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        if not self.enabled:
            return self.fn(x, y)
        inputs = ((x.shape, x.dtype), (y.shape, y.dtype))
        if self._inputs is None:
            self._inputs = inputs
        if inputs != self._inputs:  # e.g. the last, partial batch
            return self.fn(x, y)
        signature = self._group_signature()
        step = self.graph_step
        if step is None or signature != self._signature:
            if step is not None:
                step.release()
            step = self.graph_step = capture(self.fn, params=self._lr_params(), warmup=1)
            self._signature = signature
        if step.mode == "graph" or step.calls < step.warmup:
            return tuple(step(x, y))
        saved = self._save()
        try:
            return tuple(step(x, y))
        except CaptureError as err:
            self._restore(saved)
            self._give_up(err)
            return self.fn(x, y)

    def sync(self) -> None:
        """Raise a failed device-side check of the replays so far (e.g. a label out of
        range: a replay raises it one call late, or here)."""
        if self.graph_step is not None and self.graph_step.mode == "graph":
            self.graph_step.sync()

    def release(self) -> None:
        """Let go of the graph (its buffers return to their pools)."""
        if self.graph_step is not None:
            self.graph_step.release()
        self.graph_step = None

    # -- learning rates and hyperparameters ---------------------------------------------------

    def _clusters(self) -> list[list[int]]:
        """Param-group indices grouped by equal learning rate, in first-seen order."""
        clusters: dict[Any, list[int]] = {}
        for i, group in enumerate(self.optimizer.param_groups):
            clusters.setdefault(float(group["lr"]), []).append(i)
        return list(clusters.values())

    def _lr_params(self) -> dict[str, Param]:
        groups = self.optimizer.param_groups
        params = {}
        for members in self._clusters():
            def get(first: int = members[0]) -> Any:
                return groups[first]["lr"]

            def set_(value: Any, members: list[int] = members) -> None:
                for i in members:
                    groups[i]["lr"] = value

            params[f"lr{members[0]}"] = Param(get, set_)
        return params

    def _group_signature(self) -> Any:
        """What a graph bakes in of the param groups: which rates are equal and every other
        hyperparameter."""
        hyper = [[(k, v) for k, v in g.items() if k not in _NOT_HYPER]
                 for g in self.optimizer.param_groups]
        return self._clusters(), hyper

    # -- a capture that failed ----------------------------------------------------------------

    def _save(self) -> tuple[dict[int, dict[str, Any]], dict[str, Any] | None]:
        state = {i: dict(s) for i, s in self.optimizer.state.items()}
        scaler = self.scaler.state_dict() if self.scaler.is_enabled() else None
        return state, scaler

    def _restore(self, saved: tuple[dict[int, dict[str, Any]], dict[str, Any] | None]) -> None:
        state, scaler = saved
        current = self.optimizer.state
        for i in [i for i in current if i not in state]:
            del current[i]  # created while tracing: its tensors were never computed
        for i, entries in state.items():
            current.setdefault(i, {}).clear()
            current[i].update(entries)
        self.optimizer.zero_grad()  # gradients the trace left were never computed either
        if scaler is not None:
            self.scaler.load_state_dict(scaler)
            self.scaler.update(self.scaler.get_scale())  # every optimizer's stage back to ready

    def _give_up(self, err: CaptureError) -> None:
        self.failure = err
        self.enabled = False
        if self.graph_step is not None:
            self.graph_step.release()
        self.graph_step = None
        warnings.warn(f"Trainer: the training step cannot be captured, so it runs eagerly "
                      f"(results are the same, each step costs more host time): {err}",
                      RuntimeWarning, stacklevel=4)


class ScalarTally:
    """Device scalars (each step's loss and hit count) copied into device vectors of
    ``capacity`` slots and read back together: no host read and no allocation per step.

    Examples:
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> tally = ScalarTally(4)
        >>> for v in (1.5, 2.5):
        ...     tally.put(Tensor.from_host(q, v), Tensor.from_host(q, np.array(3)))
        >>> [c.tolist() for c in tally.read()]
        [[1.5, 2.5], [3, 3]]
        >>> len(tally)
        0
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._columns: list[Any] = []  # a Tensor (OpenCL) or an ndarray (NumPy) per column
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def put(self, *scalars: Tensor) -> None:
        """Copy one value of each column (device scalars; copied on their queue).

        Raises:
            ValueError: the tally is full, the number of columns changed, or a value is not
                one element.
        """
        if self._count >= self.capacity:
            raise ValueError(f"ScalarTally.put: all {self.capacity} slots are used; read() "
                             "first")
        if not self._columns:
            self._columns = [self._column(s) for s in scalars]
        if len(scalars) != len(self._columns):
            raise ValueError(f"ScalarTally.put: {len(scalars)} values, the tally has "
                             f"{len(self._columns)} columns")
        for column, scalar in zip(self._columns, scalars):
            if scalar.size != 1:
                raise ValueError(f"ScalarTally.put: values must have one element, got shape "
                                 f"{scalar.shape}")
            self._copy(column, scalar)
        self._count += 1

    def _column(self, scalar: Tensor) -> Any:
        if scalar.backend != "cl":
            return np.zeros(self.capacity, scalar.to_host().dtype)
        column = Tensor.from_shape(scalar.queue, (self.capacity,), scalar.dtype, fill=None)
        column.persistent = True
        return column

    def _copy(self, column: Any, scalar: Tensor) -> None:
        if isinstance(column, np.ndarray):
            column[self._count] = scalar.to_host().reshape(-1)[0]  # NumPy: no device, no transfer
            return
        if scalar.dtype != column.dtype:
            raise ValueError(f"ScalarTally.put: a {scalar.dtype} value for a {column.dtype} "
                             "column")
        size = column.nbytes // self.capacity
        pyopencl().enqueue_copy(scalar.queue, column.buffer, scalar.buffer, byte_count=size,
                                src_offset=scalar.offset * size, dst_offset=self._count * size)

    def read(self) -> list[np.ndarray[Any, Any]]:
        """Each column's values so far (one transfer per column); empties the tally."""
        count, self._count = self._count, 0
        return [np.array((c if isinstance(c, np.ndarray) else c.to_host())[:count])
                for c in self._columns] if count else []
