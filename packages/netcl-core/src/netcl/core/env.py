"""Reading netcl's environment variables: one parser per kind of value.

Every ``NETCL_*`` switch goes through :func:`env_flag` (booleans), :func:`env_choice` (one
of a few names) or :func:`env_number` (a finite number), so ``1/0``, ``true/false``,
``yes/no`` and ``on/off`` mean the same thing for every variable, and a value that is none of
them is an error naming the variable instead of being read as "on" or "off".

Examples:
    >>> import os
    >>> os.environ["NETCL_DOC_FLAG"] = "Off"
    >>> env_flag("NETCL_DOC_FLAG", True)
    False
    >>> os.environ["NETCL_DOC_FLAG"] = "maybe"
    >>> env_flag("NETCL_DOC_FLAG", True)
    Traceback (most recent call last):
    ...
    ValueError: NETCL_DOC_FLAG must be one of 1/0, true/false, yes/no, on/off, got 'maybe'
    >>> del os.environ["NETCL_DOC_FLAG"]
    >>> env_flag("NETCL_DOC_FLAG", True), env_flag("NETCL_DOC_FLAG", None)
    (True, None)
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, overload

__all__ = ["env_choice", "env_flag", "env_number", "env_raw"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

# NOTE [ Variables read once per change ]
# Kernel selection reads switches (NETCL_FORCE_<FAMILY>, NETCL_CONV_WINOGRAD, the kernel
# strategy) on every eager op, and ``os.environ.get`` costs 1-4 us a read (a missing key raises
# and catches KeyError inside ``os.environ``; str keys are encoded each time: 5.6 us measured
# for one forced-variant lookup on the 2-core VM). :func:`env_raw` reads the raw value straight
# from the mapping ``os.environ`` keeps (``os.environ._data``, under the key
# ``os.environ.encodekey`` makes; ~0.15 us), and the parsers re-parse only when that raw value
# changed since their last call. ``os.environ[...] = ...`` and pytest's ``monkeypatch.setenv``
# write through that mapping, so a change is seen at the next read; a variable changed behind
# Python's back (a C library's ``setenv``) is not, as ``os.environ`` itself never saw it. Where
# the mapping is not there (another Python), ``os.environ.get`` is read each call.
_ENVIRON: Any = os.environ
_ENVIRON_DATA: dict[Any, Any] | None = getattr(_ENVIRON, "_data", None)
if not isinstance(_ENVIRON_DATA, dict) or not callable(getattr(_ENVIRON, "encodekey", None)):
    _ENVIRON_DATA = None
_KEYS: dict[str, Any] = {}  # variable name -> its key in _ENVIRON_DATA
_FLAGS: dict[str, tuple[Any, bool | None]] = {}  # name -> (raw value, parsed flag)


def env_raw(name: str) -> object | None:
    """The raw value of environment variable ``name`` (``None`` when unset), cheap enough for
    every kernel selection (NOTE [ Variables read once per change ]).

    The value is only good for telling whether the variable changed (bytes on POSIX, str
    elsewhere): parse ``os.environ[name]`` when it did.

    Examples:
        >>> import os
        >>> os.environ["NETCL_DOC_RAW"] = "1"
        >>> env_raw("NETCL_DOC_RAW") is not None, env_raw("NETCL_DOC_UNSET_RAW")
        (True, None)
        >>> del os.environ["NETCL_DOC_RAW"]
    """
    data = _ENVIRON_DATA
    if data is None or os.environ is not _ENVIRON:
        return os.environ.get(name)
    key = _KEYS.get(name)
    if key is None:
        key = _KEYS[name] = _ENVIRON.encodekey(name)
    return data.get(key)


@overload
def env_flag(name: str, default: bool) -> bool: ...


@overload
def env_flag(name: str, default: None) -> bool | None: ...


def env_flag(name: str, default: bool | None) -> bool | None:
    """The boolean value of environment variable ``name``; ``default`` when it is unset or
    blank.

    Accepts ``1/0``, ``true/false``, ``yes/no`` and ``on/off`` in any case, with spaces around.

    Raises:
        ValueError: any other value (the message names the variable and the value).
    """
    raw = env_raw(name)
    if raw is None:
        return default
    known = _FLAGS.get(name)
    if known is None or known[0] != raw:
        known = _FLAGS[name] = (raw, _parse_flag(name))
    return default if known[1] is None else known[1]


def _parse_flag(name: str) -> bool | None:
    """``os.environ[name]`` as a flag, ``None`` when blank (see :func:`env_flag`)."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value == "":
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name} must be one of 1/0, true/false, yes/no, on/off, got {raw!r}")


def env_choice(name: str, choices: Sequence[str]) -> str | None:
    """The value of environment variable ``name``, lower-cased, if it is one of ``choices``
    (compared case-insensitively); ``None`` when it is unset or blank.

    Raises:
        ValueError: any other value (the message names the variable, the value and the
            choices).

    Examples:
        >>> import os
        >>> os.environ["NETCL_DOC_CHOICE"] = " Portable "
        >>> env_choice("NETCL_DOC_CHOICE", ("auto", "portable"))
        'portable'
        >>> del os.environ["NETCL_DOC_CHOICE"]
    """
    if env_raw(name) is None:  # the common case, without os.environ's KeyError
        return None
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value == "":
        return None
    allowed = [c.lower() for c in choices]
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {raw!r}")
    return value


def env_number(name: str, default: float, minimum: float | None = None) -> float:
    """The numeric value of environment variable ``name``; ``default`` when it is unset or
    blank.

    Accepts anything ``float()`` reads (``4``, ``0.5``, ``1e-3``, with spaces around) that is
    finite and, when ``minimum`` is given, at least ``minimum``.

    Raises:
        ValueError: a value that is not a finite number, or one below ``minimum`` (the message
            names the variable and the value).

    Examples:
        >>> import os
        >>> os.environ["NETCL_DOC_NUMBER"] = " 0.5 "
        >>> env_number("NETCL_DOC_NUMBER", 4.0)
        0.5
        >>> os.environ["NETCL_DOC_NUMBER"] = "-1"
        >>> env_number("NETCL_DOC_NUMBER", 4.0, minimum=0.0)
        Traceback (most recent call last):
        ...
        ValueError: NETCL_DOC_NUMBER must be >= 0, got '-1'
        >>> del os.environ["NETCL_DOC_NUMBER"]
        >>> env_number("NETCL_DOC_NUMBER", 4.0)
        4.0
    """
    raw = os.environ.get(name, "")
    if raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {raw!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}, got {raw!r}")
    return value
