"""Autotune winners on disk: one checksummed cache entry per device and driver.

The entry (``netcl.core._paths.write_entry``) holds JSON,
``{"winners": [{"op": ..., "key": [...], "variant": ...}, ...]}``; its header key names the
store, the format, the vendor, the device and the driver, so another device's file, an old
format or a damaged file is discarded (with one warning) and its winners are tuned again.
Variants are stored by name, so an op package's own variants persist like the built-in ones.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path

from netcl.core._paths import CacheEntryError, cache_dir, discard_entry, read_entry, write_entry
from netcl.core.device_profile import ExtendedDeviceProfile

from ._registry import variant_named
from ._variants import AnyVariant
from .args import json_key, tuple_key

__all__ = ["TUNE_FORMAT", "TunedKey", "read_winners", "timed", "tuned_path", "write_winners"]

TUNE_FORMAT = 2  # 1: plain JSON; 2: a checksummed entry holding JSON
TunedKey = tuple[str, Hashable]


def _store_key(p: ExtendedDeviceProfile) -> dict[str, str]:
    """What the winners file is for; stored in it and checked when it is read."""
    return {"store": "autotune", "format": str(TUNE_FORMAT), "vendor": p.vendor,
            "name": p.name, "driver_version": p.driver_version}


def tuned_path(p: ExtendedDeviceProfile) -> Path:
    """The file holding a device's winners (named from vendor, name and driver).

    Raises:
        OSError: the cache folder cannot be created.
    """
    ident = f"{p.vendor}\0{p.name}\0{p.driver_version}".encode()
    return cache_dir("autotune") / f"{hashlib.sha256(ident).hexdigest()[:20]}.winners"


def read_winners(p: ExtendedDeviceProfile, stacklevel: int) -> dict[TunedKey, AnyVariant]:
    """The stored winners; a missing file gives none, a bad one is deleted with a warning."""
    try:
        path = tuned_path(p)
        content = read_entry(path, _store_key(p))
    except FileNotFoundError:
        return {}
    except CacheEntryError as exc:  # truncated, corrupt, or another device's file
        discard_entry(exc.path, exc.reason, "its winners will be tuned again",
                      stacklevel=stacklevel + 1)
        return {}
    except OSError as exc:
        warnings.warn(f"KernelSelector: ignoring unreadable autotune cache: {exc!r}",
                      RuntimeWarning, stacklevel=stacklevel)
        return {}
    try:
        data = json.loads(content)
        entries = [(str(e["op"]), e["key"], variant_named(e["variant"]))
                   for e in data["winners"]]
        if not all(isinstance(key, list) for _, key, _ in entries):
            raise TypeError("a key is not a list")
        return {(op, tuple_key(key)): variant for op, key, variant in entries}
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # a sound file whose
        # winners this netcl does not know (a variant renamed since): tune them again
        discard_entry(path, f"unknown winners ({exc!r})", "its winners will be tuned again",
                      stacklevel=stacklevel + 1)
        return {}


def write_winners(p: ExtendedDeviceProfile, winners: Mapping[TunedKey, AnyVariant]) -> None:
    """Write ``winners`` as the device's file, atomically.

    Raises:
        OSError: the file cannot be written.
        TypeError: a key that is not JSON.
    """
    rows = [{"op": op, "key": json_key("autotune", k), "variant": v.name}
            for (op, k), v in winners.items()]
    content = json.dumps({"winners": rows}, indent=1).encode("utf-8")
    write_entry(tuned_path(p), _store_key(p), content)


def timed(call: Callable[[], None]) -> float:
    """Seconds one call of ``call`` took."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start
