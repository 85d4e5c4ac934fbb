"""The launcher: the ranks' environment, arguments, exit codes and messages (the faults it
handles, a killed rank and signals, are in test_faults.py)."""

from __future__ import annotations

import pytest

from netcl.distributed.launch import main, rank_env
from netcl.distributed.testing import segments

CHECK_ENV = (
    "import os, sys; e = os.environ; r = int(e['NETCL_RANK']); "
    "assert e['NETCL_WORLD_SIZE'] == '3' and e['NETCL_LOCAL_RANK'] == str(r), dict(e); "
    "assert e['NETCL_LOCAL_WORLD_SIZE'] == '3' and e['NETCL_DIST_ID'] == 'launch-t1'; "
    "assert e['NETCL_DIST_TIMEOUT_S'] == '9.0' and sys.argv[1:] == ['a', '-n', 'b'], sys.argv"
)


def test_every_rank_gets_its_environment_and_the_arguments() -> None:
    assert main(["-n", "3", "--timeout", "9", "--job-id", "launch-t1", "-c", CHECK_ENV,
                 "a", "-n", "b"]) == 0
    assert "netcl-dist-launch-t1" not in segments()


def test_a_failing_rank_fails_the_job_and_is_named(capfd: pytest.CaptureFixture[str]) -> None:
    code = main(["-n", "2", "-c",
                 "import os, sys, time; r = os.environ['NETCL_RANK']; "
                 "sys.exit(5) if r == '1' else time.sleep(30)"])
    assert code == 5
    err = capfd.readouterr().err
    assert "netcl.distributed.launch: rank 1 (pid" in err
    assert "exited with code 5; stopping ranks 0" in err


def test_a_module_runs_with_dash_m(capfd: pytest.CaptureFixture[str]) -> None:
    code = main(["-n", "2", "-m", "platform"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert len(out.strip().splitlines()) == 2, (out, err)


def test_bad_arguments(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["-n", "0", "-c", "pass"]) == 2
    assert "-n must be >= 1, got 0" in capfd.readouterr().err
    with pytest.raises(ValueError, match="job id must be"):
        main(["-n", "1", "--job-id", "a/b", "-c", "pass"])
    with pytest.raises(SystemExit):
        main(["-n", "2"])


def test_rank_env_leaves_the_base_alone() -> None:
    base = {"PATH": "/bin"}
    env = rank_env(2, 4, "job", base=base)
    assert base == {"PATH": "/bin"}
    assert (env["PATH"], env["NETCL_RANK"], env["NETCL_LOCAL_WORLD_SIZE"]) == ("/bin", "2", "4")
