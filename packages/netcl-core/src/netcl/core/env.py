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
from typing import overload

__all__ = ["env_choice", "env_flag", "env_number"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


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
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value == "":
        return default
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
