"""Gradient bucketing: many parameter gradients travel as a few flat messages.

# NOTE [ Gradient buckets ]
Parameters are grouped, in reverse registration order (roughly the order the backward pass
produces their gradients: last layer first), into buckets of one dtype and at most
``bucket_cap_mb`` MiB each (25 MiB, PyTorch DDP's default). A bucket owns one flat host array
allocated once; a gradient is copied into its slice (:meth:`GradBucketer.add_grads` copies a
gradient tensor straight from the device into it, without a temporary array: NOTE [ Persistent
host staging ] in :mod:`._staging`), and when every slice of a bucket is filled (and its copies
have landed) the bucket's mean all-reduce starts asynchronously on the backend's worker thread
(:meth:`~._backend.Backend.all_reduce_async`), so the reduction of one bucket overlaps the
packing of the next (and, driven by :class:`~._ddp.DistributedDataParallel`'s hooks, the rest
of the backward pass). :meth:`GradBucketer.finish` waits for the buckets in launch order and
writes each averaged slice back into its parameter's ``.grad`` in place (from the same slice,
one wait for all the copies).

A parameter without a gradient on this rank contributes zeros (every rank must send the same
bucket); after the reduction it gets the averaged gradient like the others.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netcl.core.dtypes import numpy_dtype
from netcl.core.tensor import Tensor, copy_from_host
from netcl.nn import Module

from ._backend import Backend, Work
from ._group import ProcessGroup, get_group
from ._staging import download, own_array, upload, wait

__all__ = ["GradBucketer", "backend_of", "sync_grads"]

DEFAULT_BUCKET_CAP_MB = 25.0


def backend_of(group: ProcessGroup | Backend | None) -> Backend:
    """The backend of ``group`` (a :class:`ProcessGroup`, a backend, or the default group)."""
    if isinstance(group, Backend):
        return group
    return get_group(group).backend


@dataclass(eq=False)
class _Bucket:
    """One flat message: the parameters, their offsets into ``flat`` (``views[i]`` is
    parameter i's 1-D slice), the copies into it not yet waited for, and its reduction."""

    params: list[Tensor]
    offsets: list[int]
    flat: np.ndarray[Any, Any]
    views: list[np.ndarray[Any, Any]] = field(default_factory=list)
    filled: set[int] = field(default_factory=set)
    events: list[Any] = field(default_factory=list)
    work: Work | None = None


class GradBucketer:
    """Packs the gradients of ``params`` into flat buckets and averages them over the ranks.

    Args:
        params: the parameters (tensors with ``requires_grad``; others are skipped), in
            registration order (e.g. ``model.parameters()``).
        group: a :class:`ProcessGroup` or backend (default: the default group).
        bucket_cap_mb: the largest bucket, MiB (a larger single parameter gets its own).

    :meth:`reduce` is the whole synchronization (pack, start, wait, write back);
    :meth:`add`/:meth:`finish` are its two halves for callers that hand gradients over as they
    are produced (NOTE [ Gradient buckets ]).

    Raises:
        ValueError: ``bucket_cap_mb`` is not positive.

    Examples:
        >>> import netcl.distributed as dist
        >>> from netcl.core import manager
        >>> from netcl.nn import Linear, Sequential
        >>> q = manager.default("cpu").queue
        >>> group = dist.init_process_group("shm", rank=0, world_size=1)
        >>> model = Sequential(Linear(512, 512, queue=q), Linear(512, 10, queue=q))
        >>> buckets = GradBucketer(model.parameters(), group, bucket_cap_mb=0.5).buckets
        >>> [[tuple(p.shape) for p in b.params] for b in buckets]  # last layer first
        [[(10,), (10, 512), (512,)], [(512, 512)]]
        >>> dist.destroy_process_group()
    """

    def __init__(self, params: Iterable[Tensor], group: ProcessGroup | Backend | None = None,
                 bucket_cap_mb: float = DEFAULT_BUCKET_CAP_MB) -> None:
        if not bucket_cap_mb > 0:
            raise ValueError(f"GradBucketer: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.backend = backend_of(group)
        cap = int(bucket_cap_mb * (1 << 20))
        unique: dict[int, Tensor] = {}  # shared parameters once, in first-seen order
        for p in params:
            if p.requires_grad:
                unique.setdefault(id(p), p)
        self.buckets: list[_Bucket] = []
        self._where: dict[int, tuple[_Bucket, int]] = {}
        groups: list[list[Tensor]] = []
        size = 0
        for p in reversed(list(unique.values())):
            nbytes = p.size * numpy_dtype(p.dtype).itemsize
            last = groups[-1] if groups else None
            if last is None or last[0].dtype != p.dtype or size + nbytes > cap:
                groups.append([p])
                size = nbytes
            else:
                last.append(p)
                size += nbytes
        for members in groups:
            offsets = np.cumsum([0] + [p.size for p in members]).tolist()
            flat = np.zeros(offsets[-1], numpy_dtype(members[0].dtype))
            views = [flat[a:b] for a, b in itertools.pairwise(offsets)]
            bucket = _Bucket(members, offsets[:-1], flat, views)
            self.buckets.append(bucket)
            for i, p in enumerate(members):
                self._where[id(p)] = (bucket, i)
        self._launched: list[_Bucket] = []
        # per dtype, room for the largest parameter: the second term of add_grads (made once)
        self._scratch: dict[np.dtype[Any], np.ndarray[Any, Any]] = {}

    @property
    def params(self) -> list[Tensor]:
        """Every bucketed parameter, bucket by bucket."""
        return [p for b in self.buckets for p in b.params]

    def __contains__(self, p: object) -> bool:
        return id(p) in self._where

    def add(self, p: Tensor, grad: np.ndarray[Any, Any] | None) -> bool:
        """Copy ``grad`` (host data of ``p``'s shape; ``None``: zeros) into ``p``'s slice; when
        that fills its bucket, start the bucket's all-reduce. Returns whether it started."""
        bucket, i = self._where[id(p)]
        start, n = bucket.offsets[i], bucket.params[i].size
        if grad is None:
            bucket.flat[start: start + n] = 0
        else:
            bucket.flat[start: start + n] = np.asarray(grad).reshape(-1)
        return self._filled(bucket, i)

    def add_grads(self, p: Tensor, *grads: Tensor) -> bool:
        """Put the sum of ``grads`` (tensors of ``p``'s shape; none: zeros) into ``p``'s slice,
        copying the first straight from its device, without blocking; when that fills its
        bucket, wait for the bucket's copies and start its all-reduce. Returns whether it
        started.

        The same values as ``add(p, sum(g.to_host() for g in grads))``, without the arrays
        that call makes (NOTE [ Persistent host staging ]).

        Examples:
            >>> import numpy as np
            >>> import netcl.distributed as dist
            >>> from netcl.core import manager
            >>> from netcl.nn import Linear
            >>> q = manager.default("cpu").queue
            >>> group = dist.init_process_group("shm", rank=0, world_size=1)
            >>> layer = Linear(2, 1, queue=q)
            >>> bucketer = GradBucketer(layer.parameters(), group)
            >>> ones = [Tensor.from_host(q, np.ones(p.shape, np.float32)) for p in bucketer.params]
            >>> [bucketer.add_grads(p, g, g) for p, g in zip(bucketer.params, ones)]
            [False, True]
            >>> bucketer.wait(); bucketer.reduced(layer.weight).tolist()
            [[2.0, 2.0]]
            >>> dist.destroy_process_group()
        """
        bucket, i = self._where[id(p)]
        view = bucket.views[i]
        if any(g.dtype != p.dtype for g in grads):  # summed in their dtype, as add's callers did
            return self.add(p, functools.reduce(np.add, [g.to_host() for g in grads]))
        if not grads:
            view[...] = 0
        else:
            event = download(grads[0], view)
            if len(grads) > 1:
                wait([event])
                event = None
                for g in grads[1:]:
                    np.add(view, self._host_of(g, view), out=view)
            bucket.events.append(event)
        return self._filled(bucket, i)

    def _scratch_like(self, like: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """A 1-D host array of ``like``'s size and dtype, this bucketer's own (made once per
        dtype, for its largest parameter; its contents last until the next call that uses
        it)."""
        scratch = self._scratch.get(like.dtype)
        if scratch is None or scratch.size < like.size:
            largest = max([like.size, *(p.size for b in self.buckets for p in b.params
                                        if b.flat.dtype == like.dtype)])
            scratch = self._scratch[like.dtype] = np.empty(largest, like.dtype)
        return scratch[:like.size]

    def _host_of(self, t: Tensor, like: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """``t``'s data as a 1-D host array of ``like``'s dtype: its own array on the NumPy
        backend, else downloaded into :meth:`_scratch_like` (valid until its next use)."""
        own = own_array(t)
        if own is not None and own.dtype == like.dtype:
            return own.reshape(-1)
        out = self._scratch_like(like)
        wait([download(t, out)])
        return out

    def _filled(self, bucket: _Bucket, i: int) -> bool:
        bucket.filled.add(i)
        if len(bucket.filled) < len(bucket.params) or bucket.work is not None:
            return False
        events, bucket.events = bucket.events, []
        wait(events)
        bucket.work = self.backend.all_reduce_async(bucket.flat, "mean")
        self._launched.append(bucket)
        return True

    def pending(self) -> list[Tensor]:
        """The parameters whose gradient was not added since the last :meth:`finish`."""
        return [p for b in self.buckets for i, p in enumerate(b.params) if i not in b.filled]

    def reduced(self, p: Tensor) -> np.ndarray[Any, Any]:
        """``p``'s averaged gradient (valid after :meth:`wait`), a view of its bucket."""
        bucket, i = self._where[id(p)]
        start = bucket.offsets[i]
        return bucket.flat[start: start + p.size].reshape(p.shape)

    def wait(self) -> None:
        """Wait for every started bucket (in start order); re-raise a reduction's error."""
        launched, self._launched = self._launched, []
        for bucket in launched:
            work, bucket.work = bucket.work, None
            if work is not None:
                work.wait()

    def finish(self, skip: Sequence[Tensor] = ()) -> None:
        """Wait for the buckets and write each averaged gradient into its ``.grad`` (in place
        where it exists), except for the parameters in ``skip``; then reset for the next step.

        Raises:
            RuntimeError: a bucket was never started (some gradients were not added).
        """
        missing = self.pending()
        if missing:
            self.wait()
            for b in self.buckets:
                b.filled.clear()
                events, b.events = b.events, []
                wait(events)
            raise RuntimeError(f"GradBucketer.finish: {len(missing)} parameters got no gradient "
                               f"this step (shapes {[p.shape for p in missing][:8]}); every rank "
                               "must hand over every bucketed gradient")
        self.wait()
        skipped = {id(p) for p in skip}
        uploads = []
        for bucket in self.buckets:
            bucket.filled.clear()
            for p, view in zip(bucket.params, bucket.views):
                if id(p) in skipped:
                    continue
                if p.grad is None:
                    write_grad(p, view.reshape(p.shape))
                else:
                    uploads.append(upload(p.grad, view))
        wait(uploads)  # the slices are written again next step

    def reduce(self) -> None:
        """Average every parameter's ``.grad`` over the ranks (``None`` counts as zeros)."""
        for bucket in self.buckets:
            for p in bucket.params:
                if p.grad is None:
                    self.add_grads(p)
                else:
                    self.add_grads(p, p.grad)
        self.finish()


def write_grad(p: Tensor, value: np.ndarray[Any, Any]) -> None:
    """``p.grad = value``: in place when ``p`` has a gradient, else a new tensor."""
    if p.grad is None:
        p.grad = Tensor.from_host(p.queue, np.array(value, copy=True), dtype=p.dtype)
    else:
        copy_from_host(p.grad, value)


def _average_replicas(replicas: Sequence[Module]) -> None:
    """Average the gradients of identically built models in this process (spec ``sync_grads``)."""
    lists = [list(m.parameters()) for m in replicas]
    if len({len(ps) for ps in lists}) != 1:
        raise ValueError(f"sync_grads: replicas must have the same parameters, got "
                         f"{[len(ps) for ps in lists]} parameters")
    for k, group in enumerate(zip(*lists)):
        shapes = {p.shape for p in group}
        if len(shapes) != 1:
            raise ValueError(f"sync_grads: parameter {k} has different shapes across replicas: "
                             f"{[p.shape for p in group]}")
        grads = [p.grad for p in group]
        if all(g is None for g in grads):
            continue
        hosts = [np.zeros(group[0].shape, numpy_dtype(group[0].dtype)) if g is None
                 else g.to_host() for g in grads]
        mean = np.mean(np.stack(hosts), axis=0, dtype=np.float64) if hosts[0].dtype.kind == "f" \
            else np.mean(np.stack(hosts), axis=0)
        for p in group:
            write_grad(p, mean.astype(hosts[0].dtype))


def sync_grads(model: Module | Iterable[Tensor] | Sequence[Module],
               group: ProcessGroup | Backend | None = None,
               bucket_cap_mb: float = DEFAULT_BUCKET_CAP_MB) -> None:
    """Average the gradients of ``model`` over the ranks of ``group``, bucketed.

    ``model`` is a module or its parameters (the gradients travel in buckets, NOTE [ Gradient
    buckets ]); or a list of replica modules in this process (spec 001's
    ``sync_grads(replicas)``, e.g. one per device): then their gradients are averaged with each
    other and no process group is needed.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> from netcl.core.tensor import Tensor
        >>> from netcl.nn import Linear
        >>> q = manager.default("cpu").queue
        >>> a, b = Linear(2, 1, queue=q), Linear(2, 1, queue=q)
        >>> for m, v in ((a, 1.0), (b, 3.0)):
        ...     for p in m.parameters():
        ...         p.grad = Tensor.from_host(q, np.full(p.shape, v, np.float32))
        >>> sync_grads([a, b])
        >>> a.bias.grad.to_host().tolist(), b.weight.grad.to_host().tolist()
        ([2.0], [[2.0, 2.0]])
    """
    if isinstance(model, (list, tuple)) and model and all(isinstance(m, Module) for m in model):
        _average_replicas(model)
        return
    params = model.parameters() if isinstance(model, Module) else model
    GradBucketer(params, group, bucket_cap_mb).reduce()  # type: ignore[arg-type]

