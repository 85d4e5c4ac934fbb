"""The safetensors layout, read and checked field by field before any tensor is built.

A file is an 8-byte little-endian header length, a JSON header, then the tensor bytes. The
header maps each tensor name to ``{"dtype": str, "shape": [int, ...], "data_offsets": [begin,
end]}`` (offsets relative to the first byte after the header) and may hold ``__metadata__``, a
flat map of strings. :func:`parse_header` checks every one of those rules and raises
:class:`CheckpointError` naming the rule, the tensor and the values, so no malformed header
reaches NumPy as a ``KeyError``, ``TypeError`` or ``RecursionError``.

# NOTE [ What the header check guarantees ]
# After parse_header, every entry has a known dtype, a shape of non-negative ints whose element
# count times the item size is exactly its byte range, and the byte ranges tile the data area
# with no gap, overlap or trailing bytes (the rules safetensors itself enforces). Whatever a
# flipped bit or a crafted header does, it fails one of these checks or the checksum over names,
# dtypes, shapes, bytes and metadata; it cannot make a load read outside the file or build an
# array of the wrong size.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DTYPES", "MAX_HEADER_BYTES", "WIDENED", "CheckpointError", "TensorEntry",
           "parse_header", "parse_json_document", "read_blob", "safetensors_dtype"]

MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit
MAX_JSON_DEPTH = 64  # the metadata document's nesting limit (netcl writes at most ~5 levels)

# safetensors dtype name -> little-endian NumPy dtype (BF16 and the F8 types have none).
DTYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(code) for name, code in (
        ("BOOL", "?"), ("U8", "u1"), ("I8", "i1"), ("U16", "<u2"), ("I16", "<i2"),
        ("F16", "<f2"), ("U32", "<u4"), ("I32", "<i4"), ("F32", "<f4"), ("U64", "<u8"),
        ("I64", "<i8"), ("F64", "<f8"),
    )
}
_NAMES = {dtype: name for name, dtype in DTYPES.items()}
# dtypes NumPy lacks, accepted by plain-file loads as their raw bits (widened after the load)
WIDENED: dict[str, np.dtype[Any]] = {"BF16": np.dtype("<u2")}


class CheckpointError(ValueError):
    """A checkpoint cannot be used: truncated, corrupted, foreign, or not matching the model.

    ``kind`` is one of ``"missing"``, ``"truncated"``, ``"corrupted"``, ``"format"``,
    ``"mismatch"``.

    Examples:
        >>> err = CheckpointError("truncated", "checkpoint a.netcl is truncated (3 bytes)")
        >>> err.kind, isinstance(err, ValueError)
        ('truncated', True)
    """

    __module__ = "netcl.io"  # its public home, for tracebacks and reprs

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a checked header: its name, NumPy dtype, shape and byte range."""

    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    begin: int
    end: int
    stored: str = ""  # the file's dtype name


