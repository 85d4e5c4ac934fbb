"""Full training checkpoints: model, optimizer, scheduler, epoch and RNG state in one file.

Tensors go in safetensors (``model/<name>``, ``optim/<index>/<state name>``); everything else
(optimizer hyper-parameters and step counts, scheduler state, epoch, RNG state) in the JSON
metadata. Written atomically with a checksum by :func:`netcl.io.save_tensors`.

A file that passes the checksum is still checked field by field before anything is restored
(:func:`read_training_checkpoint`, :func:`restore_training_state`): a checkpoint that lacks the
optimizer state, or holds a scheduler state of the wrong shape, is a :class:`CheckpointError`
naming the field, never a ``KeyError`` halfway through a resume.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from netcl.io import CheckpointError, load_tensors, save_tensors
from netcl.io._model import check_state, to_numpy_state

from ._divergence import DivergenceError, non_finite_report

__all__ = ["load_training_checkpoint", "read_training_checkpoint", "restore_training_state",
           "save_training_checkpoint"]

_OPTIM_KEY = re.compile(r"optim/(0|[1-9][0-9]{0,8})/(.+)")


def save_training_checkpoint(
    path: str | os.PathLike[str],
    model: Any,
    optimizer: Any,
    scheduler: Any = None,
    epoch: int = 0,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write everything needed to resume training exactly after ``epoch``.

    Raises:
        DivergenceError: a model parameter, buffer or optimizer state holds NaN or inf; the
            file at ``path`` (the last good checkpoint, if any) is left as it was.
    """
    tensors = {f"model/{k}": v for k, v in to_numpy_state(model.state_dict()).items()}
    opt_state = optimizer.state_dict()
    scalars: dict[str, dict[str, Any]] = {}
    for index, state in opt_state["state"].items():
        for name, value in state.items():
            if isinstance(value, np.ndarray):
                tensors[f"optim/{index}/{name}"] = value
            else:
                scalars.setdefault(str(index), {})[name] = value
    bad = non_finite_report(tensors)
    if bad:
        raise DivergenceError(f"save_training_checkpoint: refusing to write {path} after epoch "
                              f"{epoch + 1}: {bad}", epoch=epoch)
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

    Every model key and shape, the optimizer's groups and state, and the scheduler's state are
    checked before anything is written.

    Raises:
        CheckpointError: missing, truncated, corrupted, or not matching the model, optimizer
            or scheduler.
    """
    tensors, meta = read_training_checkpoint(path)
    restore_training_state(tensors, meta, model, optimizer, scheduler, str(path))
    return meta


def read_training_checkpoint(
    path: str | os.PathLike[str],
) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, Any]]:
    """Load and check a training checkpoint's tensors and metadata without restoring anything.

    Raises:
        CheckpointError: the file is unusable, not a training checkpoint, or a metadata field
            is missing or of the wrong type (named).
    """
    tensors, meta = load_tensors(path)
    if meta.get("kind") != "training":
        raise CheckpointError("format", f"{path} is not a training checkpoint")

    def wrong(field: str, expected: str, value: Any) -> CheckpointError:
        return CheckpointError("format", f"training checkpoint {path}: {field} must be "
                               f"{expected}, got {_short(value)}")

    epoch = meta.get("epoch")
    if not _is_int(epoch) or epoch < 0:
        raise wrong("epoch", "an int >= 0", epoch)
    opt = meta.get("optimizer")
    if not isinstance(opt, dict) or set(opt) != {"param_groups", "scalars"}:
        raise wrong("optimizer", "the optimizer state (an object of param_groups and scalars)",
                    opt)
    groups = opt["param_groups"]
    if not isinstance(groups, list) or not all(
        isinstance(g, dict) and isinstance(g.get("params"), list)
        and all(_is_int(i) for i in g["params"]) for g in groups
    ):
        raise wrong("optimizer.param_groups", "a list of objects with integer params", groups)
    scalars = opt["scalars"]
    if not isinstance(scalars, dict) or not all(
        isinstance(s, dict) and _OPTIM_KEY.fullmatch(f"optim/{i}/x") for i, s in scalars.items()
    ):
        raise wrong("optimizer.scalars", "an object of per-parameter objects keyed by index",
                    scalars)
    if meta.get("scheduler") is not None and not isinstance(meta["scheduler"], dict):
        raise wrong("scheduler", "an object or null", meta["scheduler"])
    if not isinstance(meta.get("extra", {}), dict):
        raise wrong("extra", "an object", meta["extra"])
    meta.setdefault("extra", {})
    return tensors, meta


def restore_training_state(
    tensors: Mapping[str, np.ndarray[Any, Any]],
    meta: Mapping[str, Any],
    model: Any,
    optimizer: Any,
    scheduler: Any = None,
    where: str = "checkpoint",
) -> None:
    """Put what :func:`read_training_checkpoint` returned into ``model``, ``optimizer`` and
    ``scheduler``, after checking all of it against them (nothing changes on an error).

    Raises:
        CheckpointError: ``"mismatch"`` naming the keys, shapes, groups or fields that differ.
    """
    model_state = {k[6:]: v for k, v in tensors.items() if k.startswith("model/")}
    check_state(model.state_dict(), model_state, True, where)
    optimizer_state = _optimizer_state(tensors, meta["optimizer"], optimizer, where)
    sched_state: dict[str, Any] = meta.get("scheduler") or {}
    if scheduler is not None:
        if not sched_state:
            raise _mismatch(where, "it holds no scheduler state, but a scheduler was given")
        _check_same_layout(sched_state, scheduler.state_dict(), "scheduler", where)
    try:
        optimizer.load_state_dict(optimizer_state)  # validates before it changes anything
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise _mismatch(where, f"the optimizer state does not fit: {err}") from None
    model.load_state_dict(model_state)  # already validated by check_state
    if scheduler is not None:
        scheduler.load_state_dict(sched_state)


def _optimizer_state(tensors: Mapping[str, np.ndarray[Any, Any]], saved: Mapping[str, Any],
                     optimizer: Any, where: str) -> dict[str, Any]:
    """The ``optimizer.state_dict()``-shaped state in the file, checked against ``optimizer``."""
    current = optimizer.state_dict()
    n_params = sum(len(g["params"]) for g in current["param_groups"])
    groups = saved["param_groups"]
    if len(groups) != len(current["param_groups"]):
        raise _mismatch(where, f"{len(groups)} optimizer param groups in the file, "
                        f"{len(current['param_groups'])} in the optimizer")
    restored_groups = []
    for i, (theirs, mine) in enumerate(zip(groups, current["param_groups"])):
        _check_same_layout(theirs, mine, f"optimizer param group {i}", where)
        restored_groups.append({k: (tuple(v) if isinstance(mine[k], tuple) else v)
                                for k, v in theirs.items()})
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if not key.startswith("model/"):
            match = _OPTIM_KEY.fullmatch(key)
            if match is None or int(match[1]) >= n_params:
                raise _mismatch(where, f"tensor {key!r} is neither model/<name> nor "
                                f"optim/<index below {n_params}>/<name>")
            state.setdefault(int(match[1]), {})[match[2]] = value
    for index, values in saved["scalars"].items():
        if int(index) >= n_params:
            raise _mismatch(where, f"optimizer scalars for parameter {index}, the optimizer "
                            f"has {n_params}")
        if not all(_is_number(v) for v in values.values()):
            raise _mismatch(where, f"optimizer scalars of parameter {index} must be numbers, "
                            f"got {_short(values)}")
        state.setdefault(int(index), {}).update(values)
    return {"state": state, "param_groups": restored_groups}


def _check_same_layout(theirs: Any, mine: Mapping[str, Any], what: str, where: str) -> None:
    """``theirs`` has ``mine``'s keys, and each value is of the same kind (number, list, ...)."""
    if not isinstance(theirs, dict):
        raise _mismatch(where, f"the {what} must be an object, got {_short(theirs)}")
    missing, unexpected = sorted(set(mine) - set(theirs)), sorted(set(theirs) - set(mine))
    if missing or unexpected:
        raise _mismatch(where, f"the {what} has missing keys {missing} and unexpected keys "
                        f"{unexpected}")
    for key in sorted(mine):
        if key != "params" and not _compatible(theirs[key], mine[key]):
            raise _mismatch(where, f"the {what}'s {key!r} is {_short(theirs[key])}, expected "
                            f"a value like {_short(mine[key])}")
    if "params" in mine and len(theirs["params"]) != len(mine["params"]):
        raise _mismatch(where, f"the {what} has {len(theirs['params'])} parameters in the file, "
                        f"{len(mine['params'])} here")


def _compatible(theirs: Any, mine: Any) -> bool:
    """Whether a value read from JSON can stand for ``mine``: both numbers (int or float), lists
    of compatible values of one length, objects of the same keys, values of one type, or
    either ``None`` (a state that is not set yet)."""
    if theirs is None or mine is None:
        return True
    if isinstance(theirs, (list, tuple)) and isinstance(mine, (list, tuple)):
        return len(theirs) == len(mine) and all(map(_compatible, theirs, mine))
    if isinstance(theirs, dict) and isinstance(mine, dict):
        return set(theirs) == set(mine) and all(_compatible(theirs[k], mine[k]) for k in mine)
    if _is_number(theirs) and _is_number(mine):
        return True
    return type(theirs) is type(mine)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _mismatch(where: str, problem: str) -> CheckpointError:
    return CheckpointError("mismatch", f"checkpoint {where} does not match the training run: "
                           f"{problem}")
