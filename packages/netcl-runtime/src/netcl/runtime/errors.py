"""The errors of graph capture and replay: each names what would have made a replay wrong.

Every one is a :class:`CaptureError` (a ``RuntimeError``); an input of the wrong shape or dtype
is also a ``ValueError``, and capture on a backend that has none is also a
``NotImplementedError``, so code catching the standard types keeps working.

Examples:
    >>> err = InputMismatchError("step: input 0 has shape (3, 4), the graph was captured with "
    ...                          "(2, 4)")
    >>> isinstance(err, CaptureError), isinstance(err, ValueError)
    (True, True)
"""

from __future__ import annotations

__all__ = [
    "CaptureError",
    "CaptureUnsupportedError",
    "DeviceCheckError",
    "GraphReleasedError",
    "HostReadError",
    "InputMismatchError",
    "UnstableStepError",
]


class CaptureError(RuntimeError):
    """Base class: capturing or replaying a step would not repeat what eager execution does."""


class HostReadError(CaptureError):
    """The step reads device data on the host (``to_host``, ``float(t)``, a branch on a value)
    while it is being captured: a replay runs no Python, so it could not repeat the read or the
    decision taken on it."""


class InputMismatchError(CaptureError, ValueError):
    """A replay was given inputs unlike the captured ones: another shape, dtype, device, or a
    different non-Tensor argument (the captured work was traced for those values)."""


class UnstableStepError(CaptureError):
    """Two traces of the step differ in a way a replay cannot follow: other kernels or sizes,
    a scalar argument that changes from call to call without being a graph parameter, a buffer
    the graph does not own, or host data uploaded inside the step that changes."""


class CaptureUnsupportedError(CaptureError, NotImplementedError):
    """The step does work a capture cannot repeat (on NumPy: an array made outside the
    recording hook, named by its source line)."""


class GraphReleasedError(CaptureError):
    """The graph was released (:meth:`netcl.runtime.Graph.release`) and cannot replay."""


class DeviceCheckError(CaptureError, ValueError):
    """A device-side check (an out-of-range label, say) failed in a replay whose inputs were
    replaced before the failure was read back, so the op's own error could not name the value.
    """
