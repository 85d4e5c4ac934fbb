"""``Trainer``: the training loop with a tqdm progress bar, per-epoch metrics, periodic
checkpoints, exact resume, and a stop with :class:`DivergenceError` when the loss stops being
finite (NOTE [ Checking the loss without a sync per step ] in :mod:`._divergence`)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

import netcl.autograd as ag
import netcl.ops as ops
from netcl.core.device import DeviceHandle, get_active_device
from netcl.core.tensor import Tensor
from netcl.io import CheckpointError
from netcl.metrics import Metric
from netcl.nn.amp import GradScaler, autocast
from netcl.runtime import Prefetcher

from ._checkpoint import (
    read_training_checkpoint,
    restore_training_state,
    save_training_checkpoint,
)
from ._divergence import CHECK_EVERY, DivergenceError
from ._loggers import MetricsLogger
from ._step import ScalarTally, TrainStep, hits

__all__ = ["EpochMetrics", "Trainer"]

LossFn = Callable[[Tensor, Tensor], Tensor]
EpochCallback = Callable[["EpochMetrics"], None]


@dataclass
class EpochMetrics:
    """What one epoch measured."""

    epoch: int
    train_loss: float
    train_accuracy: float
    val_loss: float | None = None
    val_accuracy: float | None = None
    lr: float = 0.0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class Trainer:
    """Train ``model`` with ``optimizer`` on batches from ``train_loader``.

    Args:
        model: a :class:`netcl.nn.Module` already on ``device``.
        optimizer: a :class:`netcl.optim.Optimizer` over the model's parameters.
        loss_fn: ``loss_fn(logits, labels) -> scalar Tensor`` (e.g. ``ag.cross_entropy``).
        train_loader: yields ``(x, y)`` NumPy batches (a :class:`netcl.data.DataLoader`).
        val_loader: optional held-out batches, evaluated after every epoch.
        device: where to compute (default: the active device).
        epochs: how many epochs :meth:`fit` runs in total.
        scheduler: stepped once per epoch after the optimizer.
        checkpoint_dir: where ``last.netcl`` is written every ``checkpoint_every`` epochs.
        resume: continue from ``checkpoint_dir/last.netcl`` when it exists.
        progress: show a tqdm bar per epoch.
        amp: mixed precision: the forward runs under :func:`netcl.nn.amp.autocast`, the loss
            is computed on float32 logits, and a :class:`netcl.nn.amp.GradScaler` scales it
            (its state is saved in the checkpoint). The scaler decides on the device whether
            the optimizer steps; its per-step "skipped" flag is tallied on the device with the
            losses, so AMP steps need no host read and are captured too.
        on_epoch_end: called with each epoch's :class:`EpochMetrics` as soon as the epoch
            (and its checkpoint, when one is due) is done, e.g. to print a line per epoch.
        capture: on an OpenCL device, capture the training step (forward, backward, optimizer
            and scaler) with :func:`netcl.runtime.capture` after its first call and replay it
            for every batch of that shape (NOTE [ The captured training step ] in
            :mod:`._step`); the results equal eager training bitwise. ``False`` runs every
            step eagerly. A step that cannot be captured warns once and runs eagerly.
        prefetch: upload the next batch on a second command queue while the current step
            runs (:class:`netcl.runtime.Prefetcher`; the NumPy backend has nothing to overlap).
        loggers: where metrics go besides the history, e.g. a :class:`CSVLogger` and a
            :class:`TensorBoardLogger`: after every epoch the tags ``epoch``,
            ``epoch/train_loss``, ``epoch/train_accuracy``, ``epoch/val_loss``,
            ``epoch/val_accuracy``, ``epoch/lr`` and ``epoch/seconds`` (plus ``epoch/<key>``
            for numbers in ``EpochMetrics.extra``), at the global step (training steps done
            so far). The Trainer flushes but does not close them.
        metrics: :mod:`netcl.metrics` accumulators (e.g. ``{"f1": F1Score(10)}``) updated on
            the device with every held-out batch's logits and labels and read once per epoch:
            ``EpochMetrics.extra["val_<name>"]`` (a list for per-class values), logged as
            ``epoch/val_<name>`` (``epoch/val_<name>/<class>``). Needs ``val_loader``.
        log_every: also log ``step/loss``, ``step/accuracy`` and ``step/lr`` over each run
            of ``log_every`` steps. The values come from the reads the divergence check makes
            anyway (every 16 steps), so an interval is logged when its steps are read back,
            never with an extra device sync.
        input_dtype: the device dtype of each batch's inputs (``"float32"``; ``None`` keeps
            the host dtype, e.g. a language model's int32 token ids).
        class_axis: the logits' class axis for accuracy (1: PyTorch's ``(N, C, ...)``; -1
            for a sequence model's ``(N, T, C)``). Accuracy counts every label: tokens for a
            language model, rows for a classifier.
        perplexity: also report ``exp(loss)`` of each epoch, as ``train_perplexity`` and
            ``val_perplexity`` in ``EpochMetrics.extra`` (logged as ``epoch/...``).

    Raises:
        ValueError: ``epochs < 1``, or ``resume`` without a ``checkpoint_dir``.
        CheckpointError: ``resume`` found a checkpoint it cannot use (nothing is restored).

    The losses are read back every 16 steps and at the end of each epoch; when one is NaN or
    infinite, :meth:`fit` raises :class:`DivergenceError` naming the epoch, the step and the
    loss, and writes no checkpoint (the last good one stays). Under AMP, a non-finite loss on a
    step the GradScaler skipped is excused.

    Examples:
        >>> import numpy as np, netcl.autograd as ag
        >>> from netcl.core import manager
        >>> from netcl.nn import Linear
        >>> from netcl.optim import SGD
        >>> dev = manager.default("cpu")
        >>> model = Linear(2, 2, queue=dev.queue, rng=np.random.default_rng(0))
        >>> good = (np.ones((4, 2), np.float32), np.array([0, 1, 0, 1]))
        >>> bad = (np.full((4, 2), np.nan, np.float32), np.array([0, 1, 0, 1]))
        >>> ends = []
        >>> trainer = Trainer(model, SGD(model.parameters(), lr=0.1), ag.cross_entropy,
        ...                   [good, bad], device=dev, progress=False, on_epoch_end=ends.append)
        >>> try:
        ...     trainer.fit()
        ... except DivergenceError as err:
        ...     print(err.epoch, err.step, err.loss, len(ends))
        0 1 nan 0
    """

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        loss_fn: LossFn,
        train_loader: Any,
        val_loader: Any = None,
        device: DeviceHandle | None = None,
        epochs: int = 1,
        scheduler: Any = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        resume: bool = False,
        checkpoint_every: int = 1,
        progress: bool = True,
        amp: bool = False,
        on_epoch_end: EpochCallback | None = None,
        capture: bool = True,
        prefetch: bool = True,
        loggers: Sequence[MetricsLogger] = (),
        log_every: int | None = None,
        metrics: Mapping[str, Metric] | None = None,
        input_dtype: str | None = "float32",
        class_axis: int = 1,
        perplexity: bool = False,
    ) -> None:
        if epochs < 1:
            raise ValueError(f"Trainer: epochs must be >= 1, got {epochs}")
        if log_every is not None and (isinstance(log_every, bool)
                                      or not isinstance(log_every, int) or log_every < 1):
            raise ValueError(f"Trainer: log_every must be None or an integer >= 1, got "
                             f"{log_every!r}")
        for logger in loggers:
            if not callable(getattr(logger, "log_metrics", None)):
                raise TypeError(f"Trainer: loggers must have log_metrics(metrics, step), got "
                                f"{type(logger).__name__}")
        self.loggers, self.log_every = list(loggers), log_every
        self.metrics = dict(metrics or {})
        for name, metric in self.metrics.items():
            if not (callable(getattr(metric, "update", None))
                    and callable(getattr(metric, "compute", None))):
                raise TypeError(f"Trainer: metric {name!r} must have update() and compute() "
                                f"(a netcl.metrics.Metric), got {type(metric).__name__}")
        if self.metrics and val_loader is None:
            raise ValueError("Trainer: metrics are computed on the held-out batches; give a "
                             "val_loader")
        self.global_step = 0  # training steps done, over every epoch (the loggers' x axis)
        # the interval being summed for log_every (it may span the end of an epoch)
        self._interval = _Interval(self) if log_every and self.loggers else None
        if class_axis not in (1, -1):
            raise ValueError(f"Trainer: class_axis must be 1 (N, C, ...) or -1 (..., C), got "
                             f"{class_axis!r}")
        if resume and checkpoint_dir is None:
            raise ValueError("Trainer: resume=True needs a checkpoint_dir")
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.train_loader, self.val_loader = train_loader, val_loader
        self.device = device or get_active_device()
        self.epochs, self.scheduler = epochs, scheduler
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.checkpoint_every, self.progress = checkpoint_every, progress
        self.amp, self.on_epoch_end = amp, on_epoch_end
        self.input_dtype, self.class_axis, self.perplexity = input_dtype, class_axis, perplexity
        self.scaler = GradScaler(enabled=amp)  # disabled: every call passes straight through
        self.history: list[EpochMetrics] = []
        self.start_epoch = 0
        self.step = TrainStep(self._train_step, optimizer, self.scaler, capture=capture)
        self.prefetcher = Prefetcher(self.device.queue, dtypes=(input_dtype, None)) \
            if prefetch else None
        if resume and self.checkpoint_path is not None and self.checkpoint_path.exists():
            self._resume(self.checkpoint_path)

    def _resume(self, path: Path) -> None:
        """Check everything in ``path`` (history, scaler state included), then restore it."""
        tensors, meta = read_training_checkpoint(path)
        extra = meta["extra"]
        history = _history_of(extra.get("history", []), path)
        scaler_state = extra.get("grad_scaler") if self.amp else None
        if scaler_state:
            try:  # on a scratch scaler first: a bad state must not change anything
                GradScaler().load_state_dict(scaler_state)
            except (KeyError, RuntimeError, TypeError, ValueError, AttributeError) as err:
                raise CheckpointError("mismatch", f"checkpoint {path}: unusable grad_scaler "
                                      f"state: {err}") from None
        restore_training_state(tensors, meta, self.model, self.optimizer, self.scheduler,
                               str(path))
        self.start_epoch = int(meta["epoch"]) + 1
        self.history = history
        if hasattr(self.train_loader, "__len__"):
            self.global_step = self.start_epoch * len(self.train_loader)
        if scaler_state:
            self.scaler.load_state_dict(scaler_state)

    @property
    def checkpoint_path(self) -> Path | None:
        """``checkpoint_dir/last.netcl`` (``None`` without a checkpoint directory)."""
        return None if self.checkpoint_dir is None else self.checkpoint_dir / "last.netcl"

    def _on_device(self, batches: Any) -> Generator[tuple[Tensor, ...], None, None]:
        """``(x, y)`` host batches as device tensors (x in ``input_dtype``), uploaded one
        batch ahead on a copy queue when prefetching."""
        if self.prefetcher is not None:
            yield from self.prefetcher(batches)
            return
        q = self.device.queue
        for x, y in batches:
            yield Tensor.from_host(q, x, dtype=self.input_dtype), Tensor.from_host(q, y)

    @contextmanager
    def _batches(self, loader: Any, desc: str) -> Iterator[Any]:
        """``loader``, behind a progress bar that is closed (and erased) however the epoch
        ends: an error or Ctrl-C leaves no half-drawn bar above the message."""
        if not self.progress:
            yield loader
            return
        from tqdm.auto import tqdm

        bar = tqdm(loader, desc=desc, leave=False, dynamic_ncols=True)
        try:
            yield bar
        finally:
            bar.close()

    def _forward(self, xt: Tensor, yt: Tensor) -> tuple[Tensor, Tensor]:
        """(logits, loss): the model under autocast when ``amp``, the loss in float32."""
        with autocast(enabled=self.amp):
            logits = self.model(xt)
        if logits.dtype == "float16":  # whatever loss_fn is, it sees float32 logits
            logits = ag.ops.cast(logits, "float32")
        return logits, self.loss_fn(logits, yt)

    def _hits(self, logits: Tensor, yt: Tensor) -> Tensor:
        """The batch's correct predictions, as a device scalar."""
        if self.class_axis == 1 or logits.ndim == 2:
            return hits(logits, yt)
        classes = logits.shape[-1]  # (..., C): rows of C scores, a view
        return hits(ops.reshape(logits, (-1, classes)), ops.reshape(yt, (-1,)))

    def _train_step(self, xt: Tensor, yt: Tensor) -> tuple[Tensor, ...]:
        """One complete training step (what :class:`TrainStep` captures): returns the loss,
        the batch's hit count and, under AMP, the scaler's found-inf flag (1: this step was
        skipped), as device tensors."""
        with ag.Tape() as tape:
            logits, loss = self._forward(xt, yt)
            scaled = self.scaler.scale(loss)
        tape.backward(scaled)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
        found_inf = self.scaler.found_inf
        if found_inf is None:
            return loss, self._hits(logits, yt)
        return loss, self._hits(logits, yt), found_inf

    def train_epoch(self, epoch: int) -> tuple[float, float]:
        """One pass over ``train_loader``; returns (mean loss, accuracy).

        Raises:
            DivergenceError: a loss read back was NaN or infinite (see the class docstring).
        """
        self.model.train()
        if hasattr(self.train_loader, "set_epoch"):
            self.train_loader.set_epoch(epoch)  # resume draws the same batches
        tally = _Tally(self, epoch)
        with self._batches(self.train_loader, f"epoch {epoch + 1}/{self.epochs}") as bar:
            with closing(self._on_device(bar)) as batches:
                for xt, yt in batches:
                    tally.add(self.step(xt, yt), yt.size)
                    if tally.pending >= CHECK_EVERY:  # read back in groups, not per step
                        tally.drain()
                        if hasattr(bar, "set_postfix"):
                            bar.set_postfix(acc=f"{tally.accuracy:.3f}")
        tally.drain()
        self.step.sync()
        self.global_step += tally.step
        return tally.mean_loss, tally.accuracy

    def _log(self, values: dict[str, float | None], step: int) -> None:
        for logger in self.loggers:
            logger.log_metrics(values, step)

    def _log_epoch(self, m: EpochMetrics) -> None:
        values: dict[str, float | None] = {
            "epoch": m.epoch, "epoch/train_loss": m.train_loss,
            "epoch/train_accuracy": m.train_accuracy, "epoch/val_loss": m.val_loss,
            "epoch/val_accuracy": m.val_accuracy, "epoch/lr": m.lr, "epoch/seconds": m.seconds,
        }
        for key, value in m.extra.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                values[f"epoch/{key}"] = value
            elif isinstance(value, list) and all(isinstance(v, int | float) for v in value):
                values.update({f"epoch/{key}/{k}": v for k, v in enumerate(value)})
        self._log(values, self.global_step)
        for logger in self.loggers:
            flush = getattr(logger, "flush", None)
            if callable(flush):
                flush()

    def evaluate(self, loader: Any) -> tuple[float, float]:
        """Mean loss and accuracy over ``loader`` in eval mode, without recording."""
        self.model.eval()
        losses: list[Tensor] = []
        hit: list[Tensor] = []
        seen = 0
        for metric in self.metrics.values():
            metric.reset()
        with ag.no_grad(), closing(self._on_device(loader)) as batches:
            for xt, yt in batches:
                logits, loss = self._forward(xt, yt)
                losses.append(loss)
                hit.append(self._hits(logits, yt))
                for metric in self.metrics.values():
                    metric.update(logits, yt)  # device ops; read once, in fit
                seen += yt.size
        total_loss = float(_read_back(losses).sum())
        correct = int(_read_back(hit).sum())
        self.model.train()
        return total_loss / max(len(losses), 1), correct / max(seen, 1)

    def fit(self, stop_after: int | None = None) -> list[EpochMetrics]:
        """Run the remaining epochs (or stop once ``stop_after`` epochs are done, as an
        interruption would); returns the history of every epoch so far.

        Raises:
            DivergenceError: the loss became NaN or infinite, or the weights did (then no
                checkpoint is written over the last good one).
        """
        end = self.epochs if stop_after is None else min(self.epochs, stop_after)
        for epoch in range(self.start_epoch, end):
            start = time.perf_counter()
            train_loss, train_acc = self.train_epoch(epoch)
            metrics = EpochMetrics(epoch, train_loss, train_acc,
                                   lr=float(self.optimizer.param_groups[0]["lr"]))
            if self.val_loader is not None:
                metrics.val_loss, metrics.val_accuracy = self.evaluate(self.val_loader)
                for name, metric in self.metrics.items():
                    value = metric.compute()
                    metrics.extra[f"val_{name}"] = (value.tolist() if isinstance(value, np.ndarray)
                                                    else float(value))
            if self.perplexity:
                metrics.extra["train_perplexity"] = _perplexity(train_loss)
                if metrics.val_loss is not None:
                    metrics.extra["val_perplexity"] = _perplexity(metrics.val_loss)
            if self.scheduler is not None:
                self.scheduler.step()
            metrics.seconds = time.perf_counter() - start
            self.history.append(metrics)
            if self.loggers:
                self._log_epoch(metrics)
            if self.checkpoint_path is not None and (
                (epoch + 1) % self.checkpoint_every == 0 or epoch + 1 == self.epochs
            ):
                save_training_checkpoint(
                    self.checkpoint_path, self.model, self.optimizer, self.scheduler, epoch,
                    extra={"history": [vars(m) for m in self.history],
                           "grad_scaler": self.scaler.state_dict()},
                )
            if self.on_epoch_end is not None:
                self.on_epoch_end(metrics)
        return self.history


