"""PyTorch DDP (NCCL) reference for bench_ddp_resnet.py: ResNet-18 (CIFAR stem) on 1 and N GPUs.

    python benchmarks/_ddp_torch.py [--gpus 1 2] [--batch 128] [--amp | --both] [--out F.jsonl]

For each GPU count, ``torch.multiprocessing.spawn`` starts one process per GPU (rank k on
``cuda:k``), each training a ResNet-18 with the CIFAR stem (3x3 stride-1 first conv, no max
pool; torchvision's layout, built here so torchvision is not needed) wrapped in
``torch.nn.parallel.DistributedDataParallel`` over NCCL: ``--batch`` images per rank, SGD
(momentum 0.9), cross-entropy, float32 with TF32 off (cuDNN and matmul) or AMP (float16
autocast and a GradScaler). After ``--warmup`` steps, ``--steps`` steps are timed on every
rank (CUDA synchronised and a barrier first); rank 0 prints the slowest rank's step time and
the global images per second as a ``RESULT torch ...`` line and appends a JSON line to
``--out``. The same shapes, batch and BatchNorm (per rank, PyTorch's default) as
``bench_ddp_resnet.py`` without ``--sync-bn``.

torch is optional: without it, or without enough CUDA GPUs, this says so and exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socket
import sys
import time
from typing import Any


def load_torch() -> Any:
    """The torch module, or None (with the reason printed) when it cannot be used."""
    try:
        return importlib.import_module("torch")
    except ImportError as err:
        print(f"_ddp_torch: PyTorch is not installed here ({err}); the PyTorch DDP reference "
              "needs torch with CUDA (pip install torch) on the GPU machine", file=sys.stderr)
        return None


def resnet18_cifar(torch: Any, num_classes: int = 10, width: int = 64) -> Any:
    """torchvision's ResNet-18 layout with the CIFAR stem, built from torch.nn alone."""
    nn = torch.nn
    module: Any = nn.Module

    class BasicBlock(module):  # type: ignore[misc]
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            short = x if self.downsample is None else self.downsample(x)
            return self.relu(out + short)

    layers: list[Any] = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                         nn.ReLU(inplace=True)]
    cin = width
    for stage in range(4):
        cout = width * 2 ** stage
        for j in range(2):
            layers.append(BasicBlock(cin, cout, 2 if stage > 0 and j == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    net = nn.Sequential(*layers)
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    return net


def rank_main(rank: int, world: int, port: int, args: argparse.Namespace, amp: bool) -> None:
    """One rank on ``cuda:rank``: time the DDP steps; rank 0 prints and writes the result."""
    torch = importlib.import_module("torch")
    dist = importlib.import_module("torch.distributed")
    ddp_cls = importlib.import_module("torch.nn.parallel").DistributedDataParallel
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    net = resnet18_cifar(torch, width=args.width).cuda(rank)
    model = ddp_cls(net, device_ids=[rank], bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    gen = torch.Generator(device="cuda").manual_seed(args.seed + 1 + rank)
    s = args.image_size
    x = torch.randn(args.batch, 3, s, s, device="cuda", generator=gen)
    y = torch.randint(0, 10, (args.batch,), device="cuda", generator=gen)

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    per_step = torch.tensor([(time.perf_counter() - t0) / args.steps], device="cuda")
    dist.all_reduce(per_step, op=dist.ReduceOp.MAX)
    if rank == 0:
        step_s = float(per_step.item())
        precision = "amp" if amp else "float32"
        images = world * args.batch / step_s
        print(f"RESULT torch gpus={world} precision={precision} step_ms={step_s * 1e3:.2f} "
              f"images_per_s={images:.1f} loss={float(loss.item()):.4f} "
              f"device={torch.cuda.get_device_name(0)!r}", flush=True)
        if args.out:
            row = {"bench": "ddp_resnet_torch", "ranks": world, "backend": "nccl",
                   "precision": precision, "batch_per_rank": args.batch,
                   "global_batch": world * args.batch, "width": args.width,
                   "image_size": s, "warmup": args.warmup, "steps": args.steps,
                   "step_ms": step_s * 1e3, "images_per_s": images,
                   "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def main(argv: list[str] | None = None) -> int:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--gpus", type=int, nargs="+", default=[1, 2])
    p.add_argument("--batch", type=int, default=128, help="images per GPU per step")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--amp", action="store_true", help="only AMP")
    p.add_argument("--both", action="store_true", help="float32 and AMP")
    p.add_argument("--out", default=None, help="append a JSON line per configuration")
    args = p.parse_args(argv)
    torch = load_torch()
    if torch is None:
        return 2
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < max(args.gpus):
        print(f"_ddp_torch: needs {max(args.gpus)} CUDA GPUs, found {have} (torch "
              f"{torch.__version__}); the PyTorch DDP reference runs on the GPU machine",
              file=sys.stderr)
        return 2
    spawn = importlib.import_module("torch.multiprocessing").spawn
    for amp in ([False, True] if args.both else [args.amp]):
        for world in args.gpus:
            spawn(rank_main, args=(world, free_port(), args, amp), nprocs=world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
