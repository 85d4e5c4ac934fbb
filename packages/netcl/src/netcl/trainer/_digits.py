"""The main job: a small CNN on the handwritten digits that scikit-learn ships (8x8, 10 classes).

Nothing is downloaded: scikit-learn carries the 1,797 images. The data is split 80/20 with a
seed; the held-out 20% is never trained on.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.autograd import cross_entropy
from netcl.core.device import DeviceHandle, device
from netcl.data import DataLoader, DigitsDataset, random_split
from netcl.nn import (
    BatchNorm2d,
    Conv2d,
    Flatten,
    Linear,
    MaxPool2d,
    Module,
    ReLU,
    Sequential,
)
from netcl.optim import Adam, CosineAnnealingLR

from ._loggers import CSVLogger, MetricsLogger, TensorBoardLogger
from ._trainer import EpochMetrics, Trainer

__all__ = ["DigitsConfig", "digits_cnn", "train_digits"]


def digits_cnn(queue: Any = None, seed: int = 0) -> Module:
    """Conv(1->16) BN ReLU, Conv(16->32) BN ReLU, MaxPool 2, Linear(512->10)."""
    rng = np.random.default_rng(seed)
    return Sequential(
        Conv2d(1, 16, 3, padding=1, queue=queue, rng=rng),
        BatchNorm2d(16, queue=queue),
        ReLU(),
        Conv2d(16, 32, 3, padding=1, queue=queue, rng=rng),
        BatchNorm2d(32, queue=queue),
        ReLU(),
        MaxPool2d(2),
        Flatten(),
        Linear(32 * 4 * 4, 10, queue=queue, rng=rng),
    )


@dataclass
class DigitsConfig:
    """Options of ``netcl train``."""

    device: str | DeviceHandle = "auto"
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-2
    seed: int = 0
    workers: int = 0
    checkpoint_dir: str | os.PathLike[str] | None = None
    resume: bool = False
    progress: bool = True
    stop_after: int | None = None  # stop after this many epochs (simulates an interruption)
    amp: bool = False  # mixed precision (autocast + GradScaler)
    capture: bool = True  # capture the training step on OpenCL devices (Trainer(capture=...))
    # called with each epoch's metrics: the epochs a resumed run restored first, then each new
    # epoch as soon as it ends (``netcl train`` prints its lines with it)
    on_epoch_end: Callable[[EpochMetrics], None] | None = None
    csv_log: str | os.PathLike[str] | None = None  # metrics CSV (CSVLogger; appended on resume)
    tensorboard_dir: str | os.PathLike[str] | None = None  # event files (TensorBoardLogger)
    log_every: int | None = None  # also log every k steps (Trainer(log_every=k))


def _loggers(cfg: DigitsConfig) -> list[MetricsLogger]:
    loggers: list[MetricsLogger] = []
    if cfg.tensorboard_dir is not None:  # first: a missing tensorboardX fails before training
        loggers.append(TensorBoardLogger(cfg.tensorboard_dir))
    if cfg.csv_log is not None:
        loggers.append(CSVLogger(cfg.csv_log, append=cfg.resume))
    return loggers


def train_digits(cfg: DigitsConfig) -> tuple[Trainer, list[EpochMetrics], DeviceHandle]:
    """Train the digits CNN; returns the trainer, its history and the device used."""
    loggers = _loggers(cfg)
    try:
        return _train(cfg, loggers)
    finally:
        for logger in loggers:
            logger.close()


def _train(cfg: DigitsConfig,
           loggers: list[MetricsLogger]) -> tuple[Trainer, list[EpochMetrics], DeviceHandle]:
    with device(cfg.device) as dev:
        data = DigitsDataset()
        train_set, test_set = random_split(data, [0.8, 0.2], seed=cfg.seed)
        train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True,
                                  seed=cfg.seed, num_workers=cfg.workers)
        test_loader = DataLoader(test_set, batch_size=256)
        model = digits_cnn(dev.queue, cfg.seed)
        optimizer = Adam(model.parameters(), lr=cfg.lr)
        scheduler = CosineAnnealingLR(optimizer, T_max=cfg.epochs)
        trainer = Trainer(model, optimizer, cross_entropy, train_loader, test_loader, device=dev,
                          epochs=cfg.epochs, scheduler=scheduler,
                          checkpoint_dir=cfg.checkpoint_dir, resume=cfg.resume,
                          progress=cfg.progress, amp=cfg.amp, on_epoch_end=cfg.on_epoch_end,
                          capture=cfg.capture, loggers=loggers, log_every=cfg.log_every)
        if cfg.on_epoch_end is not None:
            for restored in trainer.history:
                cfg.on_epoch_end(restored)
        history = trainer.fit(stop_after=cfg.stop_after)
    return trainer, history, dev
