"""netcl's file caches under concurrency and damage (netcl.core.caches, netcl.core._paths).

- Every writer puts its files where :func:`cache_info` looks, and clearing removes them.
- Several processes writing and reading the same entry at once (big payloads through
  ``write_entry``/``read_entry``; real program builds on PoCL) never see a corrupt or foreign
  entry, also while another process clears the caches; a writer that is *not* atomic is caught
  by the reader's checksum, never used.
- The caches whose damage other tests do not cover yet (the PoCL check record, the ICD vendors
  folder) are truncated and bit-flipped: detected, and rebuilt. (Program entries, autotune
  winners, probe verdicts and PoCL's own files: test_cache_corruption.py,
  test_kernel_selector.py, test_device_probe.py.)
- A process that loads OpenCL holds the in-use lock that keeps ``clear_caches`` off PoCL's and
  the ICD folders.

The concurrent parts run as child processes started together (a "go" file), with timeouts.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from netcl.core import _pocl_cache, icd
from netcl.core._paths import CacheEntryError, exclusive_use, read_entry, write_entry
from netcl.core.caches import CACHE_NAMES, cache_info, clear_caches
from netcl.core.device import DeviceHandle
from netcl.core.device_probe import probe_cache_path
from netcl.core.device_profile import extended_profile
from netcl.core.kernels.cache import KernelBuildError, entry_key, entry_path, get_program
from netcl.core.selection._store import tuned_path
from netcl.core.testing import available_devices

_TIMEOUT = 300
_WRITERS = 4


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty ``NETCL_CACHE_DIR`` of this test's own; PoCL's folder follows it."""
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("POCL_CACHE_DIR", raising=False)
    monkeypatch.delenv("POCL_KERNEL_CACHE", raising=False)
    monkeypatch.delenv("_NETCL_SET_POCL_CACHE_DIR", raising=False)  # restored afterwards
    return tmp_path / "cache"


def _pocl_device() -> DeviceHandle | None:
    return next((d for d in available_devices() if d.backend == "cl"
                 and "Portable Computing Language" in d.platform_name), None)


def _minimal_elf() -> bytes:
    """The smallest ELF file :func:`_pocl_cache._check_elf` accepts: a 64-bit header, no
    tables."""
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0)


# --- every writer writes where cache_info looks --------------------------------------------


def test_every_writer_writes_where_cache_info_looks_and_clear_removes_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = _pocl_device()  # first: discovery probes (devices/) and PoCL may cache (pocl/)
    before = {c.name: c.entries for c in cache_info()}
    fake_dev = type("D", (), {"name": "d", "driver_version": "1", "version": "3.0",
                              "platform": type("P", (), {"name": "p"})()})()
    key = entry_key(fake_dev, "__kernel void k() {}", "")
    write_entry(entry_path(key), key, b"\x01" * 129)
    profile = extended_profile(None)
    write_entry(tuned_path(profile), {"store": "autotune"}, b"{}")
    probe_cache_path().write_text(json.dumps({"format": 1, "devices": {
        "a": {"usable": True}, "b": {"usable": True}, "c": {"usable": False}}}))
    pocl = _pocl_cache.pocl_cache_dir()
    assert pocl is not None and (pocl, False) == _pocl_cache.pocl_folder()
    (pocl / "kcache" / "AB").mkdir(parents=True)
    (pocl / "kcache" / "AB" / "k.so").write_bytes(_minimal_elf())
    _pocl_cache.guard_pocl_cache()  # records the sound .so in pocl-checked
    monkeypatch.setattr(icd, "pip_runtimes", lambda: {"netcl-intel-cpu.icd": "/x/libi.so"})
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("NETCL_ICD_REGISTER", raising=False)
    monkeypatch.setenv("OCL_ICD_VENDORS", str(root.parent))  # no vendors of its own
    folder = icd.register_pip_runtimes()
    assert folder is not None and Path(folder).parent == root / "icd"
    if dev is not None:  # a build that fails saves its source under failed/
        with pytest.raises(KernelBuildError) as failure:
            get_program(dev.context, "__kernel void broken(void) { nope }", name="broken")
        assert failure.value.source_path.parent == root / "failed"

    found = {c.name: c for c in cache_info()}
    assert list(found) == list(CACHE_NAMES)
    assert {n: c.path for n, c in found.items()} == {n: root / n for n in CACHE_NAMES}
    # discovery may have registered the real pip runtime under the same name already
    assert (Path(folder) / "netcl-intel-cpu.icd").read_text() == "/x/libi.so\n"
    assert {n: c.entries - before[n] for n, c in found.items()} == {
        "programs": 1, "autotune": 1, "devices": 3 - before["devices"], "pocl": 1,
        "pocl-checked": 1, "icd": 1 - before["icd"], "failed": int(dev is not None)}
    sizes = {n: sum(p.stat().st_size for p in (root / n).rglob("*") if p.is_file())
             for n in CACHE_NAMES}
    assert {n: c.bytes for n, c in found.items()} == sizes

    with exclusive_use(root) as alone:  # this process's own lock does not hold it back
        assert alone
    cleared = clear_caches()
    assert [(r.name, r.skipped) for r in cleared] == [(n, "") for n in CACHE_NAMES]
    assert {r.name: r.freed for r in cleared} == sizes
    assert all(c.entries == c.bytes == 0 for c in cache_info())
    # an emptied vendors folder that OCL_ICD_VENDORS still names is filled again
    assert icd.register_pip_runtimes() == folder
    assert (Path(folder) / "netcl-intel-cpu.icd").read_text() == "/x/libi.so\n"


