"""Corrupt caches never crash a process nor run the wrong kernel.

netcl's program binaries (``NETCL_DISK_CACHE=1``) and PoCL's own kernel cache are damaged the
ways a crash, a full disk or a careless copy damage them; a fresh process must then compute the
right result, warn once naming the file and the fault, and rebuild the entry. Those processes
are children run with a timeout: before the fix they died of SIGSEGV, SIGBUS or SIGABRT, which
must show as a failing test here, not as a dead test run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netcl.core import _pocl_cache
from netcl.core._paths import CacheEntryError, read_entry, write_entry
from netcl.core.device import DeviceHandle
from netcl.core.testing import available_devices

_TIMEOUT = 180

# Child: build the kernel `scale` multiplying by FACTOR on one device (by platform and device
# name), run it on 0..15, and print the result, every warning, the build counts and the path
# of the program's netcl cache entry.
_CHILD = r"""
import json, sys, warnings
warnings.simplefilter("always")
caught = []
warnings.showwarning = lambda message, category, *rest: caught.append(
    f"{category.__name__}: {message}")
import numpy as np
from netcl.core._cl import cl
from netcl.core.kernels.cache import build_stats, entry_key, entry_path, get_kernel

platform, device, factor = sys.argv[1:4]
ocl = cl()
dev = next(d for p in ocl.get_platforms() if p.name.strip() == platform
           for d in p.get_devices() if d.name.strip() == device)
ctx = ocl.Context([dev])
queue = ocl.CommandQueue(ctx)
src = ("__kernel void scale(__global float* x) { x[get_global_id(0)] *= %s; }" % factor)
host = np.arange(16, dtype=np.float32)
buf = ocl.Buffer(ctx, ocl.mem_flags.READ_WRITE | ocl.mem_flags.COPY_HOST_PTR, hostbuf=host)
get_kernel(ctx, src, "scale")(queue, (16,), None, buf)
ocl.enqueue_copy(queue, host, buf)
queue.finish()
print(json.dumps({"result": host.tolist(), "warnings": caught, "stats": build_stats(),
                  "entry": str(entry_path(entry_key(dev, src, "")))}))
"""


def _cl_devices() -> list[DeviceHandle]:
    return [d for d in available_devices() if d.backend == "cl"]


def _pocl_device() -> DeviceHandle | None:
    return next((d for d in _cl_devices() if "Portable Computing Language" in d.platform_name),
                None)


def _run_child(dev: DeviceHandle, cache: Path, factor: str, disk_cache: str) -> dict[str, Any]:
    """Run :data:`_CHILD` on ``dev`` with ``cache`` as ``NETCL_CACHE_DIR``; its JSON report.

    ``POCL_CACHE_DIR`` as this test process's netcl set it is inherited, so the child also
    shows that netcl moves it to the child's own ``NETCL_CACHE_DIR``.
    """
    env = {**os.environ, "NETCL_CACHE_DIR": str(cache), "NETCL_DISK_CACHE": disk_cache}
    env.pop("POCL_CACHE_DIR", None)  # a folder of the caller's would take PoCL's files elsewhere
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, dev.platform_name.strip(), dev.device_name.strip(),
         factor],
        env=env, capture_output=True, text=True, timeout=_TIMEOUT, check=False,
    )
    assert proc.returncode == 0, (
        f"child died with exit status {proc.returncode} (negative: killed by that signal)\n"
        f"--- stderr ---\n{proc.stderr[-3000:]}"
    )
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def _expect(report: dict[str, Any], factor: float) -> None:
    np.testing.assert_array_equal(report["result"], np.arange(16, dtype=np.float32) * factor)


def _truncate(path: Path, how: str) -> None:
    data = path.read_bytes()
    cut = {"half": len(data) // 2, "10-bytes": len(data) - 10, "empty": 0}[how]
    path.write_bytes(data[:cut])


# --- the entry format ---------------------------------------------------------------------


KEY = {"store": "test", "device": "gpu0", "driver_version": "2.0"}


@pytest.mark.parametrize(("how", "reason"), [
    ("half", r"truncated: \d+ bytes of content, the header says 4096"),
    ("10-bytes", r"truncated: 4086 bytes of content, the header says 4096"),
    ("empty", r"empty file \(truncated to 0 bytes\)"),
    ("inside-header", r"truncated inside the header"),
    ("flip-byte", r"checksum mismatch: the content is corrupt"),
    ("flip-key-byte", r"checksum mismatch: the content is corrupt"),
    ("appended", r"too long: 4097 bytes of content, the header says 4096"),
    ("wrong-key", r"built for another key: driver_version is '1.0', expected '2.0'"),
    ("foreign", r"not a netcl cache entry \(starts with b'\\x7fELF"),
])
def test_read_entry_names_each_fault(tmp_path: Path, how: str, reason: str) -> None:
    path = tmp_path / "entry"
    content = np.random.default_rng(0).bytes(4096)
    write_entry(path, KEY, content)
    assert read_entry(path, KEY) == content
    data = path.read_bytes()
    header_end = data.index(b"\n", data.index(b"\n") + 1)
    planted = {
        "half": data[: header_end + 1 + 2048],
        "10-bytes": data[:-10],
        "empty": b"",
        "inside-header": data[: header_end - 5],
        "flip-byte": data[:-100] + bytes([data[-100] ^ 0x10]) + data[-99:],
        "flip-key-byte": data.replace(b'"gpu0"', b'"gpu1"'),
        "appended": data + b"\0",
        "foreign": b"\x7fELF" + data[4:],
    }.get(how)
    if how == "wrong-key":
        write_entry(path, {**KEY, "driver_version": "1.0"}, content)
    else:
        assert planted is not None
        path.write_bytes(planted)
    with pytest.raises(CacheEntryError) as info:
        read_entry(path, KEY)
    assert re.search(reason, info.value.reason), info.value.reason
    assert info.value.path == path and str(path) in str(info.value)


# --- netcl's program binaries, on every OpenCL device -------------------------------------

_pristine: dict[str, Path] = {}


def _pristine_programs(dev: DeviceHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the sound entries of ``x*2`` and ``x*3`` for ``dev``, built once."""
    name = str(dev)
    if name not in _pristine:
        cache = tmp_path_factory.mktemp("pristine-programs")
        for factor in ("2.0f", "3.0f"):
            report = _run_child(dev, cache, factor, "1")
            assert report["stats"]["compiled"] == 1 and report["warnings"] == []
        _pristine[name] = cache
    return _pristine[name]