def _perplexity(loss: float) -> float:
    """``exp(loss)`` of a mean cross entropy in nats (inf past float range)."""
    return math.exp(loss) if loss < 700 else math.inf


def _read_back(scalars: list[Tensor]) -> np.ndarray[Any, Any]:
    """Device scalars as one host array, in one transfer."""
    if not scalars:
        return np.zeros(0)
    return np.asarray(ops.stack(scalars).to_host()).reshape(-1)


class _Tally:
    """One epoch's losses and hits, copied into device vectors (:class:`ScalarTally`) and read
    back by :meth:`drain`, which also checks the losses (NOTE [ Checking the loss without a
    sync per step ])."""

    def __init__(self, trainer: Trainer, epoch: int) -> None:
        self.trainer, self.epoch = trainer, epoch
        # (loss, hits[, found_inf]) of the steps not drained yet
        self.scalars = ScalarTally(CHECK_EVERY)
        self.step = 0  # steps drained so far
        self.loss_sum, self.counted, self.correct, self.seen = 0.0, 0, 0, 0
        self.rows: list[int] = []  # labels (rows, tokens) of the steps not drained yet
        self.interval = trainer._interval

    @property
    def pending(self) -> int:
        """Steps added since the last :meth:`drain`."""
        return len(self.scalars)

    def add(self, outputs: tuple[Tensor, ...], rows: int) -> None:
        """Queue a step's loss, hit count and (AMP) found-inf flag: device scalars, copied
        now (a replay overwrites them)."""
        self.scalars.put(*outputs)
        self.seen += rows
        self.rows.append(rows)

    @property
    def mean_loss(self) -> float:
        return self.loss_sum / max(self.counted, 1)

    @property
    def accuracy(self) -> float:
        return self.correct / max(self.seen, 1)

    def drain(self) -> None:
        """Read the queued losses and hits back; raise on a loss that diverged."""
        if not self.pending:
            return
        columns = self.scalars.read()
        losses = columns[0].astype(np.float64)
        self.correct += int(columns[1].sum())
        # the GradScaler skipped a step whose gradients held inf/NaN
        skipped = columns[2] != 0 if len(columns) > 2 else np.zeros(len(losses), bool)
        first_step, self.step = self.step, self.step + len(losses)
        finite = np.isfinite(losses)
        for i in np.flatnonzero(~finite):
            if not skipped[i] or not finite.any():
                self._diverged(first_step + int(i), float(losses[i]), bool(skipped[i]))
        self.loss_sum += float(losses[finite].sum())
        self.counted += int(finite.sum())
        rows, self.rows = self.rows[:len(losses)], self.rows[len(losses):]
        if self.interval is not None:
            self.interval.add(first_step, losses, columns[1], rows)

    def _diverged(self, step: int, loss: float, skipped: bool) -> None:
        t = self.trainer
        steps = f" of {len(t.train_loader)}" if hasattr(t.train_loader, "__len__") else ""
        why = (" and every loss since the last check was non-finite, though the GradScaler "
               "skipped those steps" if skipped else "")
        kept = (f"; {t.checkpoint_path} was not overwritten" if t.checkpoint_path
                is not None and t.checkpoint_path.exists() else "")
        lr = float(t.optimizer.param_groups[0]["lr"])
        raise DivergenceError(
            f"Trainer: training diverged: the loss is {loss} at epoch {self.epoch + 1}, "
            f"step {step + 1}{steps}{why} (lr {lr:g}); lower the learning rate or clip the "
            f"gradients{kept}",
            epoch=self.epoch, step=step, loss=loss,
        )


