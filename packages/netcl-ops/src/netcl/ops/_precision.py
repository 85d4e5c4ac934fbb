"""The float32 matmul precision mode, as PyTorch's ``torch.set_float32_matmul_precision``.

``"highest"`` (the default) computes float32 matmuls in float32 on every device. ``"high"``
and ``"medium"`` allow TF32 tensor cores (inputs rounded to 10 mantissa bits by
``cvt.rna.tf32.f32``, products accumulated in float32) where a device runs them: NVIDIA's
OpenCL driver on a GPU that passed the tensor-core probe (``netcl.ops._matmul_mma``).
Elsewhere the setting changes nothing. netcl has no bfloat16, so ``"medium"`` means what
``"high"`` does. The environment variable ``NETCL_FLOAT32_MATMUL_PRECISION`` sets the mode a
process starts with; :func:`set_float32_matmul_precision` changes it for the whole process.

# NOTE [ Precision under capture ]
# The mode is read when a matmul is issued. A captured graph (netcl.runtime) records the
# kernels that ran at capture time, so a replay computes in the precision that was in force
# while capturing, whatever the mode is when it replays; capture again after changing it.

Examples:
    >>> get_float32_matmul_precision()
    'highest'
    >>> set_float32_matmul_precision("high")
    >>> tf32_allowed()
    True
    >>> set_float32_matmul_precision("highest")
    >>> set_float32_matmul_precision("fast")
    Traceback (most recent call last):
    ...
    ValueError: set_float32_matmul_precision: precision must be one of 'highest', 'high', \
'medium', got 'fast'
"""

from __future__ import annotations

import os

__all__ = [
    "FLOAT32_MATMUL_PRECISIONS",
    "PRECISION_ENV",
    "get_float32_matmul_precision",
    "set_float32_matmul_precision",
    "tf32_allowed",
]

FLOAT32_MATMUL_PRECISIONS = ("highest", "high", "medium")
PRECISION_ENV = "NETCL_FLOAT32_MATMUL_PRECISION"


def _checked(op: str, precision: object) -> str:
    if not isinstance(precision, str) or precision not in FLOAT32_MATMUL_PRECISIONS:
        allowed = ", ".join(repr(p) for p in FLOAT32_MATMUL_PRECISIONS)
        raise ValueError(f"{op}: precision must be one of {allowed}, got {precision!r}")
    return precision


def _from_env() -> str:
    value = os.environ.get(PRECISION_ENV, "").strip().lower()
    return _checked(PRECISION_ENV, value) if value else "highest"


_state: list[str | None] = [None]  # None: not read from the environment yet


def _current() -> str:
    mode = _state[0]
    if mode is None:
        mode = _state[0] = _from_env()
    return mode


def set_float32_matmul_precision(precision: str) -> None:
    """Set the precision of float32 matmuls for the process: ``"highest"`` (float32),
    ``"high"`` or ``"medium"`` (TF32 tensor cores where the device has them).

    Raises:
        ValueError: another value (the message lists the allowed ones).

    Examples:
        >>> set_float32_matmul_precision("medium")
        >>> get_float32_matmul_precision()
        'medium'
        >>> set_float32_matmul_precision("highest")
    """
    _state[0] = _checked("set_float32_matmul_precision", precision)


def get_float32_matmul_precision() -> str:
    """The current float32 matmul precision (``"highest"`` unless set).

    Examples:
        >>> get_float32_matmul_precision() in FLOAT32_MATMUL_PRECISIONS
        True
    """
    return _current()


def tf32_allowed() -> bool:
    """Whether float32 matmuls may run on TF32 tensor cores (the mode is not ``"highest"``).

    Raises:
        ValueError: ``NETCL_FLOAT32_MATMUL_PRECISION`` holds another value (read once).

    Examples:
        >>> tf32_allowed()
        False
    """
    mode = _state[0]
    return (mode if mode is not None else _current()) != "highest"
