"""``netcl cache info`` lists every file cache netcl keeps (folder, entries, size) under the
folder the environment picks; ``netcl cache clear [NAME ...]`` empties them, leaves a
``POCL_CACHE_DIR`` of the user's alone, and leaves PoCL's and the ICD folders alone (exit 1,
one line) while another netcl process uses OpenCL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netcl.cli import main
from netcl.core._paths import write_entry
from netcl.core.caches import CACHE_NAMES

# Every cache, as each of its writers names its files (NOTE [ Cache entry format ] framing
# for netcl's own; PoCL's layout for PoCL's), with odd sizes.
_FILES = {
    "programs": ["a.program", "b.program", ".c.program.x1y2.tmp"],
    "autotune": ["0123.winners"],
    "pocl": ["kcache/AB/CD/program.bc", "kcache/AB/CD/k/1-1-1/k.so", "kcache/EF/program.bc"],
    "pocl-checked": ["77.entry"],
    "icd": ["0f0f/netcl-intel-cpu.icd", "0f0f/pocl.icd"],
    "failed": ["scale-0123.cl"],
}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty ``NETCL_CACHE_DIR`` of this test's own (PoCL's folder follows it)."""
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("POCL_CACHE_DIR", raising=False)
    monkeypatch.delenv("POCL_KERNEL_CACHE", raising=False)
    return tmp_path / "cache"


def _fill(root: Path) -> dict[str, int]:
    """Write every cache's files under ``root``; bytes written per cache."""
    sizes: dict[str, int] = {}
    for n, (name, files) in enumerate(_FILES.items()):
        for i, rel in enumerate(files):
            path = root / name / rel
            if rel.endswith((".program", ".winners", ".entry")) and not rel.endswith(".tmp"):
                write_entry(path, {"store": name, "i": str(i)}, os.urandom(37 * (n + i) + 1))
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(os.urandom(53 * (n + i) + 3))
            sizes[name] = sizes.get(name, 0) + path.stat().st_size
    probe = root / "devices" / "probe.json"
    probe.parent.mkdir(parents=True)
    probe.write_text(json.dumps({"format": 1, "devices": {
        "P|D1|1|3.0": {"usable": True, "reason": ""},
        "P|D2|1|3.0": {"usable": False, "reason": "build failed"}}}))
    sizes["devices"] = probe.stat().st_size
    return sizes


