"""Helpers for tests of multi-rank code: start ranks, run ranks as threads, list segments.

:func:`start_ranks` starts a command once per rank with the environment the launcher would
give it (without the launcher, so a test can kill or signal single ranks);
:func:`run_threads` runs one function per rank on threads of this process over a
shared-memory job (cheap: no interpreter start per rank); :func:`segments` lists the
shared-memory segments present, for checking that a test left none behind.

Examples:
    >>> import numpy as np
    >>> def work(b):
    ...     x = np.full(3, b.rank + 1.0)
    ...     b.all_reduce(x, "sum")
    ...     return x.tolist()
    >>> run_threads(work, 2)
    [[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]]
"""

from __future__ import annotations

import os
import subprocess
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ._shm import ShmBackend
from ._shm_segment import PREFIX, segment_dir
from .launch import rank_env

__all__ = ["run_threads", "segments", "start_ranks"]

_T = TypeVar("_T")


def segments() -> list[str]:
    """The names of the shared-memory segments (``netcl-dist-*``) present now."""
    try:
        return sorted(n for n in os.listdir(segment_dir()) if n.startswith(PREFIX))
    except OSError:
        return []


def start_ranks(command: Sequence[str], world_size: int, job_id: str | None = None,
                env: Mapping[str, str] | None = None,
                **popen: Any) -> list[subprocess.Popen[str]]:
    """Start ``command`` once per rank (text pipes for stdout and stderr by default).

    Args:
        command: the argv of every rank (e.g. ``[sys.executable, script, "mode"]``).
        world_size: how many ranks.
        job_id: the shared-memory job id (default: a fresh one).
        env: variables added to this process's environment for every rank.
        popen: more keyword arguments for :class:`subprocess.Popen`.
    """
    job = job_id or uuid.uuid4().hex[:16]
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    popen.setdefault("text", True)
    procs = []
    for rank in range(world_size):
        rank_vars = rank_env(rank, world_size, job)
        rank_vars.update(env or {})
        procs.append(subprocess.Popen(list(command), env=rank_vars, **popen))
    return procs


def run_threads(fn: Callable[[ShmBackend], _T], world_size: int, timeout_s: float = 10.0,
                chunk_bytes: int | None = None) -> list[_T]:
    """Run ``fn(backend)`` for each rank of a ``world_size`` job on its own thread.

    Returns the results in rank order; re-raises the first rank's error (after every thread
    finished, and after each backend was closed).
    """
    job = f"threads-{uuid.uuid4().hex[:12]}"
    results: list[Any] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size

    def rank_main(rank: int) -> None:
        try:
            backend = ShmBackend(rank, world_size, job, timeout_s=timeout_s,
                                 chunk_bytes=chunk_bytes)
        except BaseException as exc:
            errors[rank] = exc
            return
        try:
            results[rank] = fn(backend)
        except BaseException as exc:
            errors[rank] = exc
        finally:
            backend.close()

    threads = [threading.Thread(target=rank_main, args=(r,), name=f"rank-{r}")
               for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for exc in errors:
        if exc is not None:
            raise exc
    return results
