"""Data-parallel ResNet-18 (CIFAR stem) training on N ranks, each on its own device (issue 21).

    netcl launch -n 2 benchmarks/bench_ddp_resnet.py [--amp] [--batch 128] [--out F.jsonl]
    mpiexec -n 2 python benchmarks/bench_ddp_resnet.py [...]    # MPI backend
    python benchmarks/bench_ddp_resnet.py [...]                 # one rank

Every rank builds ``netcl.nn.resnet18(stem="cifar")`` (same seed) on its device
(``--device auto``: :func:`netcl.distributed.device_for_rank`, so rank k of a host with several
GPUs takes GPU k; any other selector puts every rank on that device), wraps it in
:class:`netcl.distributed.DistributedDataParallel` (gradients all-reduced in buckets while the
backward runs) and trains with SGD (momentum 0.9), cross-entropy, float32 or AMP (float16
autocast with a GradScaler, as :class:`netcl.trainer.Trainer` does). The data is synthetic and
seeded: a few global batches of ``N * --batch`` images, rank r training on rows
``[r * batch, (r + 1) * batch)`` of each.

After ``--warmup`` steps, ``--steps`` steps are timed on every rank (barrier, device drained at
both ends); rank 0 prints the slowest rank's step time and the global images per second, and
appends one JSON line to ``--out``. Rank 0 writes a full training checkpoint at the end
(:func:`netcl.trainer.save_training_checkpoint`) and reads it back.

``--check-weights`` (its BatchNorms made :class:`~netcl.distributed.SyncBatchNorm`, so the N
ranks normalise over the global batch as one process does): rank 0 then trains a fresh model
in this process, on its device, for the same steps on the whole global batches, and prints the
largest difference between the two models' parameters and buffers, relative to the largest
magnitude of each tensor (and relative to how far each parameter moved). It exits 1 when that
exceeds 1e-4 in float32; under AMP when the difference's norm over the update's norm exceeds
twice that of one process trained with AMP and in float32, measured in the same run (NOTE
[ The AMP weight check ]); ``--tol`` replaces either tolerance.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import netcl.autograd as ag
import netcl.distributed as dist
from netcl.core import Tensor
from netcl.core.device import DeviceHandle, device, manager
from netcl.io import load_tensors
from netcl.nn import Module, resnet18
from netcl.nn.amp import GradScaler, autocast
from netcl.optim import SGD
from netcl.trainer import save_training_checkpoint

Array = np.ndarray[Any, Any]
Step = Callable[[Tensor, Tensor], Tensor]
DATA_BATCHES = 4  # distinct global batches, used in turn


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--batch", type=int, default=128, help="images per rank per step")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--amp", action="store_true", help="float16 autocast with a GradScaler")
    p.add_argument("--width", type=int, default=64, help="channels of the first stage")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--init-scale", type=float, default=2.0**16,
                   help="the GradScaler's first loss scale (AMP)")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket cap, MiB")
    p.add_argument("--sync-bn", action="store_true",
                   help="SyncBatchNorm (global-batch statistics; implied by --check-weights)")
    p.add_argument("--device", default="auto",
                   help="auto: each rank its own device (device_for_rank); else a selector "
                        "every rank uses")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check-weights", action="store_true",
                   help="rank 0 compares its weights with one process over the global batch")
    p.add_argument("--tol", type=float, default=None,
                   help="largest relative weight difference --check-weights accepts")
    p.add_argument("--checkpoint", default=None,
                   help="rank 0's checkpoint (default: bench_ddp_resnet.netcl in the temp dir)")
    p.add_argument("--out", default=None, help="append rank 0's JSON line here")
    args = p.parse_args(argv)
    for name in ("batch", "steps", "width", "image_size", "classes"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        p.error(f"--warmup must be >= 0, got {args.warmup}")
    if args.image_size < 8:
        p.error(f"--image-size must be >= 8 (four stages of stride 2), got {args.image_size}")
    return args


# -- model, data, step --------------------------------------------------------------------------


def build_model(dev: DeviceHandle, args: argparse.Namespace) -> Module:
    """ResNet-18 with the CIFAR stem, the same weights for every ``--seed``."""
    return resnet18(num_classes=args.classes, stem="cifar", width=args.width, seed=args.seed,
                    queue=dev.queue)


def global_batches(args: argparse.Namespace, world: int) -> list[tuple[Array, Array]]:
    """The seeded global batches (``world * batch`` images each), the same on every rank."""
    rng = np.random.default_rng(args.seed + 1)
    n, s = world * args.batch, args.image_size
    return [(rng.standard_normal((n, 3, s, s)).astype(np.float32),
             rng.integers(0, args.classes, n).astype(np.int64)) for _ in range(DATA_BATCHES)]


def make_step(model: Module, params: list[Tensor], args: argparse.Namespace, amp: bool,
              after_backward: Callable[[], None] | None = None) -> Step:
    """One training step of ``model`` (a DDP wrapper or a plain module) on ``(x, y)``; the
    step's ``optimizer`` and ``scaler`` are attributes of the returned function."""
    opt = SGD(params, lr=args.lr, momentum=0.9)
    scaler = GradScaler(init_scale=args.init_scale, enabled=amp)

    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        with ag.Tape() as tape:
            with autocast(enabled=amp):
                logits = model(x)
            loss = ag.cross_entropy(ag.ops.cast(logits, "float32") if amp else logits, y)
            scaled = scaler.scale(loss)
        tape.backward(scaled)
        if after_backward is not None:
            after_backward()
        scaler.step(opt)
        scaler.update()
        return loss

    step.optimizer = opt  # type: ignore[attr-defined]
    step.scaler = scaler  # type: ignore[attr-defined]
    return step


