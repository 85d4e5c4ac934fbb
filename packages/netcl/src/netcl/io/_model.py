"""``save_model`` / ``load_model``: a model's ``state_dict`` through a checkpoint file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ._checkpoint import load_tensors, save_tensors
from ._format import CheckpointError

__all__ = ["HasState", "load_model", "save_model", "to_numpy_state"]


class HasState(Protocol):
    """What checkpoints need of a model: ``state_dict`` and ``load_state_dict``."""

    def state_dict(self) -> Mapping[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> Any: ...


def to_numpy_state(state: Mapping[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """Host copies of every tensor in ``state`` (Tensors are read back, arrays copied)."""
    out: dict[str, np.ndarray[Any, Any]] = {}
    for name, value in state.items():
        host = value.to_host() if hasattr(value, "to_host") else np.asarray(value)
        out[name] = np.array(host, copy=True)
    return out


def save_model(model: HasState, path: str | os.PathLike[str]) -> Path:
    """Write ``model.state_dict()`` atomically to ``path`` (safetensors + checksum)."""
    return save_tensors(path, to_numpy_state(model.state_dict()), {"kind": "model"})


def load_model(model: HasState, path: str | os.PathLike[str], strict: bool = True) -> Any:
    """Load weights saved by :func:`save_model` into ``model``.

    Every key and shape is checked against ``model.state_dict()`` *before* anything is
    assigned, so a mismatched checkpoint never half-loads a model.

    Raises:
        CheckpointError: missing/truncated/corrupted file, or keys/shapes that do not match.
    """
    tensors, meta = load_tensors(path)
    if meta.get("kind") not in ("model", "training"):
        raise CheckpointError("format", f"{path} holds no model weights")
    if meta.get("kind") == "training":
        prefix = "model/"
        tensors = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    check_state(model.state_dict(), tensors, strict, str(path))
    return model.load_state_dict(tensors, strict=strict)


def check_state(
    expected: Mapping[str, Any], found: Mapping[str, np.ndarray[Any, Any]], strict: bool,
    where: str,
) -> None:
    """``CheckpointError("mismatch", ...)`` naming missing, unexpected and misshapen keys."""
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    shapes = [
        f"{k}: model {tuple(expected[k].shape)} vs checkpoint {tuple(found[k].shape)}"
        for k in sorted(set(expected) & set(found))
        if tuple(expected[k].shape) != tuple(found[k].shape)
    ]
    problems = []
    if strict and missing:
        problems.append(f"missing keys {missing}")
    if strict and unexpected:
        problems.append(f"unexpected keys {unexpected}")
    if shapes:
        problems.append("shape mismatch " + "; ".join(shapes))
    if problems:
        raise CheckpointError("mismatch", f"checkpoint {where} does not match the model: "
                              + ", ".join(problems))