class _Interval:
    """Per-interval logging (``Trainer(log_every=k)``): folds in the steps each drain reads
    back and logs every ``k``-th global step's interval."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.every = int(trainer.log_every or 1)
        self.loss_sum, self.counted, self.hits, self.rows = 0.0, 0, 0, 0

    def add(self, first_step: int, losses: np.ndarray[Any, Any], hits: np.ndarray[Any, Any],
            rows: list[int]) -> None:
        t = self.trainer
        for i, loss in enumerate(losses.tolist()):
            if math.isfinite(loss):
                self.loss_sum += loss
                self.counted += 1
            self.hits += int(hits[i])
            self.rows += rows[i] if i < len(rows) else 0
            step = t.global_step + first_step + i + 1
            if step % self.every == 0:
                t._log({"step/loss": self.loss_sum / max(self.counted, 1),
                        "step/accuracy": self.hits / max(self.rows, 1),
                        "step/lr": float(t.optimizer.param_groups[0]["lr"])}, step)
                self.loss_sum, self.counted, self.hits, self.rows = 0.0, 0, 0, 0


def _history_of(saved: Any, path: Path) -> list[EpochMetrics]:
    """The ``EpochMetrics`` a checkpoint's ``extra.history`` holds, each field checked."""
    numbers = {"epoch", "train_loss", "train_accuracy", "lr", "seconds"}
    names = {f.name for f in fields(EpochMetrics)}

    def fits(key: str, value: Any) -> bool:
        if key == "extra":
            return isinstance(value, dict)
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return is_number or (value is None and key not in numbers)

    if isinstance(saved, list) and all(
        isinstance(m, dict) and numbers <= set(m) <= names
        and all(fits(k, v) for k, v in m.items()) for m in saved
    ):
        return [EpochMetrics(**{**m, "epoch": int(m["epoch"])}) for m in saved]
    shown = repr(saved)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise CheckpointError("format", f"training checkpoint {path}: extra.history must be a list "
                          f"of epoch metrics, got {shown}")