def upload(dev: DeviceHandle, batches: list[tuple[Array, Array]], rows: slice
           ) -> list[tuple[Tensor, Tensor]]:
    return [(Tensor.from_host(dev.queue, np.ascontiguousarray(x[rows])),
             Tensor.from_host(dev.queue, np.ascontiguousarray(y[rows]))) for x, y in batches]


def run_steps(step: Step, data: list[tuple[Tensor, Tensor]], first: int, count: int
              ) -> Tensor | None:
    loss = None
    for i in range(first, first + count):
        x, y = data[i % len(data)]
        loss = step(x, y)
    return loss


# -- the weight check ---------------------------------------------------------------------------


def host_state(model: Module) -> dict[str, Array]:
    return {k: np.asarray(v.to_host(), np.float64) for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")}


def compare(ddp_state: dict[str, Array], ref_state: dict[str, Array],
            start: dict[str, Array]) -> dict[str, Any]:
    """Largest difference per tensor over its largest magnitude (and over its largest move
    from ``start``), the worst tensors named; ``update_rel_norm``: the norm of the difference
    over the norm of the reference's move from ``start``, every tensor together."""
    if sorted(ddp_state) != sorted(ref_state):
        raise RuntimeError("check-weights: the DDP and reference models have different keys: "
                           f"{sorted(set(ddp_state) ^ set(ref_state))[:5]}")
    worst, worst_move = ("", -1.0), ("", -1.0)
    diff_sq = moved_sq = 0.0
    for name, ref in ref_state.items():
        diff_sq += float(np.sum((ddp_state[name] - ref) ** 2))
        moved_sq += float(np.sum((ref - start[name]) ** 2))
        diff = float(np.max(np.abs(ddp_state[name] - ref)))
        rel = diff / max(float(np.max(np.abs(ref))), 1e-12)
        if rel > worst[1]:
            worst = (name, rel)
        moved = float(np.max(np.abs(ref - start[name])))
        if moved > 0 and diff / moved > worst_move[1]:
            worst_move = (name, diff / moved)
    return {"max_rel_diff": worst[1], "worst": worst[0],
            "max_rel_to_update": max(worst_move[1], 0.0), "worst_update": worst_move[0],
            "update_rel_norm": (diff_sq / moved_sq) ** 0.5 if moved_sq > 0 else 0.0}


def train_reference(dev: DeviceHandle, args: argparse.Namespace,
                    batches: list[tuple[Array, Array]], total: int, amp: bool
                    ) -> tuple[dict[str, Array], dict[str, Array], float]:
    """(first state, last state, last loss scale) of one process trained ``total`` steps on
    the whole global batches."""
    ref = build_model(dev, args)
    start = host_state(ref)
    step = make_step(ref, list(ref.parameters()), args, amp)
    run_steps(step, upload(dev, batches, slice(None)), 0, total)
    return start, host_state(ref), step.scaler.get_scale()  # type: ignore[attr-defined]


def check_weights(dev: DeviceHandle, args: argparse.Namespace, ddp_model: Module,
                  ddp_scale: float, batches: list[tuple[Array, Array]], total: int
                  ) -> dict[str, Any]:
    """Compare the DDP model with one process trained on the global batches.

    # NOTE [ The AMP weight check ]
    In float32 the two differ by reduction order only (tolerance 1e-4 of each tensor's
    largest magnitude; about 2e-6 measured on NumPy and PoCL). Under AMP float16 rounding
    differs too, and the per-tensor figure is useless: a BatchNorm bias's gradient is a sum
    that nearly cancels (the next BatchNorm removes per-channel shifts), so float16 noise is
    tens of percent of its small update even between AMP and float32 in one process. The AMP
    check therefore compares the norm of the difference over the norm of the update, all
    tensors together, with twice the same figure for one process trained with AMP and in
    float32, measured in the same run: the DDP run and the one process each carry their own
    float16 rounding, which add (by sqrt(2) when independent; measured on NumPy and PoCL at
    width 8: 0.91x and 1.01x the AMP vs float32 figure of about 1%, where a skipped step or an
    unaveraged gradient is about 100%). And the two must skip the same steps (equal final
    loss scales): each rank's float16 gradients are those of its shard's mean loss, N times
    larger than one process's per sample, so with a large scale a rank can overflow where the
    one process does not (PyTorch's DDP does the same); lower ``--init-scale`` then.
    """
    start, ref_state, ref_scale = train_reference(dev, args, batches, total, args.amp)
    result = compare(host_state(ddp_model), ref_state, start)
    if args.amp:  # measured: one process with AMP against one process in float32
        _, fp32_state, _ = train_reference(dev, args, batches, total, amp=False)
        noise = compare(ref_state, fp32_state, start)["update_rel_norm"]
        metric, tol = "update_rel_norm", 2.0 * noise
        basis = f"twice one process's AMP vs float32 difference, {noise:.3g}"
    else:
        metric, tol, basis = "max_rel_diff", 1e-4, "float32 reduction order"
    if args.tol is not None:
        tol, basis = float(args.tol), "--tol"
    same_skips = ddp_scale == ref_scale
    result.update(steps=total, metric=metric, tol=tol, tol_basis=basis, ddp_scale=ddp_scale,
                  scale=ref_scale, passed=same_skips and result[metric] <= tol)
    return result


def print_check(check: dict[str, Any], world: int, global_batch: int) -> None:
    print(f"check-weights: {world} ranks vs one process on the global batch of "
          f"{global_batch}, {check['steps']} steps: max relative difference "
          f"{check['max_rel_diff']:.3g} ({check['worst']}), {check['max_rel_to_update']:.3g} "
          f"of the largest update ({check['worst_update']}); difference over the update, all "
          f"tensors: {check['update_rel_norm']:.3g}", flush=True)
    print(f"check-weights: {check['metric']} {check[check['metric']]:.3g}, tolerance "
          f"{check['tol']:.3g} ({check['tol_basis']}): {'PASS' if check['passed'] else 'FAIL'}",
          flush=True)
    if check["ddp_scale"] != check["scale"]:
        print(f"check-weights: FAIL: the loss scales differ (DDP {check['ddp_scale']:g}, one "
              f"process {check['scale']:g}), so the runs skipped different steps; see NOTE "
              "[ The AMP weight check ] (try --init-scale 1024)", flush=True)


# -- one rank -----------------------------------------------------------------------------------


def device_names(group: dist.ProcessGroup, dev: DeviceHandle) -> list[str]:
    """Every rank's device, as rank 0 prints them."""
    raw = str(dev).encode()[:120]
    send = np.zeros(128, np.uint8)
    send[: len(raw)] = np.frombuffer(raw, np.uint8)
    recv = np.zeros((group.world_size, 128), np.uint8)
    group.backend.all_gather(send, recv)
    return [bytes(row).rstrip(b"\0").decode(errors="replace") for row in recv]


def timed(step: Step, data: list[tuple[Tensor, Tensor]], args: argparse.Namespace,
          dev: DeviceHandle, group: dist.ProcessGroup) -> tuple[list[float], float]:
    """(every rank's seconds per timed step, rank 0's last loss)."""
    run_steps(step, data, 0, args.warmup)
    dev.queue.finish()
    group.backend.barrier()
    t0 = time.perf_counter()
    loss = run_steps(step, data, args.warmup, args.steps)
    dev.queue.finish()
    mine = np.array([(time.perf_counter() - t0) / args.steps], np.float64)
    every = np.zeros((group.world_size, 1), np.float64)
    group.backend.all_gather(mine, every)
    value = float(loss.to_host()) if loss is not None else float("nan")
    return [float(t) for t in every[:, 0]], value


def save_and_verify(path: str, model: Module, step: Step, epoch: int) -> int:
    """Write the training checkpoint, read it back, check the weights; its size in bytes."""
    optimizer = step.optimizer  # type: ignore[attr-defined]
    written = save_training_checkpoint(path, model, optimizer, epoch=epoch,
                                       extra={"bench": "ddp_resnet"})
    tensors, meta = load_tensors(written)
    if meta.get("kind") != "training":
        raise RuntimeError(f"bench_ddp_resnet: {written} is not a training checkpoint: {meta}")
    for name, value in model.state_dict().items():
        if not np.array_equal(tensors[f"model/{name}"], value.to_host()):
            raise RuntimeError(f"bench_ddp_resnet: checkpoint {written} holds another {name}")
    return os.path.getsize(written)


def rank_main(args: argparse.Namespace) -> int:
    group = dist.init_process_group("auto")
    rank, world = group.rank, group.world_size
    handle = group.device() if args.device == "auto" else manager.default(args.device)
    if handle is None:
        raise RuntimeError(f"bench_ddp_resnet: no device {args.device!r} on this machine")
    sync_bn = args.sync_bn or args.check_weights
    with device(handle) as dev:
        names = device_names(group, dev)
        model = build_model(dev, args)
        if sync_bn:
            model = dist.SyncBatchNorm.convert_sync_batchnorm(model, group)
        ddp = dist.DistributedDataParallel(model, group, bucket_cap_mb=args.bucket_mb,
                                           broadcast_buffers=not sync_bn)
        step = make_step(ddp, list(model.parameters()), args, args.amp, ddp.finish_sync)
        batches = global_batches(args, world)
        data = upload(dev, batches, slice(rank * args.batch, (rank + 1) * args.batch))
        per_rank, loss = timed(step, data, args, dev, group)
        result: dict[str, Any] = {}
        if rank == 0:
            path = args.checkpoint or os.path.join(tempfile.gettempdir(),
                                                   "bench_ddp_resnet.netcl")
            size = save_and_verify(path, model, step, args.warmup + args.steps - 1)
            result = report(args, group, names, per_rank, loss, sync_bn, path, size)
            if args.check_weights:
                scale = step.scaler.get_scale()  # type: ignore[attr-defined]
                check = check_weights(dev, args, model, scale, batches, args.warmup + args.steps)
                result["check_weights"] = check
                print_check(check, world, world * args.batch)
            if args.out:
                with open(args.out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(result) + "\n")
        group.backend.barrier()
    dist.destroy_process_group()
    return 0 if result.get("check_weights", {}).get("passed", True) else 1


def report(args: argparse.Namespace, group: dist.ProcessGroup, names: list[str],
           per_rank: list[float], loss: float, sync_bn: bool, checkpoint: str,
           size: int) -> dict[str, Any]:
    world = group.world_size
    step_s = max(per_rank)
    images = world * args.batch / step_s
    precision = "amp" if args.amp else "float32"
    print(f"ResNet-18 (CIFAR stem, width {args.width}), {args.image_size}x{args.image_size}, "
          f"{world} rank(s) via {group.backend.name}, batch {args.batch}/rank "
          f"({world * args.batch} global), {precision}{', SyncBatchNorm' if sync_bn else ''}, "
          f"buckets {args.bucket_mb:g} MiB", flush=True)
    for r, name in enumerate(names):
        print(f"  rank {r}: {name}: {per_rank[r] * 1e3:.1f} ms/step", flush=True)
    print(f"RESULT ranks={world} precision={precision} step_ms={step_s * 1e3:.2f} "
          f"images_per_s={images:.1f} loss={loss:.4f}", flush=True)
    print(f"checkpoint: {checkpoint} ({size} bytes, read back equal)", flush=True)
    return {"bench": "ddp_resnet", "ranks": world, "backend": group.backend.name,
            "devices": names, "precision": precision, "batch_per_rank": args.batch,
            "global_batch": world * args.batch, "width": args.width,
            "image_size": args.image_size, "warmup": args.warmup, "steps": args.steps,
            "bucket_mb": args.bucket_mb, "sync_bn": sync_bn, "step_ms": step_s * 1e3,
            "step_ms_per_rank": [t * 1e3 for t in per_rank], "images_per_s": images,
            "loss": loss, "checkpoint": checkpoint}


def _ranks_env() -> Iterator[str]:  # for the error message of a failed start
    for key in ("NETCL_RANK", "NETCL_WORLD_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_RANK"):
        if key in os.environ:
            yield f"{key}={os.environ[key]}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return rank_main(args)
    except Exception as err:
        where = ", ".join(_ranks_env()) or "one process"
        print(f"bench_ddp_resnet ({where}): {type(err).__name__}: {err}", file=sys.stderr,
              flush=True)
        raise


if __name__ == "__main__":
    sys.exit(main())