# --- several processes on one entry -------------------------------------------------------

# Child: after the "go" file appears, ROUNDS times write a payload of its own (seeded, odd
# size, a few MiB) to the one entry and read the entry back, checking that whatever it read
# is one writer's whole payload. "rogue" writes the entry in place instead (not atomically,
# pausing half-way): readers must catch that with the checksum. "clear" clears the programs
# cache in a loop. Prints a JSON report.
_PAYLOAD_CHILD = r"""
import hashlib, json, os, sys, time
import numpy as np
from netcl.core._paths import CacheEntryError, read_entry, write_entry, _MAGIC
from netcl.core.caches import clear_caches

role, index, rounds, go, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]
path = __import__("pathlib").Path(path)
key = {"store": "program", "what": "concurrency test"}

def payload(seed):
    size = 2**21 + 97 * seed + 1
    body = np.random.default_rng(seed).bytes(size - 8)
    return seed.to_bytes(8, "little") + body

def verify(content):
    return content == payload(int.from_bytes(content[:8], "little"))

while not os.path.exists(go):
    time.sleep(0.001)
report = {"read": 0, "wrong": 0, "detected": 0, "missing": 0, "errors": []}
try:
    for r in range(rounds):
        seed = 1000 * index + r
        if role == "clear":
            clear_caches(["programs"])
            time.sleep(0.01)
            continue
        if role == "rogue":
            content = payload(seed)
            digest = hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":"))
                                    .encode() + b"\n" + content).hexdigest()
            header = json.dumps({"key": key, "sha256": digest, "size": len(content)},
                                sort_keys=True, separators=(",", ":")).encode()
            data = _MAGIC + b"\n" + header + b"\n" + content
            with open(path, "wb") as f:
                f.write(data[: len(data) // 2])
                f.flush()
                time.sleep(0.05)
                f.write(data[len(data) // 2 :])
            time.sleep(0.02)
            continue
        write_entry(path, key, payload(seed))
        for _ in range(3):
            try:
                content = read_entry(path, key)
            except FileNotFoundError:
                report["missing"] += 1
                continue
            except CacheEntryError:
                report["detected"] += 1
                write_entry(path, key, payload(seed))  # the rebuild
                continue
            report["read"] += 1
            report["wrong"] += not verify(content)
except Exception as exc:
    report["errors"].append(repr(exc))
print(json.dumps(report))
"""


