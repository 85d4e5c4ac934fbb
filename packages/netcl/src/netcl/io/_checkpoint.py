"""Checkpoint files: tensors in safetensors format, everything else as JSON; data, never code.

One file holds a safetensors blob whose header metadata carries two strings: ``netcl.meta``
(the JSON document) and ``netcl.sha256`` (a digest over every tensor's name, dtype, shape and
bytes, plus the JSON). Writes go to a temporary file in the same folder, are fsynced, then
renamed over the target, so a crash mid-save leaves the previous checkpoint intact (and the
next save deletes the temporary file a killed one left: :mod:`._atomic`). Loading reads
nothing with pickle, checks the header rule by rule (:mod:`._format`) and then the digest,
and says in one :class:`CheckpointError` whether a file is truncated, corrupted or not a netcl
checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._atomic import atomic_write
from ._format import CheckpointError, parse_json_document, read_blob, safetensors_dtype

__all__ = ["CheckpointError", "load_tensors", "save_tensors"]

_FORMAT = "netcl-checkpoint-1"


def _digest(tensors: Mapping[str, np.ndarray[Any, Any]], meta_json: str) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        arr = np.asarray(tensors[name], order="C")  # 0-d stays 0-d (ascontiguousarray: 1-d)
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

    Temporary files that earlier saves of ``path`` left behind when they were killed are
    deleted (NOTE [ Temporary files of a killed save ] in :mod:`netcl.io._atomic`).

    Raises:
        TypeError: ``meta`` is not JSON-serialisable, a tensor is not a NumPy array, or its
            dtype has no safetensors name (bool, integers, float16/32/64 do).

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
        if safetensors_dtype(value.dtype) is None:
            raise TypeError(f"save_tensors: {name!r} has dtype {value.dtype}, which a "
                            f"checkpoint cannot hold (bool, integers, float16/32/64 only)")
        # little-endian, as the file stores it, so the digest matches what a load returns
        arrays[name] = np.asarray(value, dtype=value.dtype.newbyteorder("<"), order="C")
    try:
        meta_json = json.dumps(dict(meta or {}), sort_keys=True, allow_nan=True)
    except (TypeError, ValueError) as err:  # ValueError: a circular reference
        raise TypeError(f"save_tensors: metadata must be JSON-serialisable: {err}") from None
    header = {
        "format": _FORMAT,
        "netcl.meta": meta_json,
        "netcl.sha256": _digest(arrays, meta_json),
    }
    target = Path(path)
    atomic_write(target, save(arrays, metadata=header))
    return target


def load_tensors(
    path: str | os.PathLike[str],
) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, Any]]:
    """Read and verify a checkpoint written by :func:`save_tensors`: its tensors (writable
    arrays) and its metadata document.

    The header is checked rule by rule (:func:`netcl.io._format.parse_header`) before any
    array is built, then the checksum over every name, dtype, shape, byte and the metadata.

    Raises:
        CheckpointError: the file is missing, truncated, corrupted or not a netcl checkpoint;
            nothing else comes out of a malformed file.
    """
    target = Path(path)
    entries, meta_block, body = read_blob(target)
    if meta_block.get("format") != _FORMAT:
        raise CheckpointError("format", f"{target} is not a netcl checkpoint ({_FORMAT})")
    missing = sorted({"netcl.meta", "netcl.sha256"} - set(meta_block))
    if missing:
        raise CheckpointError("corrupted", f"checkpoint {target} is corrupted: the header "
                              f"lacks {', '.join(missing)}")
    tensors = {
        e.name: np.frombuffer(body[e.begin : e.end], dtype=e.dtype).reshape(e.shape)
        for e in entries
    }
    meta_json = meta_block["netcl.meta"]
    if _digest(tensors, meta_json) != meta_block["netcl.sha256"]:
        raise CheckpointError("corrupted", f"checkpoint {target} is corrupted: checksum mismatch")
    return tensors, parse_json_document(meta_json, "netcl.meta", str(target))
