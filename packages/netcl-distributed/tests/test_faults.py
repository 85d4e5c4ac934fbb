"""Faults end in bounded time with an error naming the rank, and leave no segment behind.

A rank that dies (SIGKILL) or hangs makes the others raise :class:`DistributedError` naming
it; the launcher stops the whole job when one rank is killed, and on SIGINT or SIGTERM; ranks
started without the launcher unlink their segment when the last one leaves, and the segments
of a job whose ranks are all dead are reclaimed. Every test checks ``/dev/shm`` afterwards.
The ranks are this file run as a script (``python test_faults.py <mode>``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import netcl.distributed as dist
from netcl.distributed import DistributedError, ShmBackend
from netcl.distributed._shm_segment import pid_alive, reclaim_dead
from netcl.distributed.testing import segments, start_ranks

HERE = Path(__file__).resolve()
ENV = {"NETCL_DEVICE": "cpu", "NETCL_DIST_TIMEOUT_S": "1.5"}
# a rank's interpreter start is slow on a loaded 2-core machine: bounds are generous
BOUND_S = 60


def _job() -> str:
    return f"test-fault-{uuid.uuid4().hex[:8]}"


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=BOUND_S)
        outs.append((p.returncode, out, err))
    return outs


def test_a_dead_rank_is_named_and_the_survivor_unlinks_the_segment() -> None:
    job = _job()
    outs = _finish(start_ranks([sys.executable, str(HERE), "dead"], 2, job_id=job, env=ENV))
    assert outs[1][0] == -signal.SIGKILL
    code, out, err = outs[0]
    assert code == 0, out + err
    assert "DistributedError: all_reduce: rank 1 (pid" in out and "died" in out, out
    assert f"netcl-dist-{job}" not in segments()


def test_a_hung_rank_is_named_after_the_timeout() -> None:
    job = _job()
    outs = _finish(start_ranks([sys.executable, str(HERE), "hung"], 2, job_id=job, env=ENV))
    code, out, err = outs[0]
    assert code == 0, out + err
    assert "barrier: did not arrive within the timeout of 1.5 s" in out, out
    assert "(rank 1; waited" in out, out
    waited = float(out.split("elapsed ")[1].split()[0])
    assert 1.5 <= waited < 10, out
    # the hung rank wakes up, finds rank 0 failed or gone, and raises too
    assert outs[1][0] == 0 and "DistributedError" in outs[1][1], outs[1]
    assert f"netcl-dist-{job}" not in segments()


def test_segments_of_a_dead_job_are_reclaimed() -> None:
    job = _job()
    outs = _finish(start_ranks([sys.executable, str(HERE), "die"], 2, job_id=job, env=ENV))
    assert [o[0] for o in outs] == [-signal.SIGKILL] * 2
    assert f"netcl-dist-{job}" in segments()  # nobody left to clean up
    b = ShmBackend(0, 1, _job(), timeout_s=1)  # joining any job reclaims dead ones
    b.close()
    assert f"netcl-dist-{job}" not in segments()


def test_ranks_started_differently_are_reported() -> None:
    job = _job()
    errors: list[BaseException] = []

    def rank(r: int) -> None:
        try:
            ShmBackend(r, 2, job, timeout_s=5, chunk_bytes=4096 * (r + 1)).close()
        except DistributedError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 2, errors
    assert "were started differently" in str(errors[0])
    assert "rank 0: world 2 slot 4096, rank 1: world 2 slot 8192" in str(errors[0])
    assert f"netcl-dist-{job}" not in segments()


def test_a_rank_that_never_joins_is_named() -> None:
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match=r"init: did not join within the timeout of "
                                               r"0.5 s .*\(rank 1; waited"):
        ShmBackend(0, 2, _job(), timeout_s=0.5)
    assert time.monotonic() - t0 < 5


def _launch(mode: str, job: str, n: int = 2) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "netcl.distributed.launch", "-n", str(n), "--job-id", job,
         "--grace", "2", str(HERE), mode],
        env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_ready(proc: subprocess.Popen[str], n: int) -> list[int]:
    """The pids the ranks print once they joined (``ready <pid>``)."""
    seen = ""
    while len(pids := re.findall(r"ready (\d+);", seen)) < n:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise AssertionError(f"launcher ended early ({proc.wait()}): {seen}")
        seen += line
    return [int(p) for p in pids]


def test_the_launcher_stops_the_job_when_a_rank_is_killed() -> None:
    job = _job()
    proc = _launch("killed", job, n=3)
    out, err = proc.communicate(timeout=BOUND_S)
    assert proc.returncode == 128 + signal.SIGKILL, out + err
    assert "rank 1 (pid" in err and "was killed by SIGKILL" in err, err
    assert f"netcl-dist-{job}" not in segments()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_launcher_stops_every_rank(sig: signal.Signals) -> None:
    job = _job()
    proc = _launch("spin", job)
    try:
        pids = _wait_ready(proc, 2)
        assert f"netcl-dist-{job}" in segments()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            proc.terminate()  # the launcher stops its ranks and unlinks the segment
            proc.wait()
    assert proc.returncode == 128 + sig, out + err
    assert f"{sig.name} received: stopping ranks" in err, err
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert f"netcl-dist-{job}" not in segments()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_ranks_die_with_a_killed_launcher_and_their_segment_is_reclaimed() -> None:
    job = _job()
    proc = _launch("spin", job)
    try:
        pids = _wait_ready(proc, 2)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + BOUND_S
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pid_alive(p) for p in pids)
    reclaim_dead()
    assert f"netcl-dist-{job}" not in segments()


# -- the rank's side -------------------------------------------------------------------------


def _rank_main(mode: str) -> None:
    pg = dist.init_process_group()
    r = pg.rank
    x = np.ones(5, np.float32)
    if mode in ("dead", "killed") and r == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hung" and r == 1:
        time.sleep(4)
    if mode == "spin":
        sys.stdout.write(f"ready {os.getpid()};\n")  # one write: ranks share the pipe
        sys.stdout.flush()
        while True:
            dist.barrier()
            time.sleep(0.01)
    t0 = time.monotonic()
    try:
        if mode == "hung":
            dist.barrier()
        else:
            dist.all_reduce(x)
            if mode == "killed":
                time.sleep(60)  # the launcher stops this rank before
    except DistributedError as exc:
        print(f"DistributedError: {exc} elapsed {time.monotonic() - t0:.2f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    _rank_main(sys.argv[1])
