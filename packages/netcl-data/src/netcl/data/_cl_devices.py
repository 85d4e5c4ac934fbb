"""netcl-core's device rules, read by netcl-data on its own (it imports no other netcl layer).

# NOTE [ Device rules shared with netcl-core ]
# netcl-core probes every OpenCL device and stores verdicts in
# $NETCL_CACHE_DIR/devices/probe.json (netcl.core.device_probe), and registers pip-installed
# OpenCL runtimes with the ICD loader through a vendors folder $NETCL_CACHE_DIR/icd/<hash>/
# (netcl.core.icd). netcl-data must obey both without importing netcl-core, so this module
# reads the same files by the same rules. tests-integration/test_device_probe_contract.py
# checks that both layers compute the same paths, keys and vendors folder.

Examples:
    >>> verdict_key("P", "D", "1.0", "OpenCL 3.0")
    'P|D|1.0|OpenCL 3.0'
"""

from __future__ import annotations

import hashlib
import json
import os
import site
import sys
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no flock, no in-use lock
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "cache_root",
    "hold_in_use_lock",
    "register_pip_runtimes",
    "stored_verdicts",
    "verdict_key",
]

PROBE_FORMAT = 1
_PIP_RUNTIMES = {"netcl-intel-cpu.icd": "libintelocl.so"}
_SYSTEM_VENDORS = "/etc/OpenCL/vendors"
_IN_USE_LOCK = "in-use.lock"
_held: dict[str, int] = {}  # cache root -> the descriptor holding this process's shared lock


def cache_root() -> Path:
    """``$NETCL_CACHE_DIR``, else ``$XDG_CACHE_HOME/netcl``, else ``~/.cache/netcl``."""
    root = os.environ.get("NETCL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "netcl"
    )
    return Path(root)


def verdict_key(platform_name: str, device_name: str, driver: str, platform_version: str) -> str:
    """The probe cache's key for one device under one driver."""
    return "|".join(s.strip() for s in (platform_name, device_name, driver, platform_version))


def stored_verdicts() -> dict[str, tuple[bool, str]]:
    """Key -> (usable, reason) from netcl-core's probe cache; empty when there is none."""
    try:
        data = json.loads((cache_root() / "devices" / "probe.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != PROBE_FORMAT:
        return {}
    devices = data.get("devices")
    found: dict[str, tuple[bool, str]] = {}
    for key, entry in (devices if isinstance(devices, dict) else {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("usable"), bool):
            found[key] = (entry["usable"], str(entry.get("reason", "")))
    return found


def device_key(dev: Any) -> str:
    """The probe cache key of a ``pyopencl.Device``."""
    platform = dev.platform
    return verdict_key(platform.name, dev.name, dev.driver_version, platform.version)


def hold_in_use_lock() -> None:
    """Hold a shared lock on ``<cache_root()>/in-use.lock`` until this process exits, as
    ``netcl.core._paths.mark_in_use`` does; never raises."""
    root = cache_root()
    if fcntl is None or str(root) in _held:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / _IN_USE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return
    _held[str(root)] = fd


def register_pip_runtimes() -> str | None:
    """Point ``OCL_ICD_VENDORS`` at netcl's vendors folder when a pip OpenCL runtime is present.

    The same folder, by the same rules, as ``netcl.core.icd.register_pip_runtimes``.
    """
    hold_in_use_lock()
    if not sys.platform.startswith("linux") or os.environ.get("NETCL_ICD_REGISTER") == "0":
        return None
    prefixes = [sys.prefix, site.getuserbase()]
    runtimes: dict[str, str] = {}
    for prefix in prefixes:
        for icd_name, lib_name in _PIP_RUNTIMES.items():
            lib = Path(prefix, "lib", lib_name)
            if icd_name not in runtimes and lib.is_file():
                runtimes[icd_name] = str(lib)
    if not runtimes:
        return None
    folder = cache_root() / "icd" / hashlib.sha256(sys.prefix.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    current = os.environ.get("OCL_ICD_VENDORS", "")
    ours = bool(current) and Path(current).resolve() == folder.resolve()
    if ours and all((folder / name).is_file() for name in runtimes):
        return str(folder)
    if current and not ours and not os.path.isdir(current):
        return None
    # a parent's folder emptied by `netcl cache clear` is filled again from the system's
    source = Path((current if not ours else "") or os.environ.get("OPENCL_VENDOR_PATH")
                  or _SYSTEM_VENDORS)
    wanted = {p.name: p.read_text() for p in sorted(source.glob("*.icd")) if p.is_file()}
    wanted.update({name: lib + "\n" for name, lib in runtimes.items()})
    for path in folder.glob("*.icd"):
        if path.name not in wanted:
            path.unlink(missing_ok=True)
    for name, text in wanted.items():
        path = folder / name
        if not path.is_file() or path.read_text() != text:
            tmp = folder / f".{name}.{os.getpid()}.tmp"
            tmp.write_text(text)
            os.replace(tmp, path)
    os.environ["OCL_ICD_VENDORS"] = str(folder)
    return str(folder)
