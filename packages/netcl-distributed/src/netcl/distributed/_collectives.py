"""Collectives on netcl Tensors and NumPy arrays, with ``torch.distributed``'s names.

Each function stages its tensors through the host (:func:`host_array`: the storage itself on
the NumPy backend, one download on OpenCL), runs the group backend's in-place collective and
writes the result back into the same tensor (:func:`write_back`: nothing to do where the host
array is the storage). NumPy arrays must be C-contiguous; they are updated in place.

:func:`all_reduce` and :func:`broadcast` stage an OpenCL tensor through a host array lent by
the group's pool (one per shape and dtype, kept from call to call: NOTE [ Persistent host
staging ] in :mod:`._staging`), so a training loop's calls make no new arrays after the first.

Examples:
    >>> import numpy as np
    >>> from ._group import init_process_group, destroy_process_group
    >>> _ = init_process_group("shm", rank=0, world_size=1)
    >>> x = np.array([1.0, 2.0], dtype=np.float32)
    >>> all_reduce(x, op="max"); x.tolist()
    [1.0, 2.0]
    >>> out = np.zeros((1, 2), dtype=np.float32)
    >>> all_gather_into_tensor(out, x); out.tolist()
    [[1.0, 2.0]]
    >>> destroy_process_group()
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np

from netcl.core.dtypes import numpy_dtype
from netcl.core.tensor import Tensor, copy_from_host

from ._backend import Backend, Work, check_contiguous
from ._group import ProcessGroup, get_group
from ._staging import StagingPool, download, own_array, upload, wait

__all__ = ["Array", "all_gather", "all_gather_into_tensor", "all_reduce", "barrier",
           "broadcast", "gather", "host_array", "reduce_scatter", "reduce_scatter_tensor",
           "scatter", "write_back"]

#: What the collectives accept: a netcl Tensor (any backend) or a NumPy array.
Array: TypeAlias = "Tensor | np.ndarray[Any, Any]"


def host_array(name: str, t: Array) -> np.ndarray[Any, Any]:
    """A C-contiguous host array holding ``t``'s data: ``t`` itself (NumPy array), the
    tensor's own storage (NumPy backend), or a downloaded copy (OpenCL).

    Raises:
        TypeError: ``t`` is neither a Tensor nor a NumPy array.
        ValueError: a NumPy array that is not C-contiguous.
    """
    if isinstance(t, np.ndarray):
        return check_contiguous(name, "tensor", t)
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a netcl Tensor or a NumPy array, "
                        f"got {type(t).__name__}")
    return np.ascontiguousarray(t.to_host())


def write_back(t: Array, host: np.ndarray[Any, Any]) -> None:
    """Put ``host`` (from :func:`host_array`) back into ``t`` where it is not ``t``'s storage."""
    if isinstance(t, Tensor) and not (t.array is not None and np.shares_memory(t.array, host)):
        copy_from_host(t, host)


# the staging arrays of each group's backend (NOTE [ Persistent host staging ])
_pools: weakref.WeakKeyDictionary[Backend, StagingPool] = weakref.WeakKeyDictionary()


def _pool_of(backend: Backend) -> StagingPool:
    pool = _pools.get(backend)
    if pool is None:
        pool = _pools[backend] = StagingPool()
    return pool


def _stage(name: str, t: Array, backend: Backend) -> tuple[np.ndarray[Any, Any], bool]:
    """``(host, lent)``: :func:`host_array`'s array, except that an OpenCL tensor is copied
    into an array lent by ``backend``'s pool (``lent``), which :func:`_unstage` gives back."""
    if not isinstance(t, Tensor):
        return host_array(name, t), False
    own = own_array(t)
    if own is not None or t.array is not None:  # the NumPy backend: no staging
        return (own if own is not None else host_array(name, t)), False
    host = _pool_of(backend).take(t.shape, numpy_dtype(t.dtype))
    wait([download(t, host)])
    return host, True


def _unstage(t: Array, host: np.ndarray[Any, Any], lent: bool, backend: Backend) -> None:
    """:func:`write_back`, and give a lent ``host`` back to the pool."""
    if lent and isinstance(t, Tensor):
        wait([upload(t, host)])
        _pool_of(backend).give(host)
    else:
        write_back(t, host)


class _StagedWork(Work):
    """An async all_reduce of a Tensor: writes the result back once waited for."""

    def __init__(self, inner: Work, tensor: Array, host: np.ndarray[Any, Any], lent: bool,
                 backend: Backend) -> None:
        super().__init__(inner._future)
        self._tensor: Array | None = tensor
        self._host = host
        self._lent = lent
        self._backend = backend

    def wait(self, timeout: float | None = None) -> None:
        super().wait(timeout)
        tensor, self._tensor = self._tensor, None
        if tensor is not None:
            _unstage(tensor, self._host, self._lent, self._backend)


