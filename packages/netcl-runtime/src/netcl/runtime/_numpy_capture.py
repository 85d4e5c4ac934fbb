"""``capture`` on the NumPy backend: trace a step's NumPy calls twice and build the replay
plan (NOTE [ Replaying NumPy calls ] in :mod:`._numpy_graph`).

The step's own input tensors (:class:`CapturedStep` makes them) are filled with the call's
inputs before tracing, so the traced calls compute on real data (labels index in range); the
traces run no update (:mod:`._numpy_trace`), and the graph's first replay is the call's work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from netcl.core import Tensor
from netcl.core.dtypes import numpy_dtype

from ._numpy_graph import NumpyGraph
from ._numpy_trace import NumpyTrace
from .errors import InputMismatchError, UnstableStepError

__all__ = ["capture_numpy", "copy_in_numpy"]


def copy_in_numpy(name: str, i: int, given: Any, mine: Tensor) -> None:
    """Copy input ``i`` (a NumPy-backend Tensor or an array) into the graph's own ``mine``."""
    target = mine.array
    if target is None:
        raise InputMismatchError(f"{name}: input {i} is not on the NumPy backend")
    if isinstance(given, Tensor):
        if given.shape != mine.shape or given.dtype != mine.dtype:
            raise InputMismatchError(
                f"{name}: input {i} has shape {given.shape} and dtype {given.dtype}; the graph "
                f"was captured with shape {mine.shape} and dtype {mine.dtype} (capture another "
                "step for another shape)")
        source = given.array
        if source is None:
            raise InputMismatchError(f"{name}: input {i} is on an OpenCL device, the graph on "
                                     "the NumPy backend")
    elif isinstance(given, np.ndarray):
        if given.shape != mine.shape or given.dtype != numpy_dtype(mine.dtype):
            raise InputMismatchError(
                f"{name}: input {i} is an array of shape {given.shape} and dtype {given.dtype}; "
                f"the graph was captured with shape {mine.shape} and dtype {mine.dtype}")
        source = given
    else:
        raise InputMismatchError(f"{name}: input {i} is a {type(given).__name__}; the graph "
                                 "was captured with a Tensor there")
    np.copyto(target, source.reshape(target.shape))


def capture_numpy(step: Any, own_args: Any, own_kwargs: Any, values: Mapping[str, Any],
                  probes: Mapping[str, Any], pairs: int) -> tuple[NumpyGraph, Any]:
    """Trace ``step.fn`` (a :class:`netcl.runtime.CapturedStep`) on its own inputs, twice per
    attempt (up to ``pairs``), and build the graph; returns it with the second trace's
    outputs (the tensors each replay rewrites)."""
    for attempt in range(1, pairs + 1):
        first, _, first_ends = step._trace(own_args, own_kwargs, values, recorder=NumpyTrace())
        second, outputs, second_ends = step._trace(own_args, own_kwargs, probes, first.streams,
                                                   recorder=NumpyTrace())
        queue = step.inputs[0].queue if step.inputs else None
        try:
            return NumpyGraph(first, second, values, probes, [first_ends, second_ends],
                              queue), outputs
        except UnstableStepError:
            if attempt == pairs:
                raise
    raise UnstableStepError("capture: no trace pair agreed")  # pairs < 1
