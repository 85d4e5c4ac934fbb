"""``Trainer``: the training loop with a tqdm progress bar, per-epoch metrics, periodic
checkpoints and exact resume."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import netcl.autograd as ag
from netcl.core.device import DeviceHandle, get_active_device
from netcl.core.tensor import Tensor
from netcl.nn.amp import GradScaler, autocast

from ._checkpoint import load_training_checkpoint, save_training_checkpoint

__all__ = ["EpochMetrics", "Trainer"]

LossFn = Callable[[Tensor, Tensor], Tensor]


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
            (its state is saved in the checkpoint). Costs one 4-byte host read per step (the
            inf/NaN flag that decides whether the optimizer steps).
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
    ) -> None:
        if epochs < 1:
            raise ValueError(f"Trainer: epochs must be >= 1, got {epochs}")
        if resume and checkpoint_dir is None:
            raise ValueError("Trainer: resume=True needs a checkpoint_dir")
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.train_loader, self.val_loader = train_loader, val_loader
        self.device = device or get_active_device()
        self.epochs, self.scheduler = epochs, scheduler
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.checkpoint_every, self.progress = checkpoint_every, progress
        self.amp = amp
        self.scaler = GradScaler(enabled=amp)  # disabled: every call passes straight through
        self.history: list[EpochMetrics] = []
        self.start_epoch = 0
        if resume and self.checkpoint_path is not None and self.checkpoint_path.exists():
            meta = load_training_checkpoint(self.checkpoint_path, model, optimizer, scheduler)
            self.start_epoch = int(meta["epoch"]) + 1
            self.history = [EpochMetrics(**m) for m in meta["extra"].get("history", [])]
            if amp and meta["extra"].get("grad_scaler"):
                self.scaler.load_state_dict(meta["extra"]["grad_scaler"])

    @property
    def checkpoint_path(self) -> Path | None:
        """``checkpoint_dir/last.netcl`` (``None`` without a checkpoint directory)."""
        return None if self.checkpoint_dir is None else self.checkpoint_dir / "last.netcl"

    def _to_device(self, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]
                   ) -> tuple[Tensor, Tensor]:
        q = self.device.queue
        return Tensor.from_host(q, x, dtype="float32"), Tensor.from_host(q, y)

    def _batches(self, loader: Any, desc: str) -> Iterable[Any]:
        if not self.progress:
            return loader  # type: ignore[no-any-return]
        from tqdm.auto import tqdm

        return tqdm(loader, desc=desc, leave=False, dynamic_ncols=True)  # type: ignore[no-any-return]

    def _forward(self, xt: Tensor, yt: Tensor) -> tuple[Tensor, Tensor]:
        """(logits, loss): the model under autocast when ``amp``, the loss in float32."""
        with autocast(enabled=self.amp):
            logits = self.model(xt)
        if logits.dtype == "float16":  # whatever loss_fn is, it sees float32 logits
            logits = ag.ops.cast(logits, "float32")
        return logits, self.loss_fn(logits, yt)

    def train_epoch(self, epoch: int) -> tuple[float, float]:
        """One pass over ``train_loader``; returns (mean loss, accuracy)."""
        self.model.train()
        if hasattr(self.train_loader, "set_epoch"):
            self.train_loader.set_epoch(epoch)  # resume draws the same batches
        total_loss, correct, seen = 0.0, 0, 0
        pending: list[tuple[Tensor, Tensor]] = []  # (loss, hits) still on the device
        bar = self._batches(self.train_loader, f"epoch {epoch + 1}/{self.epochs}")
        for x, y in bar:
            xt, yt = self._to_device(x, y)
            with ag.Tape() as tape:
                logits, loss = self._forward(xt, yt)
                scaled = self.scaler.scale(loss)
            tape.backward(scaled)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad()
            pending.append((loss, _hits(logits, yt)))
            seen += len(y)
            if len(pending) >= 16:  # read results back in groups, not once per step
                loss_sum, hits = _drain(pending)
                total_loss, correct = total_loss + loss_sum, correct + hits
                if hasattr(bar, "set_postfix"):
                    bar.set_postfix(acc=f"{correct / max(seen, 1):.3f}")
        loss_sum, hits = _drain(pending)
        total_loss, correct = total_loss + loss_sum, correct + hits
        n_batches = max(len(self.train_loader), 1)
        return total_loss / n_batches, correct / max(seen, 1)

    def evaluate(self, loader: Any) -> tuple[float, float]:
        """Mean loss and accuracy over ``loader`` in eval mode, without recording."""
        self.model.eval()
        pending: list[tuple[Tensor, Tensor]] = []
        seen = 0
        with ag.no_grad():
            for x, y in loader:
                xt, yt = self._to_device(x, y)
                logits, loss = self._forward(xt, yt)
                pending.append((loss, _hits(logits, yt)))
                seen += len(y)
        batches = len(pending)
        total_loss, correct = _drain(pending)
        self.model.train()
        return total_loss / max(batches, 1), correct / max(seen, 1)

    def fit(self, stop_after: int | None = None) -> list[EpochMetrics]:
        """Run the remaining epochs (or stop once ``stop_after`` epochs are done, as an
        interruption would); returns the history of every epoch so far."""
        end = self.epochs if stop_after is None else min(self.epochs, stop_after)
        for epoch in range(self.start_epoch, end):
            start = time.perf_counter()
            train_loss, train_acc = self.train_epoch(epoch)
            metrics = EpochMetrics(epoch, train_loss, train_acc,
                                   lr=float(self.optimizer.param_groups[0]["lr"]))
            if self.val_loader is not None:
                metrics.val_loss, metrics.val_accuracy = self.evaluate(self.val_loader)
            if self.scheduler is not None:
                self.scheduler.step()
            metrics.seconds = time.perf_counter() - start
            self.history.append(metrics)
            if self.checkpoint_path is not None and (
                (epoch + 1) % self.checkpoint_every == 0 or epoch + 1 == self.epochs
            ):
                save_training_checkpoint(
                    self.checkpoint_path, self.model, self.optimizer, self.scheduler, epoch,
                    extra={"history": [vars(m) for m in self.history],
                           "grad_scaler": self.scaler.state_dict()},
                )
        return self.history


def _hits(logits: Tensor, labels: Tensor) -> Tensor:
    """How many rows' argmax equals the label, as a device scalar (no host read)."""
    from netcl import ops

    same = ops.eq(ops.argmax(logits, axis=1), labels)
    return ops.sum(ops.cast(same, "int32"))


def _drain(pending: list[tuple[Tensor, Tensor]]) -> tuple[float, int]:
    """Read back and clear queued (loss, hits) pairs: their loss sum and hit count."""
    loss_sum = sum(float(loss.to_host()) for loss, _ in pending)
    hits = sum(int(h.to_host()) for _, h in pending)
    pending.clear()
    return loss_sum, hits