def all_reduce(tensor: Array, op: str = "sum", group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` over the ranks with ``op`` (sum, mean, max, min), in place.

    With ``async_op=True`` returns a :class:`~netcl.distributed._backend.Work`; the result is
    in ``tensor`` once its ``wait()`` returned.
    """
    backend = get_group(group).backend
    host, lent = _stage("all_reduce", tensor, backend)
    if async_op:
        return _StagedWork(backend.all_reduce_async(host, op), tensor, host, lent, backend)
    backend.all_reduce(host, op)
    _unstage(tensor, host, lent, backend)
    return None


def broadcast(tensor: Array, src: int = 0, group: ProcessGroup | None = None) -> None:
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor``."""
    backend = get_group(group).backend
    host, lent = _stage("broadcast", tensor, backend)
    backend.broadcast(host, src)
    _unstage(tensor, host, lent, backend)


def barrier(group: ProcessGroup | None = None) -> None:
    """Wait until every rank of ``group`` called ``barrier``."""
    get_group(group).backend.barrier()


def all_gather_into_tensor(output: Array, tensor: Array,
                           group: ProcessGroup | None = None) -> None:
    """``output`` (``world_size * tensor.size`` elements, e.g. shape ``(world, *shape)``)
    gets every rank's ``tensor`` in rank order."""
    pg = get_group(group)
    send = host_array("all_gather_into_tensor", tensor)
    recv = host_array("all_gather_into_tensor", output)
    stacked = _stacked("all_gather_into_tensor", "output", recv, send.shape, pg.world_size)
    pg.backend.all_gather(send, stacked)
    write_back(output, recv)


def all_gather(tensor_list: Sequence[Array], tensor: Array,
               group: ProcessGroup | None = None) -> None:
    """``tensor_list[k]`` gets rank k's ``tensor`` (a list of ``world_size`` like it)."""
    pg = get_group(group)
    send = host_array("all_gather", tensor)
    _check_list("all_gather", "tensor_list", tensor_list, pg.world_size)
    recv = np.empty((pg.world_size, *send.shape), dtype=send.dtype)
    pg.backend.all_gather(send, recv)
    _unstack(tensor_list, recv)


def reduce_scatter_tensor(output: Array, tensor: Array, op: str = "sum",
                          group: ProcessGroup | None = None) -> None:
    """Rank r's ``output`` = the reduction over ranks of their r-th part of ``tensor``
    (``world_size * output.size`` elements)."""
    pg = get_group(group)
    recv = host_array("reduce_scatter_tensor", output)
    send = host_array("reduce_scatter_tensor", tensor)
    stacked = _stacked("reduce_scatter_tensor", "tensor", send, recv.shape, pg.world_size)
    pg.backend.reduce_scatter(stacked, recv, op)
    write_back(output, recv)


def reduce_scatter(output: Array, input_list: Sequence[Array], op: str = "sum",
                   group: ProcessGroup | None = None) -> None:
    """Rank r's ``output`` = the reduction over ranks of their ``input_list[r]``."""
    pg = get_group(group)
    recv = host_array("reduce_scatter", output)
    _check_list("reduce_scatter", "input_list", input_list, pg.world_size)
    send = _stack("reduce_scatter", input_list, recv)
    pg.backend.reduce_scatter(send, recv, op)
    write_back(output, recv)


def scatter(tensor: Array, scatter_list: Sequence[Array] | None = None, src: int = 0,
            group: ProcessGroup | None = None) -> None:
    """Rank r's ``tensor`` = ``scatter_list[r]`` of rank ``src`` (``None`` on other ranks)."""
    pg = get_group(group)
    recv = host_array("scatter", tensor)
    send = None
    if pg.rank == src:
        if scatter_list is None:
            raise ValueError(f"scatter: rank {src} is the source and needs scatter_list")
        _check_list("scatter", "scatter_list", scatter_list, pg.world_size)
        send = _stack("scatter", scatter_list, recv)
    pg.backend.scatter(send, recv, src)
    write_back(tensor, recv)


def gather(tensor: Array, gather_list: Sequence[Array] | None = None, dst: int = 0,
           group: ProcessGroup | None = None) -> None:
    """``gather_list[k]`` of rank ``dst`` gets rank k's ``tensor`` (``None`` elsewhere)."""
    pg = get_group(group)
    send = host_array("gather", tensor)
    recv = None
    if pg.rank == dst:
        if gather_list is None:
            raise ValueError(f"gather: rank {dst} is the destination and needs gather_list")
        _check_list("gather", "gather_list", gather_list, pg.world_size)
        recv = np.empty((pg.world_size, *send.shape), dtype=send.dtype)
    pg.backend.gather(send, recv, dst)
    if recv is not None and gather_list is not None:
        _unstack(gather_list, recv)


def _stacked(name: str, what: str, flat: np.ndarray[Any, Any], part: tuple[int, ...],
             world: int) -> np.ndarray[Any, Any]:
    """``flat`` seen as ``(world, *part)``; ``ValueError`` where its size does not fit."""
    size = int(np.prod(part, dtype=np.int64))
    if flat.size != world * size:
        raise ValueError(f"{name}: {what} must have world_size * {size} = {world * size} "
                         f"elements, got shape {flat.shape}")
    return flat.reshape(world, *part)


def _check_list(name: str, what: str, items: Sequence[Array], world: int) -> None:
    if len(items) != world:
        raise ValueError(f"{name}: {what} must hold world_size = {world} tensors, "
                         f"got {len(items)}")


def _stack(name: str, items: Sequence[Array], like: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The items as one ``(len, *like.shape)`` array of ``like``'s dtype."""
    out = np.empty((len(items), *like.shape), dtype=like.dtype)
    for k, item in enumerate(items):
        host = host_array(name, item)
        if host.shape != like.shape or host.dtype != like.dtype:
            raise ValueError(f"{name}: item {k} must be {like.dtype} of shape {like.shape}, "
                             f"got {host.dtype} {host.shape}")
        out[k] = host
    return out


def _unstack(items: Sequence[Array], stacked: np.ndarray[Any, Any]) -> None:
    """Copy ``stacked[k]`` into ``items[k]`` (arrays in place; tensors through the host)."""
    for k, item in enumerate(items):
        if isinstance(item, np.ndarray):
            item[...] = stacked[k]
        else:
            copy_from_host(item, stacked[k])
