"""Probe each OpenCL device before it is offered, and remember the verdict.

A driver can list a device on which no kernel builds: the PoCL that PyPI ships (3.0 on LLVM 14)
asks LLVM for the host CPU's name, LLVM 14 answers ``generic`` for CPUs newer than itself (AMD
Zen 5) and its own code generator then refuses every build. So discovery builds and runs one
tiny kernel on each device and checks the result; a device that fails is *unusable* and carries
its reason (the first lines of the build log, or the exception).

Verdicts live in ``$NETCL_CACHE_DIR/devices/probe.json`` (default ``~/.cache/netcl``), keyed by
(platform, device, driver version, platform version), so the probe costs one JSON read after the
first run and runs again when the driver changes. ``NETCL_REPROBE=1`` (or ``netcl devices
--probe``) ignores the stored verdicts and probes every device anew.

# NOTE [ Probe cache format ]
# netcl-data reads this file by itself (it imports no other netcl layer), so the format is a
# contract: {"format": 1, "devices": {KEY: {"usable": bool, "reason": str, ...}}} with KEY =
# verdict_key(...) below. tests-integration/test_device_probe_contract.py checks both readers.

Examples:
    >>> verdict_key("Portable Computing Language", "pthread-AMD EPYC", "3.0-rc2", "OpenCL 3.0")
    'Portable Computing Language|pthread-AMD EPYC|3.0-rc2|OpenCL 3.0'
    >>> Verdict(False, "build failed").describe()
    'unusable: build failed'
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._cl import cl
from ._paths import atomic_write, cache_dir
from .env import env_flag

__all__ = [
    "PROBE_FORMAT",
    "Verdict",
    "probe",
    "probe_cache_path",
    "remedy",
    "verdict",
    "verdict_key",
]

PROBE_FORMAT = 1
_REPROBE_ENV = "NETCL_REPROBE"

# One work-item per element, an odd count and a value that depends on the index, so a device
# that builds but computes garbage (or runs only some work-items) is caught too.
_PROBE_NAME = "netcl_probe"
_PROBE_SOURCE = """
__kernel void netcl_probe(__global float *x, const float scale)
{
    const int i = get_global_id(0);
    x[i] = x[i] * scale + (float)i;
}
"""
_PROBE_ITEMS = 33


@dataclass(frozen=True)
class Verdict:
    """Whether a device ran the probe kernel correctly, and if not, why (one line)."""

    usable: bool
    reason: str = ""

    def describe(self) -> str:
        """``"usable"`` or ``"unusable: <reason>"``."""
        return "usable" if self.usable else f"unusable: {self.reason}"


def verdict_key(platform_name: str, device_name: str, driver: str, platform_version: str) -> str:
    """The cache key: a new driver or platform version means a new probe."""
    return "|".join(s.strip() for s in (platform_name, device_name, driver, platform_version))


def _key_of(platform: Any, dev: Any) -> str:
    return verdict_key(platform.name, dev.name, dev.driver_version, platform.version)


def probe_cache_path() -> Path:
    """Where verdicts are stored: ``$NETCL_CACHE_DIR/devices/probe.json``."""
    return cache_dir("devices") / "probe.json"


def _one_line(text: str, limit: int = 300) -> str:
    """The first meaningful lines of a build log or exception, joined into one line.

    pyopencl repeats the error code per device and names the device object; both go.

    Examples:
        >>> _one_line("clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram failed: "
        ...           "BUILD_PROGRAM_FAILURE\\n\\nBuild on <pyopencl.Device 'x'>:\\n\\n"
        ...           "error: unknown target CPU 'generic'\\n(options: -I /x)")
        "clBuildProgram failed: BUILD_PROGRAM_FAILURE / error: unknown target CPU 'generic'"
    """
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.strip().split(" - ")[0] if not lines else raw.strip()
        if line and not line.startswith(("Build on <", "(options:", "(source saved")):
            lines.append(line)
    joined = " / ".join(lines[:3])
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def probe(dev: Any) -> Verdict:
    """Build and run the probe kernel on ``dev`` now (no cache); never raises.

    Examples:
        >>> import pyopencl as cl  # doctest: +SKIP
        >>> probe(cl.get_platforms()[0].get_devices()[0])  # doctest: +SKIP
        Verdict(usable=True, reason='')
    """
    try:
        ocl = cl()
        context = ocl.Context([dev])
        queue = ocl.CommandQueue(context, dev)
        with warnings.catch_warnings():  # a non-empty build log is not a failure
            warnings.simplefilter("ignore")
            program = ocl.Program(context, _PROBE_SOURCE).build(cache_dir=False)
        kernel = ocl.Kernel(program, _PROBE_NAME)
        host = np.arange(_PROBE_ITEMS, dtype=np.float32)
        mf = ocl.mem_flags
        buf = ocl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
        kernel(queue, (_PROBE_ITEMS,), None, buf, np.float32(2.0))
        out = np.empty_like(host)
        ocl.enqueue_copy(queue, out, buf)
        queue.finish()
    except Exception as exc:  # a build failure, a driver error, a crash in the ICD
        return Verdict(False, _one_line(str(exc) or type(exc).__name__))
    expected = host * 3.0  # x * 2 + i with x = i
    if not np.array_equal(out, expected):
        bad = int(np.flatnonzero(out != expected)[0])
        return Verdict(
            False, f"probe kernel computed {out[bad]} at index {bad}, expected {expected[bad]}"
        )
    return Verdict(True)


def _read_cache(path: Path) -> dict[str, Any]:
    """The stored verdicts; a missing, unreadable or foreign file counts as empty."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != PROBE_FORMAT:
        return {}
    devices = data.get("devices")
    return devices if isinstance(devices, dict) else {}


