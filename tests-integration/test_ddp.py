"""DistributedDataParallel and data_parallel_step: training the digits CNN over 2 ranks
(shared memory) and 4 ranks (MPI) gives one process's losses and weights (same global batch)
within float32 reduction-order tolerance, on the NumPy backend and an OpenCL CPU device.

The ranks are this file run as a script (``python test_ddp.py worker ...``), started either
with the shared-memory backend's environment variables or under the env's ``mpiexec``. With
BatchNorm the ranks' model is converted to SyncBatchNorm (statistics of the global batch) and
compared with the one-process model with plain BatchNorm2d.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.distributed as dist
from netcl.core.device import device
from netcl.core.tensor import Tensor
from netcl.core.testing import available_devices
from netcl.data import DataLoader, DigitsDataset, DistributedSampler, random_split
from netcl.nn import BatchNorm2d, Conv2d, Flatten, Linear, MaxPool2d, Module, ReLU, Sequential
from netcl.ops.testing import one_opencl_cpu_device
from netcl.optim import SGD

HERE = Path(__file__).resolve()
GLOBAL_BATCH, STEPS, SEED, LR = 60, 5, 3, 0.1


def cnn(queue: Any, bn: bool = False) -> Module:
    """The digits CNN (netcl.trainer's digits_cnn, narrower); BatchNorm only with ``bn``."""
    rng = np.random.default_rng(SEED)

    def norm(c: int) -> list[Module]:
        return [BatchNorm2d(c, queue=queue)] if bn else []

    return Sequential(Conv2d(1, 8, 3, padding=1, queue=queue, rng=rng), *norm(8), ReLU(),
                      Conv2d(8, 16, 3, padding=1, queue=queue, rng=rng), *norm(16), ReLU(),
                      MaxPool2d(2), Flatten(), Linear(16 * 4 * 4, 10, queue=queue, rng=rng))


def train_set() -> Any:
    return random_split(DigitsDataset(), [0.8, 0.2], seed=SEED)[0]


def weights(model: Module) -> dict[str, np.ndarray[Any, Any]]:
    return {k: v.to_host().copy() for k, v in model.state_dict().items()}


def one_process(dev_name: str, bn: bool
                ) -> tuple[dict[str, np.ndarray[Any, Any]], list[float]]:
    with device(dev_name) as dev:
        model = cnn(dev.queue, bn)
        opt = SGD(model.parameters(), lr=LR)
        loader = DataLoader(train_set(), batch_size=GLOBAL_BATCH, shuffle=True, seed=SEED)
        losses = []
        for step, (x, y) in enumerate(loader):
            if step == STEPS:
                break
            opt.zero_grad()
            loss = ag.cross_entropy(model(Tensor.from_host(dev.queue, x)),
                                    Tensor.from_host(dev.queue, y))
            loss.backward()
            opt.step()
            losses.append(float(loss.to_host()))
        return weights(model), losses


def worker(backend: str, devices: str, out_prefix: str) -> None:
    """One rank: for each ``device=mode,mode`` item of ``devices`` (``;``-separated), train
    with each mode: ``plain`` (data_parallel_step's bucketed sync after backward), ``ddp``
    (DistributedDataParallel's hooks in backward) or ``syncbn`` (DDP, SyncBatchNorm)."""
    group = dist.init_process_group("auto", timeout=60)  # MPI under mpiexec, else shm
    if group.backend.name != backend:
        raise RuntimeError(f"init_process_group('auto') chose {group.backend.name}, not {backend}")
    for k, item in enumerate(devices.split(";")):
        dev_name, modes = item.split("=")
        for mode in modes.split(","):
            with device(dev_name) as dev:
                losses, plain = train_shard(group, dev.queue, mode)
            if group.rank == 0:
                arrays = {"losses": np.array(losses), **weights(plain)}
                np.savez(f"{out_prefix}-{k}-{mode}.npz", **arrays)  # type: ignore[arg-type]
    dist.destroy_process_group()


def train_shard(group: dist.ProcessGroup, queue: Any, mode: str) -> tuple[list[float], Module]:
    data = train_set()
    shard = DataLoader(data, batch_size=GLOBAL_BATCH // group.world_size,
                       sampler=DistributedSampler(data, group.world_size, group.rank, seed=SEED))
    plain = cnn(queue, mode == "syncbn")
    if mode == "syncbn":
        plain = dist.SyncBatchNorm.convert_sync_batchnorm(plain)
    model: Module = (plain if mode == "plain" else
                     dist.DistributedDataParallel(plain, group, bucket_cap_mb=0.01))
    opt = SGD(plain.parameters(), lr=LR)
    losses = []
    for step, batch in enumerate(shard):
        if step == STEPS:
            break
        losses.append(dist.data_parallel_step(model, opt, batch, ag.cross_entropy, group))
    return losses, plain


def run_ranks(backend: str, world: int, devices: str, out_prefix: Path) -> None:
    args = [str(HERE), "worker", backend, devices, str(out_prefix)]
    env = dict(os.environ, NETCL_DIST_TIMEOUT_S="60")
    if backend == "mpi":
        pytest.importorskip("mpi4py", reason="the MPI backend needs mpi4py (pip install "
                            "'netcl-distributed[mpi]')")
        mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent))
        if mpiexec is None:
            pytest.skip("no mpiexec beside this Python (pip install mpich)")
        procs = [subprocess.Popen([mpiexec, "-n", str(world), sys.executable, *args], env=env)]
    else:
        job = uuid.uuid4().hex[:12]
        procs = [subprocess.Popen([sys.executable, *args], env=dict(
            env, NETCL_RANK=str(r), NETCL_WORLD_SIZE=str(world), NETCL_DIST_ID=job))
            for r in range(world)]
    codes = [p.wait(timeout=300) for p in procs]
    assert codes == [0] * len(procs), f"ranks exited with {codes}"


