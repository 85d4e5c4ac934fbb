"""What kernels split over several work-groups need to finish in one launch.

# NOTE [ Last group merges ]
# A reduction split over G work-groups (a long row, a column tile, a batch-norm channel) used
# to write G partials and reduce them in a second launch, which on an H100 cost as much device
# time as the first (a few microseconds each: the launch, not the work). Instead each group
# writes its partial, makes it visible device-wide (:data:`FENCE_DEFINES`' ``GL_FENCE``) and
# takes a ticket from a counter of its own output (an ``atomic_inc``); the group that draws the
# last ticket (G - 1) merges the G partials in index order and writes the result, then resets
# the counter to 0 for the next launch. The merge order is fixed, so the result is the same
# bits whichever group finishes last. Counters live in a buffer per queue (:func:`tickets`),
# zeroed once when made; the partials in :func:`partials` (also per queue) or in a buffer the
# caller leases. Capture/replay records both as buffers of their launches, so a replay on two
# queues orders the launches that share them.
#
# NOTE [ Device-wide fence ]
# OpenCL C 1.2 has no device-scope fence: ``mem_fence(CLK_GLOBAL_MEM_FENCE)`` orders the
# work-item's global accesses, and NVIDIA's compiler emits ``membar.cta`` for it (seen in the
# PTX of the reductions on an H200), which does not make a store visible to other SMs before
# the ticket. So on NVIDIA devices ``GL_FENCE`` is ``membar.gl`` in inline PTX; elsewhere
# ``mem_fence`` (CPU devices share one coherent memory).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netcl.core.device_profile import extended_profile
from netcl.core.recording import pyopencl

__all__ = ["fence_defines", "partials", "ptx_fence", "tickets"]

_fences: dict[Any, bool] = {}
_tickets: dict[Any, tuple[int, Any]] = {}  # queue -> (counters, buffer)
_partials: dict[Any, tuple[int, Any]] = {}  # queue -> (bytes, buffer)


def ptx_fence(device: Any) -> bool:
    """Whether ``device`` takes its device-wide fence as inline PTX (NVIDIA's driver)."""
    found = _fences.get(device)
    if found is None:
        found = _fences[device] = extended_profile(device).vendor_family == "nvidia"
    return found


def fence_defines(ptx: bool) -> str:
    """``GL_FENCE()`` for a program: ``membar.gl`` in PTX, or ``mem_fence``.

    Examples:
        >>> fence_defines(False)
        '#define GL_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)\\n'
    """
    if ptx:
        return '#define GL_FENCE() __asm__ volatile("membar.gl;" ::: "memory")\n'
    return "#define GL_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)\n"


def tickets(queue: Any, n: int) -> Any:
    """A buffer of at least ``n`` int32 ticket counters for ``queue``, all 0 between launches
    (made zeroed with one blocking write; a larger one replaces it when ``n`` grows)."""
    found = _tickets.get(queue)
    if found is None or found[0] < n:
        cl = pyopencl()
        size = max(n, 4096)
        buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * size)
        cl.enqueue_copy(queue, buf, np.zeros(size, np.int32), is_blocking=True)
        found = _tickets[queue] = (size, buf)
    return found[1]


def partials(queue: Any, nbytes: int) -> Any:
    """A scratch buffer of at least ``nbytes`` for ``queue``'s split partials."""
    found = _partials.get(queue)
    if found is None or found[0] < nbytes:
        cl = pyopencl()
        size = max(nbytes, 1 << 16)
        found = _partials[queue] = (size, cl.Buffer(queue.context, cl.mem_flags.READ_WRITE,
                                                    size))
    return found[1]
