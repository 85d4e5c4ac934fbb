"""Checkpoint files: tensors in safetensors format, everything else as JSON; data, never code.

One file holds a safetensors blob whose header metadata carries two strings: ``netcl.meta``
(the JSON document) and ``netcl.sha256`` (a digest over every tensor's name, dtype, shape and
bytes, plus the JSON). Writes go to a temporary file in the same folder, are fsynced, then
renamed over the target, so a crash mid-save leaves the previous checkpoint intact. Loading
reads nothing with pickle, checks the digest, and says whether a file is truncated, corrupted
or not a netcl checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from netcl.core._paths import atomic_write

__all__ = ["CheckpointError", "load_tensors", "save_tensors"]

_FORMAT = "netcl-checkpoint-1"


class CheckpointError(ValueError):
    """A checkpoint cannot be used: truncated, corrupted, foreign, or not matching the model.

    ``kind`` is one of ``"missing"``, ``"truncated"``, ``"corrupted"``, ``"format"``,
    ``"mismatch"``.
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


def _digest(tensors: Mapping[str, np.ndarray[Any, Any]], meta_json: str) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        h.update(f"{name}\0{arr.dtype.str}\0{arr.shape}\0".encode())
        h.update(arr.tobytes())
    h.update(meta_json.encode())
    return h.hexdigest()


def save_tensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, np.ndarray[Any, Any]],
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Atomically write ``tensors`` and the JSON-serialisable ``meta`` to ``path``.

    Raises:
        TypeError: ``meta`` is not JSON-serialisable or a tensor is not a NumPy array.

    Examples:
        >>> import numpy as np, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "w.netcl")
        >>> _ = save_tensors(p, {"w": np.ones((2, 2), np.float32)}, {"step": 3})
        >>> t, m = load_tensors(p)
        >>> t["w"].sum(), m["step"]
        (np.float32(4.0), 3)
    """
    from safetensors.numpy import save

    arrays: dict[str, np.ndarray[Any, Any]] = {}
    for name, value in tensors.items():
        if not isinstance(value, np.ndarray):
            raise TypeError(f"save_tensors: {name!r} must be a NumPy array, got "
                            f"{type(value).__name__}")
        arrays[name] = np.ascontiguousarray(value)
    try:
        meta_json = json.dumps(dict(meta or {}), sort_keys=True, allow_nan=True)
    except TypeError as err:
        raise TypeError(f"save_tensors: metadata must be JSON-serialisable: {err}") from None
    header = {
        "format": _FORMAT,
        "netcl.meta": meta_json,
        "netcl.sha256": _digest(arrays, meta_json),
    }
    target = Path(path)
    atomic_write(target, save(arrays, metadata=header))
    return target


def load_tensors(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray[Any, Any]], Any]:
    """Read and verify a checkpoint written by :func:`save_tensors`.

    Raises:
        CheckpointError: the file is missing, truncated, corrupted or not a netcl checkpoint.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load

    target = Path(path)
    if not target.is_file():
        raise CheckpointError("missing", f"checkpoint {target} does not exist")
    data = target.read_bytes()
    if len(data) < 8:
        raise CheckpointError("truncated", f"checkpoint {target} is truncated ({len(data)} bytes)")
    header_len = int.from_bytes(data[:8], "little")
    if 8 + header_len > len(data):
        raise CheckpointError(
            "truncated",
            f"checkpoint {target} is truncated: header says {header_len} bytes, file has "
            f"{len(data) - 8} after the length",
        )
    try:
        header = json.loads(data[8 : 8 + header_len])
    except ValueError:
        raise CheckpointError("corrupted", f"checkpoint {target}: header is not JSON") from None
    meta_block = header.get("__metadata__", {}) if isinstance(header, dict) else {}
    if meta_block.get("format") != _FORMAT:
        raise CheckpointError("format", f"{target} is not a netcl checkpoint ({_FORMAT})")
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    if 8 + header_len + max(ends, default=0) > len(data):
        raise CheckpointError("truncated", f"checkpoint {target} is truncated: tensor data ends "
                              f"past the end of the file")
    try:
        tensors = load(data)
    except SafetensorError as err:
        raise CheckpointError("corrupted", f"checkpoint {target} is corrupted: {err}") from None
    meta_json = meta_block.get("netcl.meta", "{}")
    if _digest(tensors, meta_json) != meta_block.get("netcl.sha256"):
        raise CheckpointError("corrupted", f"checkpoint {target} is corrupted: checksum mismatch")
    return tensors, json.loads(meta_json)