_lock = threading.Lock()


def verdict(platform: Any, dev: Any, refresh: bool = False) -> Verdict:
    """The device's verdict: from the cache when its driver has one, else probed and stored.

    ``refresh=True`` or ``NETCL_REPROBE=1`` probes again whatever the cache says.
    """
    key = _key_of(platform, dev)
    path = probe_cache_path()
    refresh = refresh or env_flag(_REPROBE_ENV, False)
    with _lock:
        entry = None if refresh else _read_cache(path).get(key)
        if isinstance(entry, dict) and isinstance(entry.get("usable"), bool):
            return Verdict(entry["usable"], str(entry.get("reason", "")))
        result = probe(dev)
        stored = _read_cache(path)  # re-read: another process may have added devices
        stored[key] = {
            "usable": result.usable,
            "reason": result.reason,
            "platform": platform.name.strip(),
            "device": dev.name.strip(),
            "driver": dev.driver_version.strip(),
            "probed_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        payload = {"format": PROBE_FORMAT, "devices": stored}
        try:
            atomic_write(path, (json.dumps(payload, indent=1, sort_keys=True) + "\n").encode())
        except OSError:
            pass  # a read-only cache only costs a probe per process
        return result


def remedy(platform_name: str, device_type: str) -> str:
    """What to do about an unusable device, in one sentence.

    Examples:
        >>> remedy("Portable Computing Language", "cpu").startswith("the PyPI PoCL")
        True
    """
    if "portable computing language" in platform_name.lower() and device_type == "cpu":
        return (
            "the PyPI PoCL (LLVM 14) cannot compile for CPUs newer than itself; for an OpenCL "
            "CPU device install Intel's runtime (pip install 'netcl-core[intel-cpu]') or "
            "Debian's pocl-opencl-icd, or use NETCL_DEVICE=cpu (NumPy); "
            f"{_REPROBE_ENV}=1 probes again"
        )
    return (
        "update or reinstall this OpenCL driver, or pick another device with NETCL_DEVICE "
        f"(cpu = NumPy); {_REPROBE_ENV}=1 probes again"
    )
