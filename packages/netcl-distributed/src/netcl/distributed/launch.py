"""``python -m netcl.distributed.launch -n N script.py args...``: run N ranks on this host.

Each rank is ``python script.py args...`` (or ``python -m module args...``) with
``NETCL_RANK``, ``NETCL_WORLD_SIZE``, ``NETCL_LOCAL_RANK``, ``NETCL_LOCAL_WORLD_SIZE`` and
``NETCL_DIST_ID`` set, so that ``netcl.distributed.init_process_group()`` joins the job.
The ranks write to the launcher's stdout and stderr.

When a rank exits with a non-zero code or is killed, the launcher stops the others (SIGTERM,
then SIGKILL after ``--grace`` seconds) and exits non-zero naming the rank; SIGINT or SIGTERM
to the launcher stops every rank the same way. On every exit path it unlinks the job's
shared-memory segment. If the launcher itself is killed (SIGKILL), its ranks get SIGTERM
(Linux) and the next job started on this host reclaims the segment.

Examples:
    >>> main(["-n", "2", "-c", "import os; assert os.environ['NETCL_WORLD_SIZE'] == '2'"])
    0
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from types import FrameType

from ._shm_segment import segment_path

__all__ = ["main", "rank_env"]

_POLL_S = 0.05
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# looked up here, not in the forked child (which should do as little as possible before exec)
_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None


class _StopRequestedError(Exception):
    """The launcher was asked to stop (SIGINT, SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def rank_env(rank: int, world_size: int, job_id: str,
             base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of rank ``rank`` of a ``world_size``-rank job on one host.

    Examples:
        >>> env = rank_env(1, 2, "job", base={})
        >>> env["NETCL_RANK"], env["NETCL_WORLD_SIZE"], env["NETCL_DIST_ID"]
        ('1', '2', 'job')
    """
    env = dict(os.environ if base is None else base)
    env.update(NETCL_RANK=str(rank), NETCL_WORLD_SIZE=str(world_size),
               NETCL_LOCAL_RANK=str(rank), NETCL_LOCAL_WORLD_SIZE=str(world_size),
               NETCL_DIST_ID=job_id)
    return env


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m netcl.distributed.launch",
        description="Run N ranks of a script on this host (shared-memory backend).")
    p.add_argument("-n", "--nprocs", type=int, required=True, help="number of ranks")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a collective waits for the other ranks "
                        "(sets NETCL_DIST_TIMEOUT_S; default 300)")
    p.add_argument("--job-id", default=None,
                   help="the job's id (names its shared-memory segment; default: random)")
    p.add_argument("--grace", type=float, default=5.0,
                   help="seconds the other ranks get after SIGTERM before SIGKILL")
    what = p.add_mutually_exclusive_group()
    what.add_argument("-m", dest="module", action="store_true",
                      help="the target is a module, run as `python -m target`")
    what.add_argument("-c", dest="code", action="store_true",
                      help="the target is a program string, run as `python -c target`")
    p.add_argument("target", help="the script each rank runs (or module, or program)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; returns the exit code (0 when every rank exited 0)."""
    args = _parser().parse_args(argv)
    if args.nprocs < 1:
        print(f"netcl.distributed.launch: -n must be >= 1, got {args.nprocs}", file=sys.stderr)
        return 2
    flag = ["-m"] if args.module else ["-c"] if args.code else []
    command = [sys.executable, *flag, args.target, *args.args]
    job = args.job_id or uuid.uuid4().hex[:16]
    segment_path(job)  # a bad id fails here, before any rank starts
    extra = {} if args.timeout is None else {"NETCL_DIST_TIMEOUT_S": str(args.timeout)}
    previous = {s: signal.signal(s, _raise_stopped) for s in (signal.SIGINT, signal.SIGTERM)}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for rank in range(args.nprocs):
            env = rank_env(rank, args.nprocs, job)
            env.update(extra)
            procs.append(subprocess.Popen(command, env=env, preexec_fn=_die_with_launcher))
        return _watch(procs)
    except _StopRequestedError as stop:
        _say(f"{stop} received: stopping ranks "
             f"{', '.join(str(r) for r, p in enumerate(procs) if p.poll() is None) or '(none)'}")
        return 128 + stop.signum
    finally:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        _stop(procs, args.grace)
        _unlink(job)
        for s, handler in previous.items():
            signal.signal(s, handler)


def _die_with_launcher() -> None:
    """In a rank, before it runs (Linux): get SIGTERM if the launcher dies, even by SIGKILL,
    instead of running on as an orphan (the next job reclaims the segment)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGTERM))


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise _StopRequestedError(signum)


def _watch(procs: list[subprocess.Popen[bytes]]) -> int:
    """Wait for the ranks; at the first failure return its exit code (others still run)."""
    while True:
        codes = [p.poll() for p in procs]
        failed = [r for r, c in enumerate(codes) if c]
        if failed:
            # A rank killed by a signal is the likelier cause: the others may have exited
            # with a DistributedError about it within the same poll.
            first = next((r for r in failed if (codes[r] or 0) < 0), failed[0])
            code = codes[first] or 1
            others = [str(r) for r, c in enumerate(codes) if c is None]
            also = "".join(f"; rank {r} {_how(codes[r] or 1)}" for r in failed if r != first)
            _say(f"rank {first} (pid {procs[first].pid}) {_how(code)}{also}; stopping ranks "
                 f"{', '.join(others) or '(none left)'}")
            return code if code > 0 else 128 - code
        if all(c == 0 for c in codes):
            return 0
        time.sleep(_POLL_S)


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _stop(procs: list[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM every rank still running, SIGKILL those still there after ``grace`` s."""
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        p.terminate()
    deadline = time.monotonic() + grace
    for p in alive:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _unlink(job: str) -> None:
    try:
        os.unlink(segment_path(job))
    except FileNotFoundError:
        pass


def _say(message: str) -> None:
    print(f"netcl.distributed.launch: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
