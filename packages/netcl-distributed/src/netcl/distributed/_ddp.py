"""``DistributedDataParallel``: one model replica per rank, gradients averaged in backward.

# NOTE [ Reducing buckets during backward ]
netcl's autograd has no hook on a leaf's gradient accumulation, so the wrapper makes one: while
its forward runs, every parameter attribute of the wrapped modules is replaced by
``netcl.autograd.backward_hook(p, ...)`` (an identity view of ``p``; one view per parameter,
so a shared parameter has one), and put back afterwards. In the backward pass the view's node
runs once, with the parameter's whole gradient of this pass, just before the autograd adds it
to ``p.grad``. The hook copies ``p.grad + g`` (``g`` alone when there is no ``.grad``) into the
parameter's bucket slice (straight from the device: ``GradBucketer.add_grads``), and the
bucket's all-reduce starts as soon as its last slice is in
(NOTE [ Gradient buckets ] in :mod:`._bucket`), on the backend's worker thread while this
thread goes on with the backward.

The hook of the last parameter waits for all buckets, writes the averaged gradients into the
other parameters' ``.grad`` (their gradients were accumulated when their hooks returned), and
returns the averaged gradient of its own parameter minus its old ``.grad`` as the replacement
gradient, so ``p.grad`` ends as the average too. ``loss.backward()`` therefore returns with
every gradient averaged, and the optimizer step needs nothing more. Parameters that take no
part in the forward never see their hook: call :meth:`DistributedDataParallel.finish_sync`
after ``backward`` (as :func:`data_parallel_step` does), which hands their gradients (or zeros)
over and finishes the reduction.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

import netcl.autograd as ag
from netcl.core.tensor import Tensor
from netcl.nn import Module

from ._backend import Backend
from ._bucket import DEFAULT_BUCKET_CAP_MB, GradBucketer, backend_of
from ._group import ProcessGroup
from ._staging import FlatStaging, download, upload, wait

__all__ = ["DistributedDataParallel", "broadcast_tensors"]


def broadcast_tensors(tensors: Iterable[Tensor], backend: Backend, src: int = 0,
                      staging: dict[str, FlatStaging] | None = None) -> None:
    """Overwrite ``tensors`` with rank ``src``'s values, one message per dtype.

    ``staging`` keeps each dtype's flat host array from call to call (a caller that broadcasts
    the same tensors every step passes the same dict; NOTE [ Persistent host staging ]).
    """
    by_dtype: dict[str, list[Tensor]] = {}
    for t in tensors:
        if t is not None and t.size:
            by_dtype.setdefault(t.dtype, []).append(t)
    for dtype in sorted(by_dtype):
        group = by_dtype[dtype]
        flat = FlatStaging() if staging is None else staging.setdefault(dtype, FlatStaging())
        views = flat.views(group)
        if backend.rank == src:
            wait([download(t, v) for t, v in zip(group, views)])
        backend.broadcast(flat.flat, src)
        if backend.rank != src:
            wait([upload(t, v) for t, v in zip(group, views)])


class DistributedDataParallel(Module):
    """Wraps ``module`` so that ``loss.backward()`` leaves every gradient averaged over ranks.

    At construction rank 0's parameters and buffers are copied to every rank, so all replicas
    start equal; each step every rank runs forward and backward on its own batch, and the
    gradients are averaged in buckets while the backward runs (NOTE [ Reducing buckets during
    backward ]), so the optimizers step identically and the replicas stay equal.

    Args:
        module: the model (the same architecture on every rank).
        group: a :class:`~netcl.distributed.ProcessGroup` or backend (default: the default
            group).
        bucket_cap_mb: the largest gradient bucket, MiB (PyTorch's default 25).
        broadcast_buffers: before each training forward, copy rank 0's buffers (BatchNorm
            running statistics) to every rank, as PyTorch does.

    ``state_dict`` and ``load_state_dict`` are the wrapped module's (no ``module.`` prefix),
    so a checkpoint loads into the plain model.

    Raises:
        TypeError: ``module`` is not a :class:`netcl.nn.Module`.
        RuntimeError: a forward found the previous backward's reduction unfinished (some
            parameters got no gradient: call :meth:`finish_sync` after ``backward``).

    Examples:
        >>> import numpy as np
        >>> import netcl.distributed as dist
        >>> from netcl.core import Tensor, manager
        >>> from netcl.nn import Linear
        >>> q = manager.default("cpu").queue
        >>> group = dist.init_process_group("shm", rank=0, world_size=1)
        >>> model = DistributedDataParallel(Linear(3, 2, queue=q), group)
        >>> loss = model(Tensor.from_host(q, np.ones((4, 3)))).sum()
        >>> loss.backward()  # the gradients are averaged over the ranks here
        >>> model.module.weight.grad.shape, len(model.bucketer.buckets)
        ((2, 3), 1)
        >>> dist.destroy_process_group()
    """

    def __init__(self, module: Module, group: ProcessGroup | Backend | None = None,
                 bucket_cap_mb: float = DEFAULT_BUCKET_CAP_MB,
                 broadcast_buffers: bool = True) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError("DistributedDataParallel: module must be a netcl.nn.Module, got "
                            f"{type(module).__name__}")
        self.module = module
        self.backend = backend_of(group)
        self.broadcast_buffers = broadcast_buffers
        self.bucketer = GradBucketer(module.parameters(), self.backend, bucket_cap_mb)
        self._sync = True
        self._fired: set[int] = set()
        self._buffer_staging: dict[str, FlatStaging] = {}
        self._slots = [(mod, name, p) for mod in module.modules()
                       for name, p in mod.named_parameters(recurse=False)
                       if p in self.bucketer]
        with ag.no_grad():
            broadcast_tensors([*module.parameters(), *self._buffers_of()], self.backend)

    def _buffers_of(self) -> list[Tensor]:
        return [b for _, b in self.module.named_buffers() if b is not None]

    # -- forward -----------------------------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._fired:
            pending = self.bucketer.pending()
            raise RuntimeError(
                f"DistributedDataParallel: the previous backward left {len(pending)} parameters "
                f"without a gradient (shapes {[p.shape for p in pending][:8]}), so their "
                "reduction never finished; call finish_sync() after backward when some "
                "parameters take no part in the forward")
        if self.broadcast_buffers and self.module.training and self.backend.world_size > 1:
            with ag.no_grad():
                broadcast_tensors(self._buffers_of(), self.backend,
                                  staging=self._buffer_staging)
        if not (self._sync and ag.is_recording() and self._slots):
            return self.module(*args, **kwargs)
        views: dict[int, Tensor] = {}
        for _, _, p in self._slots:
            if id(p) not in views:
                views[id(p)] = ag.backward_hook(p, self._hook_for(p))
        try:
            for mod, name, p in self._slots:
                object.__setattr__(mod, name, views[id(p)])
            return self.module(*args, **kwargs)
        finally:
            for mod, name, p in self._slots:
                object.__setattr__(mod, name, p)

    def _hook_for(self, p: Tensor) -> Any:
        def hook(g: Tensor) -> Tensor | None:
            return self._ready(p, g)
        return hook

    def _ready(self, p: Tensor, g: Tensor) -> Tensor | None:
        """``p``'s gradient of this backward arrived (NOTE [ Reducing buckets during backward ])."""
        old = p.grad
        if old is None:
            self.bucketer.add_grads(p, g)
        else:
            self.bucketer.add_grads(p, old, g)
        self._fired.add(id(p))
        if len(self._fired) < len(self.bucketer.params):
            return None
        self._fired.clear()
        self.bucketer.finish(skip=[p])
        mean = self.bucketer.reduced(p).reshape(-1)
        if old is None:
            own = mean
        elif old.dtype != mean.dtype:
            own = mean - old.to_host().reshape(-1)
        else:  # mean - old, in the bucketer's scratch (no array made per step)
            own = self.bucketer._scratch_like(mean)
            np.subtract(mean, self.bucketer._host_of(old, own), out=own)
        out = Tensor.from_shape(g.queue, g.shape, g.dtype, fill=None)
        wait([upload(out, own)])
        return out

    def finish_sync(self) -> None:
        """Finish the reduction a backward started, handing over the gradients (or zeros) of
        the parameters whose hook did not run; nothing to do when it finished in backward."""
        if not self._fired:
            return
        for p in self.bucketer.pending():
            if p.grad is None:
                self.bucketer.add_grads(p)
            else:
                self.bucketer.add_grads(p, p.grad)
        self._fired.clear()
        self.bucketer.finish()

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside, backward accumulates gradients locally without reducing them; the first
        backward after it averages the accumulated gradients (PyTorch's ``no_sync``)."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    # -- checkpoints: the plain module's names ----------------------------------------------

    def state_dict(self) -> Any:
        return self.module.state_dict()

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        self.module.load_state_dict(state, strict)
