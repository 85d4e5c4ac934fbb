"""Plain safetensors files, both ways: what PyTorch, Hugging Face and ``safetensors`` write.

netcl's own checkpoints (:mod:`._checkpoint`) are safetensors files with a format tag and a
checksum in the header; :func:`load_safetensors` reads any producer's file (those included),
checking the header rule by rule as for checkpoints, and :func:`save_safetensors` writes a file
any safetensors reader loads, atomically. bfloat16 tensors, which NumPy has no dtype for, load
widened to float32 (exactly: a bfloat16 is the top half of a float32).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor

from ._atomic import atomic_write
from ._format import CheckpointError, read_blob, safetensors_dtype

__all__ = ["load_safetensors", "save_safetensors"]


def _bfloat16_to_float32(bits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def load_safetensors(
    path: str | os.PathLike[str],
    *,
    dtypes: Mapping[str, str] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> dict[str, np.ndarray[Any, Any]]:
    """Read every tensor of a plain safetensors file as a writable NumPy array.

    ``dtypes`` and ``shapes`` (name -> expected) check named tensors as they load. bfloat16
    tensors come out as float32. ``__metadata__`` is ignored (:func:`netcl.io.load_tensors`
    reads netcl's).

    Raises:
        CheckpointError: the file is missing, truncated or malformed (``kind`` says which), or
            a tensor named in ``dtypes``/``shapes`` is absent or differs (``"mismatch"``).

    Examples:
        >>> import numpy as np, tempfile, os
        >>> from safetensors.numpy import save_file
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, p)
        >>> load_safetensors(p, shapes={"w": (2, 3)})["w"][1]
        array([3., 4., 5.], dtype=float32)
    """
    target = Path(path)
    entries, _, body = read_blob(target, "safetensors file", widened=True)
    out: dict[str, np.ndarray[Any, Any]] = {}
    for e in entries:
        arr = np.frombuffer(body[e.begin : e.end], dtype=e.dtype).reshape(e.shape)
        out[e.name] = _bfloat16_to_float32(arr) if e.stored == "BF16" else arr
    for name, want in (dtypes or {}).items():
        got = out.get(name)
        if got is None or got.dtype != np.dtype(want):
            raise CheckpointError("mismatch", f"load_safetensors({target}): tensor {name!r} "
                                  f"should be {want}, "
                                  f"{'is absent' if got is None else f'is {got.dtype}'}")
    for name, shape in (shapes or {}).items():
        got = out.get(name)
        if got is None or got.shape != tuple(shape):
            raise CheckpointError("mismatch", f"load_safetensors({target}): tensor {name!r} "
                                  f"should have shape {tuple(shape)}, "
                                  f"{'is absent' if got is None else f'has {got.shape}'}")
    return out


def _array(fn: str, name: Any, value: Any) -> np.ndarray[Any, Any]:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{fn}: tensor names must be non-empty str, got {name!r}")
    if name == "__metadata__":
        raise ValueError(f"{fn}: '__metadata__' is reserved by the safetensors format")
    if isinstance(value, Tensor):
        value = value.to_host()
    elif type(value).__module__.startswith("torch"):  # a torch.Tensor, without importing torch
        value = value.detach().cpu().numpy()
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{fn}: {name!r} must be a NumPy array, netcl Tensor or torch "
                        f"Tensor, got {type(value).__name__}")
    if safetensors_dtype(value.dtype) is None:
        raise TypeError(f"{fn}: {name!r} has dtype {value.dtype}, which safetensors cannot "
                        f"hold (bool, integers, float16/32/64)")
    return np.asarray(value, dtype=value.dtype.newbyteorder("<"), order="C")  # 0-d kept


def save_safetensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, Any],
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Atomically write ``tensors`` (NumPy arrays, netcl Tensors or torch tensors) as a plain
    safetensors file, with optional string ``metadata``.

    Raises:
        TypeError: a name, value or metadata entry of the wrong type, or a dtype safetensors
            cannot hold.
        ValueError: a tensor named ``__metadata__``.

    Examples:
        >>> import numpy as np, tempfile, os
        >>> from safetensors.numpy import load_file
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> _ = save_safetensors(p, {"b": np.ones(3, np.float16)}, {"producer": "netcl"})
        >>> load_file(p)["b"].dtype
        dtype('float16')
    """
    from safetensors.numpy import save

    fn = "save_safetensors"
    arrays = {name: _array(fn, name, value) for name, value in tensors.items()}
    meta = dict(metadata or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise TypeError(f"{fn}: metadata must map str to str, got {meta!r:.80}")
    target = Path(path)
    atomic_write(target, save(arrays, metadata=meta or None))
    return target
