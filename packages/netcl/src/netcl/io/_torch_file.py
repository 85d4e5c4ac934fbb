"""PyTorch ``.pt`` / ``.pth`` files, read as data: tensors come out as NumPy arrays and no
code in the file ever runs.

# NOTE [ Reading a PyTorch file without trusting it ]
# ``torch.save`` writes a zip archive: ``<name>/data.pkl`` (a pickle of the object) and one
# member ``<name>/data/<key>`` per tensor storage, raw little-endian bytes. A pickle can call
# any importable function, so it is never given to ``pickle.load``: :class:`_Unpickler`
# resolves exactly the globals a state dict needs (``collections.OrderedDict``, the storage
# classes, ``torch._utils._rebuild_tensor_v2`` / ``_rebuild_parameter``) to netcl's own
# stand-ins and refuses every other global, naming it. A tensor is rebuilt from its storage
# with its offset, shape and strides, each checked to stay inside the storage. This is what
# ``torch.load(weights_only=True)`` admits too; with torch installed, that is used instead
# (it also reads the pre-1.6 format), unless ``use_torch=False``.
"""

from __future__ import annotations

import collections
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ._format import CheckpointError

__all__ = ["load_torch_state_dict"]

# torch storage class -> (NumPy dtype of the stored bytes, widen bfloat16 to float32)
_STORAGES: dict[str, tuple[np.dtype[Any], bool]] = {
    "FloatStorage": (np.dtype("<f4"), False), "DoubleStorage": (np.dtype("<f8"), False),
    "HalfStorage": (np.dtype("<f2"), False), "BFloat16Storage": (np.dtype("<u2"), True),
    "LongStorage": (np.dtype("<i8"), False), "IntStorage": (np.dtype("<i4"), False),
    "ShortStorage": (np.dtype("<i2"), False), "CharStorage": (np.dtype("i1"), False),
    "ByteStorage": (np.dtype("u1"), False), "BoolStorage": (np.dtype("?"), False),
}


class _StorageType:
    """Stands in for ``torch.FloatStorage`` and its kin inside the pickle."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype, self.bfloat16 = _STORAGES[name]


class _Storage:
    """One storage's elements (raw bits for bfloat16)."""

    def __init__(self, data: np.ndarray[Any, Any], bfloat16: bool) -> None:
        self.data, self.bfloat16 = data, bfloat16


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_: Any
                    ) -> np.ndarray[Any, Any]:
    """``torch._utils._rebuild_tensor_v2``: the view of ``storage``, copied out."""
    if not isinstance(storage, _Storage):
        raise CheckpointError("corrupted", "a tensor is rebuilt from something that is not a "
                              "storage")
    shape, strides = tuple(size), tuple(stride)
    ok = (isinstance(offset, int) and offset >= 0 and len(shape) == len(strides)
          and all(isinstance(d, int) and d >= 0 for d in shape)
          and all(isinstance(s, int) and s >= 0 for s in strides))
    n = storage.data.size
    last = offset + sum((d - 1) * s for d, s in zip(shape, strides)) if ok else -1
    if not ok or (0 not in shape and last >= n):
        raise CheckpointError("corrupted", f"a tensor of shape {shape}, strides {strides} at "
                              f"offset {offset} does not fit its storage of {n} elements")
    if 0 in shape:
        out = np.zeros(shape, storage.data.dtype)
    else:
        item = storage.data.itemsize
        view = np.lib.stride_tricks.as_strided(storage.data[offset:], shape,
                                               tuple(s * item for s in strides), writeable=False)
        out = np.array(view)
    return (out.astype(np.uint32) << 16).view(np.float32) if storage.bfloat16 else out


def _rebuild_parameter(data: Any, *_: Any) -> Any:
    """``torch._utils._rebuild_parameter``: a Parameter is its data here."""
    return data


_GLOBALS: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", name): _StorageType(name) for name in _STORAGES},
}


