"""Full training checkpoints: model, optimizer, scheduler, epoch and RNG state in one file.

Tensors go in safetensors (``model/<name>``, ``optim/<index>/<state name>``); everything else
(optimizer hyper-parameters and step counts, scheduler state, epoch, RNG state) in the JSON
metadata. Written atomically with a checksum by :func:`netcl.io.save_tensors`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from netcl.io import CheckpointError, load_tensors, save_tensors
from netcl.io._model import check_state, to_numpy_state

__all__ = ["load_training_checkpoint", "save_training_checkpoint"]


def save_training_checkpoint(
    path: str | os.PathLike[str],
    model: Any,
    optimizer: Any,
    scheduler: Any = None,
    epoch: int = 0,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write everything needed to resume training exactly after ``epoch``."""
    tensors = {f"model/{k}": v for k, v in to_numpy_state(model.state_dict()).items()}
    opt_state = optimizer.state_dict()
    scalars: dict[str, dict[str, Any]] = {}
    for index, state in opt_state["state"].items():
        for name, value in state.items():
            if isinstance(value, np.ndarray):
                tensors[f"optim/{index}/{name}"] = value
            else:
                scalars.setdefault(str(index), {})[name] = value
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()}
              for g in opt_state["param_groups"]]
    meta = {
        "kind": "training",
        "epoch": int(epoch),
        "optimizer": {"param_groups": groups, "scalars": scalars},
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "extra": extra or {},
    }
    return save_tensors(path, tensors, meta)


def load_training_checkpoint(
    path: str | os.PathLike[str], model: Any, optimizer: Any, scheduler: Any = None
) -> dict[str, Any]:
    """Restore a checkpoint written by :func:`save_training_checkpoint`; returns its metadata.

    Every model key and shape is checked before anything is written.

    Raises:
        CheckpointError: missing, truncated, corrupted, or not matching the model.
    """
    tensors, meta = load_tensors(path)
    if meta.get("kind") != "training":
        raise CheckpointError("format", f"{path} is not a training checkpoint")
    model_state = {k[6:]: v for k, v in tensors.items() if k.startswith("model/")}
    check_state(model.state_dict(), model_state, True, str(path))
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("optim/"):
            _, index, name = key.split("/", 2)
            state.setdefault(int(index), {})[name] = value
    for index, scalars in meta["optimizer"]["scalars"].items():
        state.setdefault(int(index), {}).update(scalars)
    groups = [{k: (tuple(v) if k == "betas" else v) for k, v in g.items()}
              for g in meta["optimizer"]["param_groups"]]
    optimizer_state = {"state": state, "param_groups": groups}
    optimizer.load_state_dict(optimizer_state)  # validates before it changes anything
    model.load_state_dict(model_state)  # already validated by check_state
    if scheduler is not None and meta.get("scheduler") is not None:
        scheduler.load_state_dict(meta["scheduler"])
    return dict(meta)
