"""``train_digits_parallel``: the digits job data-parallel over N processes on this host.

Each rank is a spawned process in a shared-memory process group
(:func:`netcl.distributed.init_process_group`), training the digits CNN (its BatchNorms made
:class:`~netcl.distributed.SyncBatchNorm`) wrapped in
:class:`~netcl.distributed.DistributedDataParallel` on its shard of every epoch
(:class:`netcl.data.DistributedSampler`, ``batch_size / N`` samples per rank, so a step sees
the one-process global batch of ``batch_size``). Every rank resumes from the same
checkpoint; rank 0 alone writes it (``checkpoint_dir/last.netcl``, the one-process format,
so a parallel run resumes a one-process run and back). Rank 0's epoch metrics (the training
loss and accuracy of its shard, the held-out metrics of the shared weights) travel to this
process, which calls ``cfg.on_epoch_end`` with each as it arrives.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import uuid
from dataclasses import replace
from typing import Any

from netcl.autograd import cross_entropy
from netcl.core.device import DeviceHandle, device
from netcl.data import DataLoader, DigitsDataset, DistributedSampler, random_split
from netcl.distributed import (
    DistributedDataParallel,
    SyncBatchNorm,
    destroy_process_group,
    init_process_group,
)
from netcl.optim import Adam, CosineAnnealingLR

from ._digits import DigitsConfig, digits_cnn
from ._trainer import EpochMetrics, Trainer

__all__ = ["train_digits_parallel"]

_POLL_S = 0.2


def _rank_main(cfg: DigitsConfig, rank: int, world: int, job: str, out: Any) -> None:
    group = init_process_group("shm", rank=rank, world_size=world, dist_id=job)
    try:
        dev_name = group.device() if cfg.device == "auto" else cfg.device
        with device(dev_name) as dev:
            data = DigitsDataset()
            train_set, test_set = random_split(data, [0.8, 0.2], seed=cfg.seed)
            sampler = DistributedSampler(train_set, world, rank, seed=cfg.seed)
            train_loader = DataLoader(train_set, batch_size=cfg.batch_size // world,
                                      sampler=sampler, num_workers=cfg.workers)
            test_loader = DataLoader(test_set, batch_size=256)
            # SyncBatchNorm: the statistics of the global batch, so N ranks train as one
            model = SyncBatchNorm.convert_sync_batchnorm(digits_cnn(dev.queue, cfg.seed), group)
            ddp = DistributedDataParallel(model, group, broadcast_buffers=False)
            optimizer = Adam(model.parameters(), lr=cfg.lr)
            scheduler = CosineAnnealingLR(optimizer, T_max=cfg.epochs)

            def report(m: EpochMetrics) -> None:
                if rank == 0:
                    out.put(("epoch", m))

            trainer = Trainer(ddp, optimizer, cross_entropy, train_loader, test_loader,
                              device=dev, epochs=cfg.epochs, scheduler=scheduler,
                              checkpoint_dir=cfg.checkpoint_dir, resume=cfg.resume,
                              progress=cfg.progress and rank == 0, amp=cfg.amp,
                              on_epoch_end=report, capture=False)
            if rank != 0:
                trainer.checkpoint_dir = None  # resumed from it; rank 0 alone writes it
            for restored in trainer.history:
                report(restored)
            trainer.fit(stop_after=cfg.stop_after)
            group.backend.barrier()
        out.put(("done", rank))
    finally:
        destroy_process_group()


def _selector(dev: str | DeviceHandle) -> str:
    """A selector string the ranks can open (a handle does not cross a process boundary)."""
    if isinstance(dev, str):
        return dev
    return "cpu" if dev.backend == "cpu" else str(dev.platform_name).strip()


def train_digits_parallel(cfg: DigitsConfig, nprocs: int) -> list[EpochMetrics]:
    """Train the digits CNN data-parallel on ``nprocs`` processes; rank 0's epoch metrics.

    ``cfg.batch_size`` is the global batch (each rank takes ``batch_size // nprocs``, so a
    batch size that ``nprocs`` does not divide trains on a slightly smaller global batch);
    ``cfg.device`` ``"auto"`` gives each rank its device (:func:`netcl.distributed.
    device_for_rank`: its own where there are several of the best kind, else shared); a
    :class:`DeviceHandle` is passed on as its platform's name.
    ``cfg.on_epoch_end`` is called in this process with rank 0's metrics as they arrive;
    ``csv_log``, ``tensorboard_dir`` and ``log_every`` are not used, and the training step is
    not captured (the gradient hooks read the device).

    Raises:
        ValueError: ``nprocs < 1`` or ``batch_size < nprocs``.
        RuntimeError: a rank failed or died (named, with its exit code); the others are
            stopped.
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"train_digits_parallel: nprocs must be an integer >= 1, got {nprocs!r}")
    if cfg.batch_size < nprocs:
        raise ValueError(f"train_digits_parallel: batch_size ({cfg.batch_size}) must be at least "
                         f"nprocs ({nprocs}): it is the global batch split over the ranks")
    callback = cfg.on_epoch_end
    child_cfg = replace(cfg, device=_selector(cfg.device), on_epoch_end=None, csv_log=None,
                        tensorboard_dir=None, log_every=None)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    job = uuid.uuid4().hex[:16]
    procs = [ctx.Process(target=_rank_main, args=(child_cfg, r, nprocs, job, out),
                         name=f"netcl-rank-{r}") for r in range(nprocs)]
    for p in procs:
        p.start()
    history: list[EpochMetrics] = []
    done: set[int] = set()
    try:
        while len(done) < nprocs:
            try:
                kind, value = out.get(timeout=_POLL_S)
            except queue_mod.Empty:
                failed = [(r, p.exitcode) for r, p in enumerate(procs)
                          if p.exitcode not in (None, 0)]
                if failed:
                    raise RuntimeError("train_digits_parallel: " + ", ".join(
                        f"rank {r} exited with code {code}" for r, code in failed)) from None
                continue
            if kind == "epoch":
                history.append(value)
                if callback is not None:
                    callback(value)
            else:
                done.add(int(value))
        for p in procs:
            p.join()
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join()
    return history