def _start(script: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _reports(children: list[subprocess.Popen[str]], go: Path) -> list[dict[str, Any]]:
    """Start ``children`` together (the go file) and collect their JSON reports."""
    time.sleep(0.5)  # let them import; they spin on the go file meanwhile
    go.write_text("")
    reports = []
    for child in children:
        out, err = child.communicate(timeout=_TIMEOUT)
        assert child.returncode == 0, f"child died with {child.returncode}:\n{err[-3000:]}"
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def test_concurrent_writers_and_readers_of_one_entry_never_see_it_corrupt(root: Path) -> None:
    path = root / "programs" / "shared.program"
    go = root.parent / "go"
    env = dict(os.environ)
    roles = ["write"] * _WRITERS + ["clear"]
    children = [_start(_PAYLOAD_CHILD, [role, str(i), "8" if role == "write" else "40", str(go),
                                        str(path)], env) for i, role in enumerate(roles)]
    reports = _reports(children, go)
    for role, report in zip(roles, reports, strict=True):
        assert report["errors"] == [], (role, report)
        assert report["wrong"] == report["detected"] == 0, (role, report)
    writes = reports[:_WRITERS]
    assert sum(r["read"] for r in writes) > 0 and all(r["read"] + r["missing"] == 24
                                                      for r in writes), writes
    # whatever is left is one writer's whole payload; no temporary file is left behind
    if path.exists():
        content = read_entry(path, {"store": "program", "what": "concurrency test"})
        assert content[:8] in {(1000 * i + 7).to_bytes(8, "little") for i in range(_WRITERS)}
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_non_atomic_writer_is_caught_by_the_readers_checksum(root: Path) -> None:
    path = root / "programs" / "shared.program"
    path.parent.mkdir(parents=True)
    go = root.parent / "go"
    roles = ["rogue", "write", "write"]
    children = [_start(_PAYLOAD_CHILD, [role, str(i), "30" if role == "rogue" else "40",
                                        str(go), str(path)], dict(os.environ))
                for i, role in enumerate(roles)]
    reports = _reports(children, go)
    assert all(r["errors"] == [] and r["wrong"] == 0 for r in reports), reports
    # a half-written entry was met (and rebuilt) at least once, and never used
    assert sum(r["detected"] for r in reports) > 0, reports


# Child: build and run one kernel ROUNDS times on one OpenCL device, each time in a new
# context with netcl's in-memory program cache emptied, so every round goes to the disk
# cache (NETCL_DISK_CACHE=1): a round loads the entry another process wrote, or builds and
# writes it. Prints the results' correctness, every warning and the build counts.
_BUILD_CHILD = r"""
import json, os, sys, time, warnings
warnings.simplefilter("always")
caught = []
warnings.showwarning = lambda message, category, *rest: caught.append(
    f"{category.__name__}: {message}")
import numpy as np
from netcl.core._cl import cl
from netcl.core.kernels import cache as kc

platform, device, rounds, go, src = sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:]
ocl = cl()
dev = next(d for p in ocl.get_platforms() if p.name.strip() == platform
           for d in p.get_devices() if d.name.strip() == device)
while not os.path.exists(go):
    time.sleep(0.001)
good = 0
for _ in range(rounds):
    kc._programs.clear()
    kc._kernels.clear()
    ctx = ocl.Context([dev])
    queue = ocl.CommandQueue(ctx)
    host = np.arange(37, dtype=np.float32)
    buf = ocl.Buffer(ctx, ocl.mem_flags.READ_WRITE | ocl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    kc.get_kernel(ctx, src, "concurrent_scale")(queue, (37,), None, buf)
    out = np.empty_like(host)
    ocl.enqueue_copy(queue, out, buf)
    queue.finish()
    good += bool(np.array_equal(out, host * 4.0))
print(json.dumps({"good": good, "warnings": caught, "stats": kc.build_stats(),
                  "entry": str(kc.entry_path(kc.entry_key(dev, src, "")))}))
"""

_SOURCE = ("__kernel void concurrent_scale(__global float* x) "
           "{ const int i = get_global_id(0); x[i] = x[i] * 3.0f + (float)i; }")

_CLEAR_CHILD = r"""
import os, sys, time
from netcl.core.caches import clear_caches
go, stop = sys.argv[1:3]
while not os.path.exists(go):
    time.sleep(0.001)
deadline = time.monotonic() + 120
while not os.path.exists(stop) and time.monotonic() < deadline:
    clear_caches(["programs"])
    time.sleep(0.05)
print('{}')
"""


def test_concurrent_processes_building_one_program_on_pocl(root: Path) -> None:
    dev = _pocl_device()
    if dev is None:
        pytest.skip("no PoCL device here")
    go, stop = root.parent / "go", root.parent / "stop"
    env = {**os.environ, "NETCL_DISK_CACHE": "1"}
    rounds = 4
    args = [dev.platform_name.strip(), dev.device_name.strip()]
    builders = [_start(_BUILD_CHILD, [*args, str(rounds), str(go), _SOURCE], env)
                for _ in range(_WRITERS)]
    clearer = _start(_CLEAR_CHILD, [str(go), str(stop)], env)
    try:
        reports = _reports(builders, go)
    finally:
        stop.write_text("")
        clearer.communicate(timeout=_TIMEOUT)
    assert clearer.returncode == 0
    for report in reports:
        assert report["good"] == rounds, report
        assert report["warnings"] == [], report  # no entry was ever found damaged
        stats = report["stats"]
        assert stats["compiled"] + stats["from_disk"] == rounds, report
    # once the clearing stops, one more process finds a sound entry, or builds a sound one
    [last] = _reports([_start(_BUILD_CHILD, [*args, "1", str(go), _SOURCE], env)], go)
    assert last["good"] == 1 and last["warnings"] == [], last
    assert Path(last["entry"]) == entry_path(entry_key(dev.cl_device, _SOURCE, ""))
    assert len(read_entry(Path(last["entry"]), entry_key(dev.cl_device, _SOURCE, ""))) > 0


# --- damaged entries of the caches other tests do not cover -------------------------------


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate-half":
        path.write_bytes(data[: len(data) // 2])
    elif how == "truncate-1":
        path.write_bytes(data[:-1])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # flip one bit of the last content byte
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 0x04]))