@pytest.mark.parametrize(("how", "reason"), [
    ("half", r"truncated: \d+ bytes of content, the header says \d+"),
    ("10-bytes", r"truncated: \d+ bytes of content, the header says \d+"),
    ("swap", r"built for another key: source_sha256 is '[0-9a-f]{64}', expected '[0-9a-f]{64}'"),
    ("flip-byte", r"checksum mismatch: the content is corrupt"),
    ("wrong-key", r"built for another key: driver_version is 'an older driver', expected '"),
])
def test_corrupt_program_entry_is_rebuilt(
    dev: DeviceHandle, tmp_path_factory: pytest.TempPathFactory, how: str, reason: str
) -> None:
    if dev.backend != "cl":
        pytest.skip("program binaries exist on OpenCL devices only")
    cache = tmp_path_factory.mktemp("programs")
    shutil.copytree(_pristine_programs(dev, tmp_path_factory), cache, dirs_exist_ok=True)
    sound = _run_child(dev, cache, "2.0f", "1")  # loads x*2 from disk
    assert sound["stats"]["from_disk"] == 1 and sound["warnings"] == []
    path = Path(sound["entry"])
    data = path.read_bytes()
    if how == "swap":  # the sound entry of x*3 in place of x*2's
        path.write_bytes(Path(_run_child(dev, cache, "3.0f", "1")["entry"]).read_bytes())
    elif how == "flip-byte":
        path.write_bytes(data[:-64] + bytes([data[-64] ^ 0x01]) + data[-63:])
    elif how == "wrong-key":
        key = {**json.loads(data.split(b"\n")[1])["key"], "driver_version": "an older driver"}
        write_entry(path, key, data.split(b"\n", 2)[2])
    else:
        _truncate(path, how)

    report = _run_child(dev, cache, "2.0f", "1")
    _expect(report, 2.0)
    assert len(report["warnings"]) == 1, report["warnings"]
    prefix = f"RuntimeWarning: netcl: discarded cache file {path}: "
    assert report["warnings"][0].startswith(prefix), report["warnings"]
    assert re.search(reason, report["warnings"][0]), report["warnings"]
    assert report["warnings"][0].endswith("; rebuilding it from source")
    assert report["stats"]["compiled"] == 1 and report["stats"]["from_disk"] == 0

    rebuilt = _run_child(dev, cache, "2.0f", "1")  # the entry was written again, soundly
    _expect(rebuilt, 2.0)
    assert rebuilt["warnings"] == [] and rebuilt["stats"]["from_disk"] == 1