def _rows(out: str) -> dict[str, tuple[int, str, str]]:
    """name -> (entries, size, folder) from the table ``netcl cache info`` prints."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] in CACHE_NAMES and len(parts) == 5:
            rows[parts[0]] = (int(parts[1]), f"{parts[2]} {parts[3]}", parts[4])
    return rows


def _entries_left(root: Path, name: str) -> list[str]:
    folder = root / name
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_info_lists_every_cache_with_folder_entries_and_size(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sizes = _fill(root)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"netcl caches in {root} (from NETCL_CACHE_DIR)"
    rows = _rows(out)
    assert list(rows) == list(CACHE_NAMES)
    expected_entries = {"programs": 2, "autotune": 1, "devices": 2, "pocl": 3,
                        "pocl-checked": 1, "icd": 2, "failed": 1}  # a writer's .tmp is none
    for name, (entries, size, folder) in rows.items():
        assert (entries, folder) == (expected_entries[name], str(root / name)), name
        n = sizes[name]
        assert size == (f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"), name
    total = out.splitlines()[-1].split()
    assert total[:2] == ["total", str(sum(expected_entries.values()))]


def test_info_follows_xdg_cache_home_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NETCL_CACHE_DIR", raising=False)
    monkeypatch.delenv("POCL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"netcl caches in {tmp_path / 'xdg' / 'netcl'} " \
                                  "(from XDG_CACHE_HOME)"
    assert _rows(out)["programs"] == (0, "0 B", str(tmp_path / "xdg" / "netcl" / "programs"))
    assert not (tmp_path / "xdg").exists()


def test_clear_all_empties_every_cache_and_keeps_the_folders(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(root)
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == [f"cleared {n}" for n in CACHE_NAMES]
    assert out[0].startswith("cleared programs: 2 entries, ")
    for name in CACHE_NAMES:
        assert (root / name).is_dir(), name
        # a writer's temporary file seconds old is about to become an entry: it stays
        assert _entries_left(root, name) == ([".c.program.x1y2.tmp"] if name == "programs"
                                             else []), name
    assert not list((root / "pocl").iterdir())  # PoCL's emptied subfolders went too
    assert main(["cache", "info"]) == 0
    assert all(e == 0 for e, _, _ in _rows(capsys.readouterr().out).values())


def test_clear_names_only_those_and_refuses_unknown_names(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(root)
    assert main(["cache", "clear", "autotune", "failed"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert _entries_left(root, "autotune") == _entries_left(root, "failed") == []
    assert len(_entries_left(root, "programs")) == 3
    assert main(["cache", "clear", "programs", "nope"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["netcl: unknown cache 'nope'; the caches are " + ", ".join(CACHE_NAMES)]
    assert len(_entries_left(root, "programs")) == 3  # nothing done on bad input


def test_users_pocl_cache_dir_is_listed_but_never_cleared(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "my-pocl"
    (mine / "kcache").mkdir(parents=True)
    (mine / "kcache" / "program.bc").write_bytes(b"BC\xc0\xde" + bytes(97))
    monkeypatch.setenv("POCL_CACHE_DIR", str(mine))
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert _rows(out)["pocl"] == (1, "101 B", str(mine))
    assert "POCL_CACHE_DIR names this folder of yours: netcl never clears it" in out
    assert main(["cache", "clear", "pocl"]) == 0
    assert capsys.readouterr().out.startswith("left pocl: POCL_CACHE_DIR names this folder")
    assert (mine / "kcache" / "program.bc").is_file()
    monkeypatch.delenv("POCL_CACHE_DIR")
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")  # PoCL's own switch: netcl's folder, unused
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert _rows(out)["pocl"] == (0, "0 B", str(root / "pocl"))
    assert "off (POCL_KERNEL_CACHE=0)" in out


# Holds netcl's in-use lock on its NETCL_CACHE_DIR (as a process running OpenCL does) until
# its stdin closes.
_HOLDER = """
import sys
from netcl.core._paths import mark_in_use
mark_in_use()
print("holding", flush=True)
sys.stdin.read()
"""


def test_clear_leaves_driver_folders_alone_while_a_netcl_process_uses_them(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(root)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        assert main(["cache", "clear"]) == 1
        captured = capsys.readouterr()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    lines = captured.out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        f"left {n}" if n in ("pocl", "icd") else f"cleared {n}" for n in CACHE_NAMES
    ]
    assert captured.err.splitlines() == [
        "netcl: could not clear pocl, icd: in use by a running netcl process; run "
        "`netcl cache clear pocl icd` once it has exited"]
    assert len(_entries_left(root, "pocl")) == 3 and len(_entries_left(root, "icd")) == 2
    assert _entries_left(root, "autotune") == []
    assert main(["cache", "clear", "pocl", "icd"]) == 0  # the holder has exited
    assert _entries_left(root, "pocl") == _entries_left(root, "icd") == []


_DATA_HOLDER = """
import sys
from netcl.data._cl_devices import register_pip_runtimes
register_pip_runtimes()
print("holding", flush=True)
sys.stdin.read()
"""


def test_a_netcl_data_process_holds_the_same_lock(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # netcl-data imports no other netcl layer: its own copy of the lock must be the same lock
    _fill(root)
    holder = subprocess.Popen([sys.executable, "-c", _DATA_HOLDER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        assert main(["cache", "clear", "icd"]) == 1
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    assert capsys.readouterr().out.startswith("left icd: in use by a running netcl process")
    # (the holder may have added its own vendors folder beside the test's)
    assert {"0f0f/netcl-intel-cpu.icd", "0f0f/pocl.icd"} <= set(_entries_left(root, "icd"))


def test_cache_help_names_the_subcommands_and_caches(
    capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, words in ((["cache", "--help"], ["info", "clear", "NETCL_CACHE_DIR",
                                                "XDG_CACHE_HOME", "POCL_CACHE_DIR"]),
                        (["cache", "clear", "--help"], list(CACHE_NAMES))):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 0
        text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")
        assert all(word in text for word in words), (argv, text)
    with pytest.raises(SystemExit) as stop:
        main(["cache"])
    assert stop.value.code == 2


def test_console_command_runs_in_a_fresh_process(root: Path) -> None:
    _fill(root)
    done = subprocess.run([sys.executable, "-m", "netcl.cli", "cache", "info"],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert _rows(done.stdout)["programs"][0] == 2
    assert not (root / "in-use.lock").exists()  # info takes no lock and loads no OpenCL