@pytest.mark.parametrize(("how", "reason"), [
    ("truncate-half", r"truncated"),
    ("truncate-1", r"truncated: \d+ bytes of content, the header says \d+"),
    ("empty", r"empty file \(truncated to 0 bytes\)"),
    ("flip-bit", r"checksum mismatch: the content is corrupt"),
])
def test_damaged_pocl_check_record_is_discarded_and_rebuilt(
    root: Path, how: str, reason: str
) -> None:
    pocl = _pocl_cache.pocl_cache_dir()
    assert pocl is not None
    for name in ("a", "b"):
        (pocl / name).mkdir(parents=True)
        (pocl / name / "k.so").write_bytes(_minimal_elf())
    _pocl_cache.guard_pocl_cache()
    record = _pocl_cache._record_of(pocl)
    assert record is not None
    path, key = record
    sound = json.loads(read_entry(path, key))
    assert sorted(sound) == sorted(str(pocl / n / "k.so") for n in ("a", "b"))
    _damage(path, how)
    with pytest.raises(CacheEntryError):
        read_entry(path, key)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _pocl_cache.guard_pocl_cache()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"netcl: discarded cache file {path}: ")
    assert messages[0].endswith("; checking every PoCL cache file again")
    assert re.search(reason, messages[0]), messages
    assert json.loads(read_entry(path, key)) == sound  # rebuilt by checking the files again


@pytest.mark.parametrize("how", ["truncate-half", "truncate-1", "empty", "flip-bit"])
def test_damaged_icd_vendor_file_is_written_again(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    (vendors / "gpu.icd").write_text("libvendor-gpu.so\n")
    monkeypatch.setattr(icd, "pip_runtimes",
                        lambda: {"netcl-intel-cpu.icd": "/opt/env/lib/libintelocl.so"})
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("NETCL_ICD_REGISTER", raising=False)
    monkeypatch.setenv("OCL_ICD_VENDORS", str(vendors))
    folder = icd.register_pip_runtimes()
    assert folder is not None
    expected = {"gpu.icd": "libvendor-gpu.so\n",
                "netcl-intel-cpu.icd": "/opt/env/lib/libintelocl.so\n"}
    for name in expected:
        _damage(Path(folder, name), how)
    # a new process (OCL_ICD_VENDORS back to the user's) registers again: both rewritten
    monkeypatch.setenv("OCL_ICD_VENDORS", str(vendors))
    assert icd.register_pip_runtimes() == folder
    assert {p.name: p.read_text() for p in Path(folder).glob("*.icd")} == expected


# --- the in-use lock ------------------------------------------------------------------------

_CL_CHILD = r"""
import sys
from netcl.core._cl import cl
try:
    cl()
except ImportError:  # no pyopencl: the lock is taken before the import all the same
    pass
print("loaded", flush=True)
sys.stdin.read()
"""


def test_a_process_that_loads_opencl_holds_the_in_use_lock(root: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", _CL_CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert child.stdout is not None and child.stdout.readline() == "loaded\n"
        with exclusive_use(root) as alone:
            assert not alone
        skipped = {r.name: r.skipped for r in clear_caches() if r.skipped}
        assert sorted(skipped) == ["icd", "pocl"]
        assert all(s.startswith("in use by a running netcl process") for s in skipped.values())
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)
    with exclusive_use(root) as alone:  # the lock died with the process
        assert alone
