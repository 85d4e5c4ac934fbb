"""Where the Trainer writes its metrics: a CSV file (:class:`CSVLogger`) and TensorBoard event
files (:class:`TensorBoardLogger`, through ``tensorboardX``).

A logger takes ``log_metrics(metrics, step)``: scalar values keyed by TensorBoard-style tags
(``"epoch/train_loss"``, ``"step/loss"``) at a global step (the number of training steps done).
The :class:`~netcl.trainer.Trainer` calls it once per epoch and, with ``log_every=k``, once per
``k`` steps; every value it passes was already read back for the divergence check, so logging
adds no device sync.

# NOTE [ Why tensorboardX ]
TensorBoard's event format is TFRecord framing around ``Event`` protocol buffers. The
maintained writers are ``tensorboardX`` (pure Python; needs numpy, packaging and protobuf: an
88 kB wheel plus a 340 kB protobuf wheel, measured with ``pip download tensorboardX``),
``torch.utils.tensorboard`` (needs torch, and the ``tensorboard`` package: a 5.5 MB wheel that
pulls grpcio, absl-py, markdown, werkzeug, setuptools and tensorboard-data-server) and
TensorFlow's ``tf.summary`` (larger still). tensorboardX writes the same files for scalars and
installs in a second, so it is the optional extra ``netcl[tensorboard]``; nothing else in netcl
imports it (``tensorboard --logdir`` itself is only needed to look at the files).
"""

from __future__ import annotations

import csv
import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

__all__ = ["CSVLogger", "MetricsLogger", "TensorBoardLogger"]


class MetricsLogger(Protocol):
    """What the Trainer needs of a logger."""

    def log_metrics(self, metrics: Mapping[str, float | None], step: int) -> None:
        """Record ``metrics`` (tag -> value; ``None`` is skipped) at global step ``step``."""

    def close(self) -> None:
        """Flush and release the file."""


def _check_metrics(op: str, metrics: Mapping[str, float | None], step: int) -> dict[str, float]:
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"{op}: step must be an integer >= 0, got {step!r}")
    out = {}
    for tag, value in metrics.items():
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"{op}: metric names must be non-empty strings, got {tag!r}")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{op}: metric {tag!r} must be a number, got "
                            f"{type(value).__name__}")
        out[tag] = float(value)
    return out


class CSVLogger:
    """Metrics as rows of a CSV file: ``step``, then one column per tag.

    Rows with different tags (epoch rows and per-interval rows) share one file, cells left
    empty where a row has no value. When a row brings a new tag, the file is rewritten with
    the wider header (rows are few: one per epoch and one per interval), so the file is a
    valid CSV after every call.

    Args:
        path: the CSV file (its folder is created).
        append: keep the rows of an existing file (a resumed run), else start a new one.

    Examples:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "metrics.csv")
        >>> log = CSVLogger(path)
        >>> log.log_metrics({"step/loss": 0.75}, step=16)
        >>> log.log_metrics({"epoch/train_loss": 0.5, "epoch/val_accuracy": None}, step=20)
        >>> log.close()
        >>> print(open(path).read().strip())
        step,step/loss,epoch/train_loss
        16,0.75,
        20,,0.5
    """

    def __init__(self, path: str | os.PathLike[str], append: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.columns: list[str] = ["step"]
        self.rows: list[dict[str, str]] = []
        if append and self.path.exists():
            with self.path.open(newline="") as f:
                reader = csv.DictReader(f)
                if reader.fieldnames and reader.fieldnames[0] == "step":
                    self.columns = list(reader.fieldnames)
                    self.rows = [dict(r) for r in reader]
        self._rewrite()

    def log_metrics(self, metrics: Mapping[str, float | None], step: int) -> None:
        values = _check_metrics("CSVLogger.log_metrics", metrics, step)
        row = {"step": str(step), **{k: repr(v) for k, v in values.items()}}
        self.rows.append(row)
        new = [k for k in values if k not in self.columns]
        if new:
            self.columns.extend(new)
            self._rewrite()
            return
        with self.path.open("a", newline="") as f:
            csv.DictWriter(f, self.columns).writerow(row)

    def _rewrite(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, self.columns)
            writer.writeheader()
            writer.writerows(self.rows)
        os.replace(tmp, self.path)

    def close(self) -> None:
        """Nothing stays open between calls; kept for the logger interface."""


def _summary_writer() -> Any:
    try:
        return importlib.import_module("tensorboardX").SummaryWriter
    except ImportError as err:
        raise ImportError(
            "TensorBoardLogger needs the tensorboardX package: pip install 'netcl[tensorboard]' "
            f"(or pip install tensorboardX); import failed with: {err}"
        ) from err


class TensorBoardLogger:
    """Metrics as TensorBoard scalars (event files under ``log_dir``, via tensorboardX).

    Args:
        log_dir: the run's folder (``tensorboard --logdir`` its parent to compare runs).
        flush_secs: how often tensorboardX flushes pending events to disk.

    Raises:
        ImportError: tensorboardX is not installed (names the ``netcl[tensorboard]`` extra).

    Examples:
        >>> log = TensorBoardLogger("runs/digits")  # doctest: +SKIP
        >>> log.log_metrics({"epoch/train_loss": 0.31}, step=23)  # doctest: +SKIP
        >>> log.close()  # doctest: +SKIP
    """

    def __init__(self, log_dir: str | os.PathLike[str], flush_secs: int = 10) -> None:
        writer = _summary_writer()
        self.log_dir = Path(log_dir)
        self._writer = writer(logdir=str(self.log_dir), flush_secs=flush_secs)

    def log_metrics(self, metrics: Mapping[str, float | None], step: int) -> None:
        for tag, value in _check_metrics("TensorBoardLogger.log_metrics", metrics,
                                         step).items():
            self._writer.add_scalar(tag, value, global_step=step)

    def flush(self) -> None:
        """Write pending events now."""
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
