"""Training benchmarks, each beside PyTorch measured in the same run.

    python benchmarks/bench_train.py --device cpu      # digits: netcl NumPy vs PyTorch CPU
    python benchmarks/bench_train.py --device cl       # digits on OpenCL; ResNet-18 step on a GPU

digits: the README's CNN, same architecture, epochs, batch size, optimizer and split, timed end
to end (first epoch included) with the held-out accuracy. resnet18: one training step
(forward, backward, SGD update) at batch 128, 3x32x32, float32, CIFAR stem, against PyTorch on
CUDA with TF32 off (only when the OpenCL device is a GPU and CUDA is available).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np


def netcl_digits(device: str, epochs: int, batch_size: int) -> dict[str, Any]:
    from netcl.trainer._digits import DigitsConfig, train_digits

    start = time.perf_counter()
    _, history, used = train_digits(DigitsConfig(device=device, epochs=epochs,
                                                 batch_size=batch_size, progress=False))
    return {"device": str(used), "seconds": time.perf_counter() - start,
            "accuracy": history[-1].val_accuracy}


def torch_digits(epochs: int, batch_size: int, lr: float = 1e-2, seed: int = 0
                 ) -> dict[str, Any] | None:
    try:
        import torch
    except ImportError:
        return None
    from netcl.data import DigitsDataset, random_split

    torch.manual_seed(seed)
    data = DigitsDataset()
    train, test = random_split(data, [0.8, 0.2], seed=seed)
    xtr = torch.tensor(np.stack([train[i][0] for i in range(len(train))]))
    ytr = torch.tensor(np.array([train[i][1] for i in range(len(train))]))
    xte = torch.tensor(np.stack([test[i][0] for i in range(len(test))]))
    yte = torch.tensor(np.array([test[i][1] for i in range(len(test))]))
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for _ in range(epochs):
        model.train()
        order = torch.tensor(rng.permutation(len(xtr)))
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            loss = nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        model.eval()
        with torch.no_grad():
            acc = float((model(xte).argmax(1) == yte).float().mean())
    return {"device": "torch-cpu", "seconds": time.perf_counter() - start, "accuracy": acc}


def netcl_resnet_step(device: str, batch: int, steps: int, amp: bool = False) -> dict[str, Any]:
    import netcl.autograd as ag
    from netcl.core.device import manager
    from netcl.core.tensor import Tensor
    from netcl.nn import resnet18
    from netcl.nn.amp import GradScaler, autocast
    from netcl.optim import SGD

    dev = manager.default(device)
    assert dev is not None
    net = resnet18(num_classes=10, stem="cifar", queue=dev.queue)
    opt = SGD(net.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = Tensor.from_host(dev.queue, rng.standard_normal((batch, 3, 32, 32)).astype(np.float32))
    y = Tensor.from_host(dev.queue, rng.integers(0, 10, batch))

    scaler = GradScaler(enabled=amp)

    def step() -> None:
        with ag.Tape() as tape:
            with autocast(enabled=amp):
                loss = ag.cross_entropy(net(x), y)
            scaled = scaler.scale(loss)
        tape.backward(scaled)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()

    step()
    step()
    dev.queue.finish()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    dev.queue.finish()
    return {"device": str(dev), "ms_per_step": 1000 * (time.perf_counter() - start) / steps}


def torch_resnet_setup(batch: int, amp: bool = False) -> tuple[Any, Any] | None:
    """(step, torch) for torchvision's ResNet-18 with the CIFAR stem on CUDA (cuDNN, TF32 off),
    SGD with momentum, cross-entropy, float32 or AMP; None without torch, torchvision or CUDA."""
    try:
        import torch
        from torchvision.models import resnet18
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    net = resnet18(num_classes=10)
    net.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    net.maxpool = torch.nn.Identity()
    net = net.cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    scaler = torch.amp.GradScaler("cuda", enabled=amp)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step, torch


def torch_resnet_step(batch: int, steps: int, amp: bool = False) -> dict[str, Any] | None:
    found = torch_resnet_setup(batch, amp)
    if found is None:
        return None
    step, torch = found
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return {"device": torch.cuda.get_device_name(), "ms_per_step":
            1000 * (time.perf_counter() - start) / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--resnet-batch", type=int, default=128)
    parser.add_argument("--resnet-steps", type=int, default=5)
    parser.add_argument("--tasks", default="digits,resnet18",
                        help="comma-separated: digits, resnet18 (resnet18 runs on GPUs only)")
    parser.add_argument("--out", default="bench_train.json")
    args = parser.parse_args()
    tasks = set(args.tasks.split(","))
    results: dict[str, Any] = {}
    if "digits" in tasks:
        ours = netcl_digits(args.device, args.epochs, args.batch_size)
        ref = torch_digits(args.epochs, args.batch_size)
        results["digits"] = {"netcl": ours, "torch": ref}
        print(f"digits CNN, {args.epochs} epochs, batch {args.batch_size}")
        print(f"  netcl {ours['device']:<45} {ours['seconds']:8.2f} s  "
              f"acc {ours['accuracy']:.4f}")
        if ref is not None:
            print(f"  {'torch-cpu':<51} {ref['seconds']:8.2f} s  acc {ref['accuracy']:.4f}")
            print(f"  time ratio netcl/torch: {ours['seconds'] / ref['seconds']:.2f}")
    from netcl.core.device import manager

    handle = manager.default(args.device)
    if "resnet18" in tasks and handle is not None and handle.device_type == "gpu":
        for amp in (False, True):
            mine = netcl_resnet_step(args.device, args.resnet_batch, args.resnet_steps, amp)
            theirs = torch_resnet_step(args.resnet_batch, args.resnet_steps, amp)
            mode = "amp" if amp else "fp32"
            results[f"resnet18_step_{mode}"] = {"netcl": mine, "torch": theirs}
            what = ("float16 autocast + GradScaler" if amp else "float32, TF32 off")
            print(f"ResNet-18 training step, batch {args.resnet_batch}, 3x32x32, {what}")
            print(f"  netcl {mine['device']:<45} {mine['ms_per_step']:9.1f} ms")
            if theirs is not None:
                print(f"  torch {theirs['device']:<45} {theirs['ms_per_step']:9.1f} ms")
                print(f"  speed ratio torch/netcl: "
                      f"{theirs['ms_per_step'] / mine['ms_per_step']:.3f}")
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
