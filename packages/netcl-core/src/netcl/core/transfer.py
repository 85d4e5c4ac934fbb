"""Copies between tensors and host arrays that already exist: no new array per call and no
wait on OpenCL, for callers that stage data every step (netcl-distributed's gradient buckets).
:meth:`Tensor.to_host` and :func:`~netcl.core.tensor.copy_from_host` make or take a fresh
array and block; these start the copy and return its event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ._cl import cl
from .dtypes import numpy_dtype
from .recording import state as recording_state
from .tensor import Tensor, copy_from_host

__all__ = ["download_into", "upload_from", "wait_events"]


def _check_staging(op: str, t: Tensor, host: np.ndarray[Any, Any]) -> None:
    if host.dtype != numpy_dtype(t.dtype) or host.size != t.size \
            or not host.flags.c_contiguous:
        raise ValueError(f"{op}: the host array must be C-contiguous with the tensor's dtype and "
                         f"size, got {host.dtype} of shape {host.shape} (contiguous: "
                         f"{host.flags.c_contiguous}) for a {t.dtype} tensor of shape {t.shape}")


def download_into(t: Tensor, out: np.ndarray[Any, Any]) -> Any:
    """Start copying ``t``'s data into the existing host array ``out`` (C-contiguous, ``t``'s
    dtype and number of elements, any shape): no new array, no wait on OpenCL. Returns the
    event to pass to :func:`wait_events` before reading ``out`` (``None`` when already done:
    the NumPy backend, empty tensors, or a capture recording, where it reads as ``to_host``).

    Raises:
        ValueError: ``out`` of another dtype or size, or not C-contiguous.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> t = Tensor.from_host(manager.default("cpu").queue, [1.0, 2.0, 3.0])
        >>> out = np.zeros(4, np.float32)
        >>> wait_events([download_into(t, out[1:])]); out.tolist()
        [0.0, 1.0, 2.0, 3.0]
    """
    _check_staging("download_into", t, out)
    if recording_state.recorder is not None:  # the recorder sees (or refuses) the read
        np.copyto(out, t.to_host().reshape(out.shape))
        return None
    t.wait()
    if t.array is not None:
        np.copyto(out, t.array.reshape(out.shape))
        return None
    if not t.size:
        return None
    return cl().enqueue_copy(t.queue, out, t.buffer, src_offset=t.offset * out.itemsize,
                             is_blocking=False)


def upload_from(t: Tensor, src: np.ndarray[Any, Any]) -> Any:
    """Start copying the host array ``src`` (C-contiguous, ``t``'s dtype and number of
    elements) into ``t`` in place, without waiting on OpenCL; ``src`` must not change until
    the returned event (``None`` when already done) has completed (:func:`wait_events`).

    Raises:
        ValueError: ``src`` of another dtype or size, or not C-contiguous.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> t = Tensor.from_shape(manager.default("cpu").queue, (2,))
        >>> wait_events([upload_from(t, np.array([5.0, 6.0], np.float32))])
        >>> t.to_host().tolist()
        [5.0, 6.0]
    """
    _check_staging("upload_from", t, src)
    if recording_state.recorder is not None:  # the recorder sees the upload
        copy_from_host(t, src.reshape(t.shape))
        return None
    t.wait()
    if t.array is not None:
        np.copyto(t.array, src.reshape(t.array.shape))
        return None
    if not t.size:
        return None
    return cl().enqueue_copy(t.queue, t.buffer, src, dst_offset=t.offset * src.itemsize,
                             is_blocking=False)


def wait_events(events: Iterable[Any]) -> None:
    """Block until every event of :func:`download_into`/:func:`upload_from` has completed
    (``None`` entries are skipped)."""
    pending = [e for e in events if e is not None]
    if pending:
        cl().wait_for_events(pending)