class _Unpickler(pickle.Unpickler):
    """Admits only the globals of :data:`_GLOBALS` (NOTE [ Reading a PyTorch file without
    trusting it ])."""

    def __init__(self, archive: zipfile.ZipFile, prefix: str, where: str) -> None:
        super().__init__(archive.open(f"{prefix}data.pkl"))
        self.archive, self.prefix, self.where = archive, prefix, where
        self.big_endian = False
        if f"{prefix}byteorder" in archive.namelist():
            self.big_endian = archive.read(f"{prefix}byteorder").strip() == b"big"

    def find_class(self, module: str, name: str) -> Any:
        found = _GLOBALS.get((module, name))
        if found is None:
            raise CheckpointError("format", f"load_torch_state_dict({self.where}): refuses to "
                                  f"unpickle {module}.{name} (only tensors, storages and "
                                  f"OrderedDicts are admitted: a weights-only load)")
        return found

    def persistent_load(self, pid: Any) -> Any:
        if (not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage"
                or not isinstance(pid[1], _StorageType) or not isinstance(pid[2], str)
                or not isinstance(pid[4], int)):
            raise CheckpointError("corrupted", f"load_torch_state_dict({self.where}): "
                                  f"unknown persistent id {pid!r:.80}")
        kind, key, numel = pid[1], pid[2], pid[4]
        member = f"{self.prefix}data/{key}"
        try:
            raw = self.archive.read(member)
        except KeyError:
            raise CheckpointError("corrupted", f"load_torch_state_dict({self.where}): storage "
                                  f"{member} is missing") from None
        dtype = kind.dtype.newbyteorder(">") if self.big_endian else kind.dtype
        if len(raw) < numel * dtype.itemsize:
            raise CheckpointError("truncated", f"load_torch_state_dict({self.where}): storage "
                                  f"{member} holds {len(raw)} bytes, {numel} elements of "
                                  f"{dtype} need {numel * dtype.itemsize}")
        data = np.frombuffer(raw, dtype, count=numel).astype(kind.dtype)
        return _Storage(data, kind.bfloat16)


def _from_torch(obj: Any) -> Any:
    """``obj`` with every torch tensor turned into a NumPy array (bfloat16 widened)."""
    if type(obj).__module__.startswith("torch") and hasattr(obj, "detach"):
        t = obj.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.numpy().copy()
    if isinstance(obj, dict):
        return {k: _from_torch(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_from_torch(v) for v in obj)
    return obj


def _plain(obj: Any) -> Any:
    """OrderedDicts as plain dicts, recursively (the order kept)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def load_torch_state_dict(path: str | os.PathLike[str], *, use_torch: bool | None = None
                          ) -> dict[str, Any]:
    """Read a PyTorch checkpoint (``torch.save(model.state_dict(), path)``, or a dict holding
    state dicts and plain values) with every tensor as a NumPy array, without running code
    from the file (NOTE [ Reading a PyTorch file without trusting it ]).

    ``use_torch``: ``None`` uses ``torch.load(weights_only=True)`` when torch is importable
    and netcl's restricted reader otherwise; ``False`` always netcl's (zip format, PyTorch
    >= 1.6); ``True`` requires torch. bfloat16 tensors come out as float32.

    Raises:
        CheckpointError: missing, truncated, corrupted, or holding anything besides tensors,
            containers and plain values (``"format"``, naming the global it refused).
        ImportError: ``use_torch=True`` without torch.

    Examples:
        >>> import os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "bad.pt")
        >>> _ = open(p, "wb").write(b"not a zip")
        >>> try:
        ...     load_torch_state_dict(p, use_torch=False)
        ... except CheckpointError as err:
        ...     print(err.kind)
        format
    """
    target = Path(path)
    if not target.is_file():
        state = "is not a file" if target.exists() else "does not exist"
        raise CheckpointError("missing", f"PyTorch file {target} {state}")
    if use_torch is not False:
        try:
            import torch
        except ImportError:
            if use_torch:
                raise
        else:
            try:
                loaded = torch.load(target, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError as err:  # weights_only refused a global
                raise CheckpointError("format", f"load_torch_state_dict({target}): {err}"
                                      ) from None
            except (RuntimeError, EOFError, ValueError) as err:  # torch's reader: malformed
                raise CheckpointError("corrupted", f"load_torch_state_dict({target}): "
                                      f"torch.load failed ({type(err).__name__}: {err})"
                                      ) from None
            return _plain(_from_torch(loaded))  # type: ignore[no-any-return]
    if not zipfile.is_zipfile(target):
        raise CheckpointError("format", f"{target} is not a zip-format PyTorch file (written "
                              f"by torch.save since PyTorch 1.6); load it with torch installed")
    with zipfile.ZipFile(target) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise CheckpointError("format", f"{target} has {len(pickles)} data.pkl members, "
                                  f"a PyTorch file has one")
        prefix = pickles[0][: -len("data.pkl")]
        try:
            loaded = _Unpickler(archive, prefix, str(target)).load()
        except CheckpointError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError) as err:
            raise CheckpointError("corrupted", f"load_torch_state_dict({target}): the pickle "
                                  f"is malformed ({type(err).__name__}: {err})") from None
    if not isinstance(loaded, dict):
        raise CheckpointError("format", f"load_torch_state_dict({target}): the file holds a "
                              f"{type(loaded).__name__}, not a dict (save a state_dict)")
    return _plain(loaded)  # type: ignore[no-any-return]