def safetensors_dtype(dtype: np.dtype[Any]) -> str | None:
    """The safetensors name of ``dtype`` in either byte order (``None`` when it has none).

    Examples:
        >>> safetensors_dtype(np.dtype(">f4")), safetensors_dtype(np.dtype("complex64"))
        ('F32', None)
    """
    return _NAMES.get(dtype.newbyteorder("<"))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_header(raw: bytes | bytearray | memoryview, data_bytes: int, where: str,
                 widened: bool = False) -> tuple[list[TensorEntry], dict[str, str]]:
    """Check a safetensors JSON header against the ``data_bytes`` that follow it.

    Returns the tensor entries (sorted by offset) and the ``__metadata__`` strings. With
    ``widened``, the dtypes of :data:`WIDENED` (bfloat16) are accepted too, their entries
    holding the raw bits' dtype; :attr:`TensorEntry.stored` names the file's dtype.

    Raises:
        CheckpointError: ``"corrupted"`` for any broken rule, naming ``where``, the tensor and
            the offending value.

    Examples:
        >>> h = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'
        >>> parse_header(h, 8, "w.netcl")[0][0].shape
        (2,)
        >>> try:
        ...     parse_header(h, 12, "w.netcl")
        ... except CheckpointError as err:
        ...     print(err)
        checkpoint w.netcl is corrupted: 4 bytes follow the last tensor's data (ends at 8 of 12)
    """

    def broken(rule: str) -> CheckpointError:
        return CheckpointError("corrupted", f"checkpoint {where} is corrupted: {rule}")

    try:
        header = json.loads(bytes(raw))
    except RecursionError:
        raise broken("the header nests too deeply") from None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise broken("the header is not JSON") from None
    if not isinstance(header, dict):
        raise broken(f"the header is a JSON {type(header).__name__}, not an object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise broken("__metadata__ must map names to strings")
    entries = [_entry(name, info, broken, widened) for name, info in header.items()]
    entries.sort(key=lambda e: (e.begin, e.end))
    position = 0
    for e in entries:
        if e.begin != position:
            what = "overlaps the tensor before it" if e.begin < position else "leaves a gap"
            raise broken(f"tensor {_short(e.name)} at bytes [{e.begin}, {e.end}) {what} "
                         f"(expected it to start at {position})")
        position = e.end
    if position != data_bytes:
        if position > data_bytes:
            raise CheckpointError("truncated", f"checkpoint {where} is truncated: tensor data "
                                  f"ends at byte {position}, the file holds {data_bytes}")
        raise broken(f"{data_bytes - position} bytes follow the last tensor's data "
                     f"(ends at {position} of {data_bytes})")
    return entries, meta


def _short(value: Any) -> str:
    """``repr(value)``, cut to 60 characters (a crafted header can hold megabytes)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _entry(name: str, info: Any, broken: Any, widened: bool = False) -> TensorEntry:
    """One header entry, every field checked (``broken(rule)`` builds the error)."""
    known = {**DTYPES, **WIDENED} if widened else DTYPES
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        got = _short(sorted(info)) if isinstance(info, dict) else type(info).__name__
        raise broken(f"tensor {_short(name)} must have exactly dtype, shape and data_offsets, "
                     f"got {got}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in known:
        raise broken(f"tensor {_short(name)} has dtype {_short(dtype)}; known: "
                     f"{', '.join(known)}")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise broken(f"tensor {_short(name)} has shape {_short(shape)}; expected a list of "
                     f"ints >= 0")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(_is_int(o) for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
        raise broken(f"tensor {_short(name)} has data_offsets {_short(offsets)}; expected "
                     f"[begin, end] with 0 <= begin <= end")
    itemsize = known[dtype].itemsize
    size = math.prod(shape) * itemsize
    if size != offsets[1] - offsets[0]:
        raise broken(f"tensor {_short(name)}: shape {_short(shape)} of {dtype} needs {size} "
                     f"bytes, data_offsets {offsets} hold {offsets[1] - offsets[0]}")
    return TensorEntry(name, known[dtype], tuple(shape), offsets[0], offsets[1], dtype)


def read_blob(target: Path, what: str = "checkpoint", widened: bool = False
              ) -> tuple[list[TensorEntry], dict[str, str], memoryview]:
    """Read the safetensors file ``target``: its checked entries, its ``__metadata__`` and a
    writable view of its data area (the arrays built from it are writable).

    Raises:
        CheckpointError: missing, truncated or corrupted (every header rule of
            :func:`parse_header`), the message starting with ``what`` and the path.
    """
    if not target.is_file():
        state = "is not a file" if target.exists() else "does not exist"
        raise CheckpointError("missing", f"{what} {target} {state}")
    with open(target, "rb") as f:
        data = bytearray(f.read())  # bytearray: the arrays built on it are writable
    if len(data) < 8:
        raise CheckpointError("truncated", f"{what} {target} is truncated ({len(data)} bytes)")
    header_len = int.from_bytes(data[:8], "little")
    if 8 + header_len > len(data):
        raise CheckpointError(
            "truncated",
            f"{what} {target} is truncated: header says {header_len} bytes, file has "
            f"{len(data) - 8} after the length",
        )
    if header_len > MAX_HEADER_BYTES:
        raise CheckpointError("corrupted", f"{what} {target} is corrupted: a header of "
                              f"{header_len} bytes is over the {MAX_HEADER_BYTES}-byte limit")
    body = memoryview(data)[8 + header_len:]
    entries, meta = parse_header(memoryview(data)[8 : 8 + header_len], len(body), str(target),
                                 widened)
    return entries, meta, body


def parse_json_document(text: str, what: str, where: str) -> dict[str, Any]:
    """``text`` as a JSON object nested at most ``MAX_JSON_DEPTH`` levels deep.

    Raises:
        CheckpointError: ``"corrupted"``, naming ``what`` (the field) and ``where``.

    Examples:
        >>> parse_json_document('{"epoch": 2}', "netcl.meta", "a.netcl")
        {'epoch': 2}
        >>> try:
        ...     parse_json_document("[" * 100 + "]" * 100, "netcl.meta", "a.netcl")
        ... except CheckpointError as err:
        ...     print(err)
        checkpoint a.netcl is corrupted: netcl.meta nests more than 64 levels deep
    """
    try:
        doc = json.loads(text)
        too_deep = _depth(doc) > MAX_JSON_DEPTH
    except RecursionError:
        too_deep = True
    except ValueError:
        raise CheckpointError("corrupted", f"checkpoint {where} is corrupted: {what} is not "
                              f"JSON") from None
    if too_deep:
        raise CheckpointError("corrupted", f"checkpoint {where} is corrupted: {what} nests "
                              f"more than {MAX_JSON_DEPTH} levels deep")
    if not isinstance(doc, dict):
        raise CheckpointError("corrupted", f"checkpoint {where} is corrupted: {what} is a JSON "
                              f"{type(doc).__name__}, not an object")
    return doc


def _depth(doc: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value (iterative: no recursion)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                return deepest
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return deepest
