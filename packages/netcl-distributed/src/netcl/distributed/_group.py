"""The process group: which rank this process is, of how many, through which backend.

:func:`init_process_group` reads the job from environment variables (the launcher
``python -m netcl.distributed.launch -n N`` sets them) or from MPI (under ``mpiexec``), and
makes the default group that the collectives use when given ``group=None``.

Environment (set by the launcher; tests may set them by hand):

- ``NETCL_RANK``, ``NETCL_WORLD_SIZE``: this process's rank and the number of ranks;
- ``NETCL_LOCAL_RANK``, ``NETCL_LOCAL_WORLD_SIZE``: the same on this host (default: the
  global ones), used to pick a device (:func:`device_for_rank`);
- ``NETCL_DIST_ID``: the job's id, naming its shared-memory segment (shared-memory backend);
- ``NETCL_DIST_TIMEOUT_S``: how long a collective waits for the other ranks (default 300 s).

Examples:
    >>> pg = init_process_group("shm", rank=0, world_size=1)
    >>> get_rank(), get_world_size(), is_initialized(), pg.backend.name
    (0, 1, True, 'shm')
    >>> destroy_process_group()
    >>> is_initialized()
    False
"""

from __future__ import annotations

import atexit
import os
import uuid
from dataclasses import dataclass

from netcl.core.device import DeviceHandle, manager

from ._backend import Backend
from ._mpi import MPIBackend, under_mpi_env
from ._shm import ShmBackend

__all__ = ["ProcessGroup", "destroy_process_group", "device_for_rank", "get_group",
           "get_rank", "get_world_size", "init_process_group", "is_initialized"]


@dataclass(frozen=True)
class ProcessGroup:
    """The ranks of one job and the backend that moves data between them.

    Attributes:
        backend: the :class:`~netcl.distributed._backend.Backend` (``.name``: ``"shm"`` or
            ``"mpi"``).
        local_rank: this rank's index among the ranks on its host.
        local_world_size: how many ranks run on this host.
    """

    backend: Backend
    local_rank: int
    local_world_size: int

    @property
    def rank(self) -> int:
        """This process's rank, ``0 <= rank < world_size``."""
        return self.backend.rank

    @property
    def world_size(self) -> int:
        """How many ranks the job has."""
        return self.backend.world_size

    def device(self) -> DeviceHandle:
        """The device this rank should compute on (:func:`device_for_rank`)."""
        return device_for_rank(self.local_rank)


_state: list[ProcessGroup] = []


def _env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"init_process_group: {name} must be an integer, got {raw!r}") from None


def init_process_group(backend: str = "auto", rank: int | None = None,
                       world_size: int | None = None, timeout: float | None = None,
                       dist_id: str | None = None) -> ProcessGroup:
    """Join the job and make it the default group; returns it.

    Args:
        backend: ``"shm"`` (processes of one host, through shared memory), ``"mpi"`` (through
            mpi4py), or ``"auto"``: MPI under ``mpiexec``, else shared memory.
        rank, world_size: default ``NETCL_RANK`` / ``NETCL_WORLD_SIZE`` (shm; one rank of one
            where unset); MPI takes them from its communicator.
        timeout: seconds a collective waits for the others (default ``NETCL_DIST_TIMEOUT_S``
            or 300).
        dist_id: the shared-memory job id (default ``NETCL_DIST_ID``; a fresh one for a
            job of one rank).

    Raises:
        RuntimeError: a group is already initialised.
        ValueError: bad rank/world size/backend, or no job id for several shm ranks.
        DistributedError: the other ranks did not join within the timeout.
    """
    if _state:
        raise RuntimeError("init_process_group: already initialised; call "
                           "destroy_process_group() first")
    if backend not in ("auto", "shm", "mpi"):
        raise ValueError(f"init_process_group: backend must be 'auto', 'shm' or 'mpi', "
                         f"got {backend!r}")
    if backend == "mpi" or (backend == "auto" and under_mpi_env()):
        mpi = MPIBackend(timeout_s=timeout)
        group = ProcessGroup(mpi, mpi.local_rank, mpi.local_world_size)
    else:
        shm = _shm_backend(rank, world_size, timeout, dist_id)
        local_rank = _env_int("NETCL_LOCAL_RANK", shm.rank)
        local_world = _env_int("NETCL_LOCAL_WORLD_SIZE", shm.world_size)
        group = ProcessGroup(shm, int(local_rank or 0), int(local_world or 1))
    _state.append(group)
    return group


def _shm_backend(rank: int | None, world_size: int | None, timeout: float | None,
                 dist_id: str | None) -> ShmBackend:
    world = world_size if world_size is not None else _env_int("NETCL_WORLD_SIZE", 1)
    me = rank if rank is not None else _env_int("NETCL_RANK", 0)
    if world is None or me is None or world < 1 or not 0 <= me < world:
        raise ValueError(f"init_process_group: need 0 <= rank < world_size, got rank {me} "
                         f"and world_size {world}")
    job = dist_id or os.environ.get("NETCL_DIST_ID", "").strip()
    if not job:
        if world > 1:
            raise ValueError("init_process_group: several shared-memory ranks need a common "
                             "job id: set NETCL_DIST_ID (the launcher `python -m "
                             "netcl.distributed.launch -n N` does) or pass dist_id")
        job = uuid.uuid4().hex[:16]
    return ShmBackend(me, world, job, timeout_s=timeout)


def get_group(group: ProcessGroup | None = None) -> ProcessGroup:
    """``group``, or the default group.

    Raises:
        RuntimeError: ``group`` is ``None`` and :func:`init_process_group` was not called.
    """
    if group is not None:
        return group
    if not _state:
        raise RuntimeError("netcl.distributed: no process group; call "
                           "init_process_group() first")
    return _state[0]


def is_initialized() -> bool:
    """Whether a default process group exists."""
    return bool(_state)


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (default group)."""
    return get_group(group).rank


def get_world_size(group: ProcessGroup | None = None) -> int:
    """How many ranks ``group`` (default group) has."""
    return get_group(group).world_size


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Leave the job (closing its backend) and forget the default group; idempotent."""
    if group is None and not _state:
        return
    target = get_group(group)
    target.backend.close()
    if _state and _state[0] is target:
        _state.clear()


@atexit.register
def _leave_at_exit() -> None:
    # A script that never calls destroy_process_group still frees its segment.
    if _state:
        destroy_process_group()


def device_for_rank(local_rank: int) -> DeviceHandle:
    """The device local rank ``local_rank`` should use.

    Where ``NETCL_DEVICE`` is unset (or ``auto``) and the machine has several OpenCL devices
    of the best kind (e.g. several GPUs), rank ``k`` takes device ``k % count``; otherwise
    every rank shares the default device (the NumPy backend, or the one device).

    Raises:
        ValueError: ``local_rank`` is negative.

    Examples:
        >>> device_for_rank(0).backend in ("cpu", "cl")  # NumPy, or this host's OpenCL device
        True
    """
    if local_rank < 0:
        raise ValueError(f"device_for_rank: local_rank must be >= 0, got {local_rank}")
    best = manager.default("auto")
    if best is None or best.backend != "cl":
        return manager.default("cpu") or best  # type: ignore[return-value]
    if os.environ.get("NETCL_DEVICE", "auto").strip().lower() not in ("", "auto"):
        return best
    same = [h for h in manager.all_handles()
            if h.backend == "cl" and h.device_type == best.device_type]
    return same[local_rank % len(same)] if len(same) > 1 else best