def opencl_cpu_selector() -> str | None:
    """The selector of the one OpenCL CPU device these tests use (PoCL in CI), or None."""
    for d in available_devices():
        if d.backend == "cl" and d.device_type.lower() == "cpu" \
                and one_opencl_cpu_device(d) is None:
            return str(d.platform_name)
    return None


@pytest.fixture(scope="module")
def reference() -> dict[tuple[str, bool], Any]:
    """One-process results by (device, BatchNorm), shared by the cases of this module."""
    return {}


@pytest.mark.parametrize(("backend", "world"), [("shm", 2), ("mpi", 4)])
def test_data_parallel_equals_one_process(backend: str, world: int, tmp_path: Path,
                                         reference: dict[tuple[str, bool], Any]) -> None:
    """Every mode on the NumPy backend, DDP with SyncBatchNorm on the OpenCL CPU device: one
    job per world size (an interpreter start per rank is the expensive part)."""
    runs = [("cpu", ["plain", "ddp", "syncbn"])]
    selector = opencl_cpu_selector()
    if selector is not None:
        runs.append((selector, ["syncbn"]))
    run_ranks(backend, world, ";".join(f"{d}={','.join(m)}" for d, m in runs), tmp_path / "out")
    for k, (dev_name, modes) in enumerate(runs):
        for mode in modes:
            key = (dev_name, mode == "syncbn")
            if key not in reference:
                reference[key] = one_process(*key)
            want, want_losses = reference[key]
            got = np.load(tmp_path / f"out-{k}-{mode}.npz")
            what = f"{backend} x{world} on {dev_name}, {mode}"
            np.testing.assert_allclose(got["losses"], want_losses, rtol=1e-4, atol=1e-5,
                                       err_msg=what)
            for name, w in want.items():
                np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=2e-5,
                                           err_msg=f"{what}: {name}")


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker(*sys.argv[2:5])
