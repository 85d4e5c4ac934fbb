"""Device-side checks of a replay graph (:func:`netcl.core.recording.check_flag`), read back
without stalling the host.

# NOTE [ Checks one replay late ]
# A check's flag is read back by a non-blocking copy enqueued where the step set it. The next
# call looks at the reads that have completed and does not wait for the others, unless more
# than MAX_PENDING replays are still unread (then it waits for the oldest): waiting at every
# call for the previous step made the host wait for the device (PoCL, digits CNN: 57 ms of
# host time per replay with the wait, 1.2 ms without). A failed flag found before any later
# replay overwrote the inputs calls the check's own ``fail`` (the op's error, naming the bad
# value); one found later raises DeviceCheckError, which says how many calls ago it failed.
# A replay polls again after its call copied the new inputs in (a read may complete between
# the call's first look and its copies): what that poll finds is a DeviceCheckError too, since
# ``fail`` would read the new inputs and name a value that is not the bad one.
# ``CapturedStep.sync()`` waits for everything and checks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from netcl.core.recording import pyopencl

from .errors import DeviceCheckError

__all__ = ["MAX_PENDING", "DeviceChecks"]

#: Replays whose check reads may be outstanding before the next call waits for the oldest.
MAX_PENDING = 2

_Read = tuple[Any, np.ndarray[Any, Any], Callable[[], None]]


class DeviceChecks:
    """The checks of one graph: ``fails[i]`` raises for check ``i``."""

    def __init__(self) -> None:
        self.fails: list[Callable[[], None]] = []
        self._current: list[_Read] = []
        self._pending: deque[tuple[int, list[_Read]]] = deque()
        self._replays = 0

    def read(self, queue: Any, index: int, buffer: Any) -> None:
        """Enqueue the read of check ``index``'s flag (a replay step)."""
        host = np.zeros(1, np.int32)
        event = pyopencl().enqueue_copy(queue, host, buffer, is_blocking=False)
        self._current.append((event, host, self.fails[index]))

    def end_replay(self) -> None:
        """Close the reads the replay just enqueued."""
        if self._current:
            self._pending.append((self._replays, self._current))
            self._current = []
        self._replays += 1

    def poll(self, block: bool, inputs_replaced: bool = False) -> None:
        """Check the completed reads (all of them, waiting, with ``block``); raise the first
        failure (see NOTE [ Checks one replay late ]). ``inputs_replaced``: the step's inputs
        may have changed since the last replay, so no failure can name its value."""
        complete = pyopencl().command_execution_status.COMPLETE
        while self._pending:
            replay, reads = self._pending[0]
            done = all(event.command_execution_status == complete for event, _, _ in reads)
            if not (block or done or len(self._pending) > MAX_PENDING):
                return
            for event, _, _ in reads:
                event.wait()
            self._pending.popleft()
            failed = [fail for _, host, fail in reads if host[0]]
            if failed:
                self._pending.clear()
                self._raise(failed[0], self._replays - 1 - replay, inputs_replaced)

    def _raise(self, fail: Callable[[], None], later: int, inputs_replaced: bool) -> None:
        if later == 0 and not inputs_replaced:
            fail()  # the step's inputs are still the ones that failed: the op's own error
        raise DeviceCheckError(
            f"a device-side check failed in the replay {later + 1} call(s) ago (its inputs "
            "were replaced since, so the value cannot be named: call step.sync() after each "
            f"call to find it); the check: {getattr(fail, '__qualname__', fail)}"
        )
