"""``data_parallel_step``: one synchronous data-parallel training step (spec page 001)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor
from netcl.nn import Module

from ._backend import Backend
from ._bucket import GradBucketer, backend_of
from ._ddp import DistributedDataParallel
from ._group import ProcessGroup

__all__ = ["data_parallel_step"]

# One bucketer per plain model (its flat buffers are allocated once, not per step).
_bucketers: weakref.WeakKeyDictionary[Module, GradBucketer] = weakref.WeakKeyDictionary()


def _on_device(queue: Any, value: Any) -> Tensor:
    return value if isinstance(value, Tensor) else Tensor.from_host(queue, np.asarray(value))


def data_parallel_step(model: Module, optimizer: Any, batch: Sequence[Any],
                       loss_fn: Callable[[Tensor, Tensor], Tensor],
                       group: ProcessGroup | Backend | None = None) -> float:
    """Forward, backward, gradient averaging over the ranks, optimizer step; the loss.

    Each rank passes its own shard of the global batch (e.g. from a
    :class:`netcl.data.DistributedSampler`); with equal shards the averaged gradient is the
    gradient of the mean loss over the global batch, so every rank takes the step one process
    would take on the whole batch.

    Args:
        model: a :class:`DistributedDataParallel` (its backward already averaged the gradients)
            or a plain module (its gradients are averaged after backward, bucketed).
        optimizer: a :class:`netcl.optim.Optimizer` over the model's parameters.
        batch: ``(inputs, targets)``, NumPy arrays or Tensors on the model's device.
        loss_fn: ``loss_fn(outputs, targets) -> scalar Tensor`` (a mean over the shard).
        group: the process group (default: the model's, else the default group).

    Returns:
        The loss averaged over the ranks (the global batch's loss for equal shards).

    Raises:
        ValueError: ``batch`` is not an ``(inputs, targets)`` pair.

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> import netcl.distributed as dist
        >>> from netcl.core import manager
        >>> from netcl.nn import Linear
        >>> from netcl.optim import SGD
        >>> group = dist.init_process_group("shm", rank=0, world_size=1)
        >>> model = Linear(4, 3, queue=manager.default("cpu").queue)
        >>> opt = SGD(model.parameters(), lr=0.1)
        >>> batch = (np.ones((5, 4), np.float32), np.array([0, 1, 2, 0, 1]))
        >>> first = data_parallel_step(model, opt, batch, ag.cross_entropy, group)
        >>> data_parallel_step(model, opt, batch, ag.cross_entropy, group) < first
        True
        >>> dist.destroy_process_group()
    """
    if len(batch) != 2:
        raise ValueError(f"data_parallel_step: batch must be (inputs, targets), got "
                         f"{len(batch)} items")
    if isinstance(model, DistributedDataParallel):
        backend = model.backend if group is None else backend_of(group)
    else:
        backend = backend_of(group)
    queue = next(iter(model.parameters())).queue
    x, y = (_on_device(queue, v) for v in batch)
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    if isinstance(model, DistributedDataParallel):
        model.finish_sync()
    else:
        bucketer = _bucketers.get(model)
        if bucketer is None or bucketer.backend is not backend:
            bucketer = _bucketers[model] = GradBucketer(model.parameters(), backend)
        bucketer.reduce()
    optimizer.step()
    value = np.array([float(loss.to_host())], np.float64)
    backend.all_reduce(value, "mean")
    return float(value[0])
