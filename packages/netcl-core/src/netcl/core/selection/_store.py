"""Autotune winners on disk: one checksummed cache entry per device and driver.

The entry (``netcl.core._paths.write_entry``) holds JSON,
``{"winners": [{"op": ..., "key": [...], "variant": ..., "params": {...}}, ...],
"failed": [{"op": ..., "key": [...], "candidate": ...}, ...]}`` (``params``, the winner's
overrides of its configured parameters, only where it has some; ``failed``, the candidates
that failed to build or run, by label); its header key names the store, the format, the
vendor, the device and the driver version, so another device's or driver's file, an old
format or a damaged file is discarded (with one warning) and its winners are tuned again.
Variants are stored by name, so an op package's own variants persist like the built-in ones.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Hashable, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netcl.core._paths import CacheEntryError, cache_dir, discard_entry, read_entry, write_entry
from netcl.core.device_profile import ExtendedDeviceProfile

from ._registry import variant_named
from ._tuning import Tuned, params_of
from .args import json_key, tuple_key

__all__ = ["TUNE_FORMAT", "Failed", "Stored", "TunedKey", "read_winners", "timed", "tuned_path",
           "write_winners"]

TUNE_FORMAT = 3  # 1: plain JSON; 2: a checksummed entry holding JSON; 3: params and failures
TunedKey = tuple[str, Hashable]
Failed = tuple[str, Hashable, str]
"""A candidate that failed: (op, key, the candidate's label)."""


@dataclass
class Stored:
    """A device's file: its winners and the candidates that failed."""

    winners: dict[TunedKey, Tuned] = field(default_factory=dict)
    failed: set[Failed] = field(default_factory=set)


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


def read_winners(p: ExtendedDeviceProfile, stacklevel: int) -> Stored:
    """The stored winners and failures; a missing file gives none, a bad one is deleted with
    a warning."""
    try:
        path = tuned_path(p)
        content = read_entry(path, _store_key(p))
    except FileNotFoundError:
        return Stored()
    except CacheEntryError as exc:  # truncated, corrupt, or another device's file
        discard_entry(exc.path, exc.reason, "its winners will be tuned again",
                      stacklevel=stacklevel + 1)
        return Stored()
    except OSError as exc:
        warnings.warn(f"KernelSelector: ignoring unreadable autotune cache: {exc!r}",
                      RuntimeWarning, stacklevel=stacklevel)
        return Stored()
    try:
        return _parse(json.loads(content))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:  # a sound
        # file whose winners this netcl does not know (a variant renamed since): tune again
        discard_entry(path, f"unknown winners ({exc!r})", "its winners will be tuned again",
                      stacklevel=stacklevel + 1)
        return Stored()


def _parse(data: Any) -> Stored:
    out = Stored()
    for e in data["winners"]:
        if not isinstance(e["key"], list):
            raise TypeError("a key is not a list")
        params = params_of(e.get("params", {}))
        out.winners[(str(e["op"]), tuple_key(e["key"]))] = Tuned(variant_named(e["variant"]),
                                                                  params)
    for e in data.get("failed", []):
        if not isinstance(e["key"], list):
            raise TypeError("a key is not a list")
        out.failed.add((str(e["op"]), tuple_key(e["key"]), str(e["candidate"])))
    return out


def write_winners(p: ExtendedDeviceProfile, winners: Mapping[TunedKey, Tuned],
                  failed: Set[Failed] = frozenset()) -> None:
    """Write ``winners`` and ``failed`` as the device's file, atomically.

    Raises:
        OSError: the file cannot be written.
        TypeError: a key that is not JSON.
    """
    rows: list[dict[str, Any]] = []
    for (op, k), won in winners.items():
        row: dict[str, Any] = {"op": op, "key": json_key("autotune", k),
                               "variant": won.variant.name}
        if won.params:
            row["params"] = dict(won.params)
        rows.append(row)
    document: dict[str, Any] = {"winners": rows}
    if failed:
        document["failed"] = [{"op": op, "key": json_key("autotune", k), "candidate": label}
                              for op, k, label in sorted(failed, key=repr)]
    content = json.dumps(document, indent=1).encode("utf-8")
    write_entry(tuned_path(p), _store_key(p), content)


def timed(call: Callable[[], None]) -> float:
    """Seconds one call of ``call`` took."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start