def test_unusable_cache_folder_only_costs_compile_time(
    dev: DeviceHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if dev.backend != "cl":
        pytest.skip("program binaries exist on OpenCL devices only")
    from netcl.core.kernels.cache import build_stats, get_program

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("NETCL_CACHE_DIR", str(blocker))  # no folder can be made under it
    monkeypatch.setenv("NETCL_DISK_CACHE", "1")
    before = build_stats()["compiled"]
    get_program(dev.context, "__kernel void unusable_cache(__global int* x) { x[0] = 7; }")
    assert build_stats()["compiled"] == before + 1


# --- PoCL's own cache ---------------------------------------------------------------------


def test_pocl_cache_dir_follows_netcl_unless_the_user_set_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path / "netcl"))
    monkeypatch.delenv("POCL_KERNEL_CACHE", raising=False)
    monkeypatch.delenv("POCL_CACHE_DIR", raising=False)
    monkeypatch.delenv("_NETCL_SET_POCL_CACHE_DIR", raising=False)
    assert _pocl_cache.pocl_cache_dir() == tmp_path / "netcl" / "pocl"
    assert os.environ["POCL_CACHE_DIR"] == str(tmp_path / "netcl" / "pocl")
    # a child with its own NETCL_CACHE_DIR inherits both variables: netcl's choice moves
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path / "child"))
    assert _pocl_cache.pocl_cache_dir() == tmp_path / "child" / "pocl"
    # the user's choice stays, and is the folder that gets checked
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / "mine"))
    assert _pocl_cache.pocl_cache_dir() == tmp_path / "mine"
    assert os.environ["POCL_CACHE_DIR"] == str(tmp_path / "mine")
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")
    assert _pocl_cache.pocl_cache_dir() is None


def _pristine_pocl(dev: DeviceHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A netcl cache whose ``pocl/`` holds PoCL's files for ``x*2``, already checked once."""
    name = "pocl:" + str(dev)
    if name not in _pristine:
        cache = tmp_path_factory.mktemp("pristine-pocl")
        for _ in range(2):  # the second start records the files as checked
            report = _run_child(dev, cache, "2.0f", "0")
            _expect(report, 2.0)
            assert report["warnings"] == []
        assert list((cache / "pocl-checked").iterdir())
        _pristine[name] = cache
    return _pristine[name]


@pytest.mark.parametrize(("name", "how", "reason"), [
    ("*.so", "half", r"truncated to \d+ bytes: segment \d+ ends at byte \d+"),
    ("*.so", "10-bytes", r"truncated to \d+ bytes: the section header table ends at byte \d+"),
    ("*.so", "empty", r"not an ELF file \(0 bytes"),
    ("program.bc", "half", r"truncated"),
    ("program.bc", "10-bytes", r"truncated: \d+ bytes is not a whole number of 32-bit words"),
    ("program.bc", "empty", r"not LLVM bitcode \(0 bytes"),
])
def test_truncated_pocl_cache_file_is_rebuilt(
    tmp_path_factory: pytest.TempPathFactory, name: str, how: str, reason: str
) -> None:
    dev = _pocl_device()
    if dev is None:
        pytest.skip("no PoCL device here")
    cache = tmp_path_factory.mktemp("pocl")
    shutil.copytree(_pristine_pocl(dev, tmp_path_factory), cache, dirs_exist_ok=True)
    # checks are recorded per folder: one clean start records the copied files as checked
    assert _run_child(dev, cache, "2.0f", "0")["warnings"] == []
    [path] = (cache / "pocl").rglob(name)
    _truncate(path, how)

    report = _run_child(dev, cache, "2.0f", "0")  # SIGBUS, SIGSEGV or SIGABRT before
    _expect(report, 2.0)
    assert len(report["warnings"]) == 1, report["warnings"]
    prefix = f"RuntimeWarning: netcl: discarded cache file {path}: "
    assert report["warnings"][0].startswith(prefix), report["warnings"]
    assert re.search(reason, report["warnings"][0]), report["warnings"]
    assert report["warnings"][0].endswith("; PoCL will compile it again")

    assert path.exists() and _pocl_cache.find_bad_pocl_files(cache / "pocl") == []
    again = _run_child(dev, cache, "2.0f", "0")
    _expect(again, 2.0)
    assert again["warnings"] == []


def test_pocl_check_ignores_half_written_and_foreign_files(tmp_path: Path) -> None:
    (tmp_path / "AB" / "CDEF" / "k" / "8-1-1").mkdir(parents=True)
    (tmp_path / "tempfile_x1Yz.so").write_bytes(b"")  # PoCL renames it once complete
    (tmp_path / "AB" / "CDEF" / "last_accessed").write_bytes(b"")
    (tmp_path / "AB" / "CDEF" / "k" / "8-1-1" / "k.so").write_bytes(b"\x7fELF\x02\x01")
    (tmp_path / "AB" / "CDEF" / "program.bc").write_bytes(b"BC\xc0\xde" + bytes(8))
    bad = dict(_pocl_cache.find_bad_pocl_files(tmp_path))
    assert sorted(p.name for p in bad) == ["k.so", "program.bc"]
    assert bad[tmp_path / "AB" / "CDEF" / "k" / "8-1-1" / "k.so"] == (
        "truncated to 6 bytes, inside the ELF header")
    assert re.match(r"corrupt bitcode: no block starts at byte 4|truncated",
                    bad[tmp_path / "AB" / "CDEF" / "program.bc"])
