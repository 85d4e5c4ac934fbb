"""``SyncBatchNorm``: batch norm whose statistics span every rank's shard of the batch.

With :class:`~._ddp.DistributedDataParallel`, a plain BatchNorm normalises each rank's shard
by the shard's own mean and variance, so N ranks with ``B / N`` samples each do not train as
one process on ``B`` samples. ``SyncBatchNorm`` all-reduces the per-channel sums (forward) and
the per-channel sums of the gradient (backward), as PyTorch's ``torch.nn.SyncBatchNorm``; then
the data-parallel run takes one process's steps.

# NOTE [ SyncBatchNorm's backward ]
The normalisation ``xhat = (x - mean) * invstd`` is computed without recording, from global
statistics reduced on the host in float64; its gradient enters through an identity:
``z = xhat + (h - detach(x))`` with ``h = backward_hook(x, rule)``, whose value is ``xhat``
exactly (``h - detach(x)`` is zero) and whose gradient reaches ``x`` only through ``h``, where
``rule`` replaces the upstream gradient ``G`` of ``z`` by batch norm's input gradient with
global means: ``invstd * (G - mean(G) - xhat * mean(G * xhat))``, the two means all-reduced
over the ranks (one message). Each rank's ``G`` is that of its own shard's loss, so this is N
times the gradient of the mean over ranks; :class:`DistributedDataParallel` divides the
parameter gradients by N when it averages them, which makes them exact (the affine ``w``,
``b`` get their own shard's sums, averaged likewise). The affine part ``z * w + b`` is
recorded by the ordinary ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import netcl.autograd as ag
import netcl.ops as ops
from netcl.core.tensor import Tensor, copy_from_host
from netcl.nn import BatchNorm1d, BatchNorm2d, Module
from netcl.nn.amp import is_autocast_enabled

from ._backend import Backend
from ._bucket import backend_of
from ._group import ProcessGroup

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(BatchNorm2d):
    """Batch norm over ``(N, C)``, ``(N, C, L)`` or ``(N, C, H, W)`` input whose training
    statistics are those of the whole batch over every rank of ``group``.

    In eval mode, or with a group of one rank, it is :class:`netcl.nn.BatchNorm2d`. Build it
    like a BatchNorm (plus ``group``), or convert a model with :meth:`convert_sync_batchnorm`.

    Args:
        num_features, eps, momentum, affine, queue: as :class:`netcl.nn.BatchNorm2d`.
        group: a :class:`~netcl.distributed.ProcessGroup` or backend (default: the default
            group, looked up at each forward).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> from netcl.distributed import init_process_group, destroy_process_group
        >>> from netcl.nn import BatchNorm2d, Sequential
        >>> q = manager.default("cpu").queue
        >>> g = init_process_group("shm", rank=0, world_size=1)
        >>> m = SyncBatchNorm.convert_sync_batchnorm(Sequential(BatchNorm2d(3, queue=q)))
        >>> type(m[0]).__name__
        'SyncBatchNorm'
        >>> x = Tensor.from_host(q, np.random.default_rng(0).normal(size=(4, 3, 5, 5)))
        >>> bool(abs(m(x).to_host().mean()) < 1e-5)
        True
        >>> destroy_process_group()
    """

    expected_ndim = (2, 3, 4)  # type: ignore[assignment]  # BatchNorm1d and 2d input

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, queue: Any = None,
                 group: ProcessGroup | Backend | None = None) -> None:
        super().__init__(num_features, eps, momentum, affine, queue)
        self.group = group

    @classmethod
    def convert_sync_batchnorm(cls, module: Module,
                               group: ProcessGroup | Backend | None = None) -> Module:
        """``module`` with every BatchNorm1d/2d replaced by a SyncBatchNorm holding the same
        parameters and buffers (a BatchNorm ``module`` itself comes back replaced)."""
        if isinstance(module, (BatchNorm1d, BatchNorm2d)) and not isinstance(module, cls):
            sync = cls(module.num_features, module.eps, module.momentum, module.affine,
                       module.running_mean.queue, group)
            if module.affine:
                sync.weight, sync.bias = module.weight, module.bias
            sync.running_mean = module.running_mean
            sync.running_var = module.running_var
            sync.num_batches_tracked = module.num_batches_tracked
            sync.train(module.training)
            return sync
        children = list(module.named_children())
        converted = [(name, cls.convert_sync_batchnorm(child, group)) for name, child in children]
        if any(new is not old for (_, new), (_, old) in zip(converted, children)):
            for name, child in converted:  # every child again, in order (Sequential's order)
                setattr(module, name, child)
        return module

    def forward(self, x: Tensor) -> Tensor:
        backend = backend_of(self.group)
        if not self.training or backend.world_size == 1:
            return super().forward(x)
        if x.ndim not in self.expected_ndim or x.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: expected input of {self.expected_ndim} dims with "
                             f"{self.num_features} channels at dim 1, got {x.shape}")
        if is_autocast_enabled() and x.dtype != self.running_mean.dtype:
            # as F.batch_norm under autocast: statistics and output in the statistics' dtype
            x = ag.ops.cast(x, self.running_mean.dtype)
        channels = x.shape[1]
        axes = (0, *range(2, x.ndim))
        stat_shape = (1, channels) + (1,) * (x.ndim - 2)
        with ag.no_grad():
            s1 = ops.sum(x, axis=axes).to_host()
            s2 = ops.sum(ops.mul(x, x), axis=axes).to_host()
            sums = np.concatenate([s1, s2, [x.size // channels]]).astype(np.float64)
            backend.all_reduce(sums, "sum")
            count = sums[-1]
            mean = sums[:channels] / count
            var = np.maximum(sums[channels: 2 * channels] / count - mean * mean, 0.0)
            invstd = 1.0 / np.sqrt(var + self.eps)
            self._update_running(mean, var, count)
            mean_t = Tensor.from_host(x.queue, mean.reshape(stat_shape), dtype=x.dtype)
            invstd_t = Tensor.from_host(x.queue, invstd.reshape(stat_shape), dtype=x.dtype)
            xhat = ops.mul(ops.sub(x, mean_t), invstd_t)

        def rule(g: Tensor) -> Tensor:  # NOTE [ SyncBatchNorm's backward ]
            sdy = ops.sum(g, axis=axes).to_host()
            sdyx = ops.sum(ops.mul(g, xhat), axis=axes).to_host()
            both = np.concatenate([sdy, sdyx]).astype(np.float64)
            backend.all_reduce(both, "sum")
            mdy = Tensor.from_host(g.queue, (both[:channels] / count).reshape(stat_shape),
                                   dtype=g.dtype)
            mdyx = Tensor.from_host(g.queue, (both[channels:] / count).reshape(stat_shape),
                                    dtype=g.dtype)
            centered = ops.sub(ops.sub(g, mdy), ops.mul(xhat, mdyx))
            return ops.mul(centered, invstd_t)

        z = ag.ops.add(xhat, ag.ops.sub(ag.backward_hook(x, rule), ag.detach(x)))
        if not self.affine or self.weight is None or self.bias is None:
            return z
        w = ag.ops.reshape(self.weight, stat_shape)
        b = ag.ops.reshape(self.bias, stat_shape)
        return ag.ops.add(ag.ops.mul(z, w), b)

    def _update_running(self, mean: np.ndarray[Any, Any], var: np.ndarray[Any, Any],
                        count: float) -> None:
        m = self.momentum
        unbiased = var * (count / max(count - 1.0, 1.0))
        rm, rv = self.running_mean, self.running_var
        copy_from_host(rm, (1 - m) * rm.to_host() + m * mean)
        copy_from_host(rv, (1 - m) * rv.to_host() + m * unbiased)
        tracked = self.num_batches_tracked
        copy_from_host(tracked, tracked.to_host() + 1)
