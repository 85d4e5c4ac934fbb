"""``Tensor``: a contiguous n-d array on a device (an OpenCL buffer or a NumPy array).

A tensor is contiguous with an element ``offset`` into its storage; :func:`reshape` and
:func:`narrow_view` (one contiguous run, what ``x[1]`` or ``x[2:5]`` is) are the only views.
Everything else (transpose, strided slicing, concat) is an op in ``netcl.ops``; the Tensor's
PyTorch-style methods and operators call them (:mod:`netcl.core.tensor_methods`). A tensor given
back with :meth:`Tensor.release` raises ``ValueError`` on every later use (see the class docstring).

Examples:
    >>> import numpy as np
    >>> from netcl.core.device import manager
    >>> q = manager.default("cpu").queue
    >>> t = Tensor.from_host(q, np.arange(6, dtype=np.float32))
    >>> m = reshape(t, (2, 3))
    >>> m.shape, m.dtype, m._base is t
    ((2, 3), 'float32', True)
    >>> m.to_host().sum()
    np.float32(15.0)
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ._cl import cl
from .backend.cpu import CPUBackend
from .backend.opencl import OpenCLBackend
from .capabilities import device_profile
from .device import CPUQueue, get_active_device
from .dtypes import FLOAT_DTYPES, canonical_dtype, check_host_dtype, numpy_dtype
from .memory import BufferHandle, BufferPool, get_persistent_pool
from .process import track_owner
from .recording import state as recording_state
from .tensor_methods import Size, TensorMethods, lookup

__all__ = [
    "CPU_BACKEND",
    "Tensor",
    "check_same_device",
    "check_shape",
    "copy_from_host",
    "host_default_dtype",
    "narrow_view",
    "output_tensor",
    "reshape",
]

#: The one NumPy backend object; ops pass it as ``_backend`` to wrap a NumPy result.
CPU_BACKEND = CPUBackend()
_TensorT = TypeVar("_TensorT", bound="Tensor")
_NO_DATA: Any = object()
_backends: dict[int, Any] = {}


def _backend_for(queue: Any, backend: str | None = None) -> Any:
    """The backend object serving ``queue`` (one OpenCLBackend per queue)."""
    name = backend or ("cpu" if isinstance(queue, CPUQueue) else "cl")
    if name not in ("cl", "cpu"):
        raise ValueError(f"Tensor: backend must be 'cl' or 'cpu', got {backend!r}")
    if name == "cpu":
        return CPU_BACKEND
    if isinstance(queue, CPUQueue):
        raise ValueError("Tensor: backend 'cl' needs an OpenCL queue, got a CPUQueue")
    found = _backends.get(id(queue))
    if found is None or found.queue is not queue:
        found = _backends[id(queue)] = OpenCLBackend(queue)
    return found


def check_shape(shape: Any, op: str) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints, or a typed error naming ``op``.

    Examples:
        >>> check_shape(3, "zeros"), check_shape([2, 0], "zeros")
        ((3,), (2, 0))
    """
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{op}: shape must be a sequence of ints, got {shape!r}") from None
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{op}: shape entries must be integers, got {shape!r}")
        if d < 0:
            raise ValueError(f"{op}: shape entries must be >= 0, got {shape!r}")
        out.append(int(d))
    return tuple(out)


def host_default_dtype(data: Any) -> str:
    """The dtype :meth:`Tensor.from_host` gives ``data`` without ``dtype=``: float32, except
    that int32/int64/uint8 NumPy arrays keep theirs and booleans become uint8.

    Examples:
        >>> host_default_dtype(np.arange(3)), host_default_dtype([1, 2]), host_default_dtype(
        ...     np.array([True]))
        ('int64', 'float32', 'uint8')
    """
    src = data if isinstance(data, np.ndarray) else np.asarray(data)
    if src.dtype == np.bool_:
        return "uint8"
    name = src.dtype.name
    keep = isinstance(data, np.ndarray) and name in ("int32", "int64", "uint8")
    return name if keep else "float32"


def _check_dtype_on_device(dtype: str, queue: Any, op: str) -> None:
    if dtype != "float64" or isinstance(queue, CPUQueue):
        return
    if not device_profile(queue.device).has_fp64:
        raise ValueError(
            f"{op}: dtype float64 needs cl_khr_fp64, which {queue.device.name.strip()!r} lacks; "
            "use float32"
        )


# NOTE [ Released tensors ]
# release() gives a tensor's storage back at once (its pool may hand the buffer to the next
# tensor), so every later use must fail with one clear error: before, a kernel got a NULL
# buffer and the process died with SIGSEGV, or the NumPy path tripped over `array is None`.
# Every path to the data -- each op, the elementwise fast path, kernels, to_host, reshape,
# copy_from_host -- reads `t.buffer` or `t.array`, so the check sits on those two attributes,
# and costs a live tensor nothing: they are plain instance attributes, and the class attribute
# behind both is _ReleasedStorage, a non-data descriptor, which Python consults only when the
# instance has no value of its own (a live tensor's read is one dict lookup, as before).
# release() deletes both values from the tensor and from every live view of it that reshape
# made (a view shares the buffer, so it would otherwise read the next owner's data).


class _ReleasedStorage:
    """The class attribute behind ``Tensor.buffer`` and ``Tensor.array``: the dataclass default
    (``None``) and, once :meth:`Tensor.release` removed a tensor's own value, the error."""

    def __get__(self, obj: Tensor | None, owner: type | None = None) -> None:
        if obj is None:
            return None  # the fields' default, read by @dataclass
        raise ValueError(
            f"tensor was released: shape {obj.shape}, {obj.dtype}, on {_where(obj)}; its "
            "storage went back with Tensor.release() (on it, or on the tensor it views), so it "
            "cannot be used again"
        )


_RELEASED: Any = _ReleasedStorage()
_MAX_VIEW_REFS = 16  # dead view references are pruned from a base past this many


@dataclass(eq=False)
class Tensor(TensorMethods):
    """An n-d array on a device. Build it with :meth:`from_host` or :meth:`from_shape`.

    On the OpenCL backend ``buffer`` holds the data (``offset`` elements in); on the NumPy
    backend ``array`` does. ``requires_grad``, ``grad`` and ``grad_fn`` belong to autograd.

    The PyTorch-style methods and operators (``x + 1``, ``x @ w``, ``x[0]``, ``x.sum(dim=1)``,
    ``x.item()``, ``x.to("cpu")``, ``loss.backward()``) come from
    :class:`~netcl.core.tensor_methods.TensorMethods`; their ops are registered by netcl-ops
    and netcl-autograd.

    :meth:`release` gives the storage back at once. From then on every use of the tensor, or
    of a view of it made by :func:`reshape`, raises ``ValueError("tensor was released: ...")``
    on every backend: each op, ``to_host``, ``reshape``, reading ``buffer`` or ``array``. Its
    ``shape``, ``dtype`` and ``released`` can still be read, and ``release`` called again.

    Examples:
        >>> from netcl.core.device import manager
        >>> t = Tensor.from_host(manager.default("cpu").queue, [1.0, 2.0])
        >>> t.release()
        >>> t.released, t.shape
        (True, (2,))
        >>> t.to_host()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: tensor was released: shape (2,), float32, on cpu; its storage went back ...
    """

    buffer: Any = _RELEASED  # see NOTE [ Released tensors ]
    shape: tuple[int, ...] = ()
    dtype: str = "float32"
    context: Any = None
    queue: Any = None
    pool_handle: BufferHandle | None = None
    persistent: bool = False
    requires_grad: bool = False
    grad: Tensor | None = None
    grad_fn: Callable[..., Any] | None = None
    pending_event: Any = None
    pending_release: BufferHandle | None = None
    host_ref: np.ndarray[Any, Any] | None = None
    array: np.ndarray[Any, Any] | None = _RELEASED  # see NOTE [ Released tensors ]
    offset: int = 0
    _base: Tensor | None = field(default=None, repr=False)
    _backend: Any = field(default=None, repr=False)
    # weak references to the views reshape made of this tensor, which release() retires too
    _views: list[weakref.ref[Tensor]] | None = field(default=None, init=False, repr=False)
    _released: bool = field(default=False, init=False, repr=False)
    # Tensor.size, made once (a Size is an int subclass: building one per read cost ~10x a
    # plain attribute read, and ops read the element count several times per call)
    _size: Size | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        recorder = recording_state.recorder
        if recorder is not None:  # a graph capture keeps the step's tensors until it ends
            recorder.created(self)

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def from_host(
        cls: type[_TensorT],
        queue: Any,
        data: Any = _NO_DATA,
        dtype: str | None = None,
        backend: str | None = None,
        async_copy: bool | None = None,
        use_pinned: bool | None = None,
    ) -> _TensorT:
        """Copy host data onto the device of ``queue`` (``None``: the active device).

        ``Tensor.from_host(array)`` (data only) uses the active device, as the spec pages do.
        ``dtype=None`` gives float32, except that int32/int64/uint8 NumPy arrays keep their dtype
        (labels and images stay integers).

        Raises:
            ValueError: unsupported ``dtype`` name.
            TypeError: data that is not booleans, integers or floats: complex (netcl has no
                complex dtype, and a cast would drop the imaginary part), datetime, timedelta,
                string, bytes, object or structured data (see
                :func:`netcl.core.dtypes.check_host_dtype`).
            MemoryError: the device cannot hold the data (its size and the device's limits are
                named).

        Examples:
            >>> import numpy as np
            >>> from netcl.core.device import manager
            >>> q = manager.default("cpu").queue
            >>> Tensor.from_host(q, np.eye(2)).dtype
            'float32'
            >>> Tensor.from_host(q, np.array([1, 2], dtype=np.int64)).dtype
            'int64'
            >>> Tensor.from_host(q, 2.5).shape, Tensor.from_host(q, np.array([True])).dtype
            ((), 'uint8')
        """
        if data is _NO_DATA:
            queue, data = None, queue
        if queue is None:
            queue = get_active_device().queue
        src = np.asarray(data)
        check_host_dtype(src.dtype, "Tensor.from_host")
        dtype = canonical_dtype(host_default_dtype(data) if dtype is None else dtype,
                                "Tensor.from_host")
        _check_dtype_on_device(dtype, queue, "Tensor.from_host")
        # np.asarray keeps 0-d data 0-d (ascontiguousarray would make it 1-d)
        host = np.asarray(src, dtype=numpy_dtype(dtype), order="C")
        be = _backend_for(queue, backend)
        if be.name == "cpu":
            arr = be.from_host(host, dtype)
            return cls(shape=host.shape, dtype=dtype, queue=queue, array=arr, _backend=be)
        tensor = cls(shape=host.shape, dtype=dtype, queue=queue, context=queue.context,
                     _backend=be)
        track_owner(tensor)
        if host.size == 0:
            return tensor
        up = be.from_host(host, async_copy=async_copy, use_pinned=use_pinned)
        tensor.buffer = up.buffer
        tensor.pool_handle = up.pool_handle
        tensor.pending_event = up.event
        tensor.pending_release = up.pending_release
        tensor.host_ref = up.host_ref
        return tensor

    @classmethod
    def from_shape(
        cls: type[_TensorT],
        queue: Any,
        shape: Sequence[int],
        dtype: str = "float32",
        fill: float | None = 0,
        pool: BufferPool | None = None,
        backend: str | None = None,
    ) -> _TensorT:
        """A new tensor of ``shape`` filled with ``fill`` (``None``: uninitialized).

        On the OpenCL backend the buffer is leased from ``pool`` (default: the persistent pool of
        the queue's context) and goes back to it when the tensor dies.

        Raises:
            ValueError: unsupported ``dtype`` name, or a negative shape entry.
            TypeError: a non-integer shape entry, or a ``fill`` that is not a boolean, integer or
                float (complex included).
            MemoryError: the device cannot hold ``shape`` of ``dtype``: the message names the
                size and the device's limits (on OpenCL its largest buffer and global memory).

        Examples:
            >>> from netcl.core.device import manager
            >>> q = manager.default("cpu").queue
            >>> Tensor.from_shape(q, (2, 2), fill=3).to_host().tolist()
            [[3.0, 3.0], [3.0, 3.0]]
        """
        if queue is None:
            queue = get_active_device().queue
        dims = check_shape(shape, "Tensor.from_shape")
        dtype = canonical_dtype(dtype, "Tensor.from_shape")
        if fill is not None:
            check_host_dtype(np.asarray(fill).dtype, "Tensor.from_shape", "fill")
        _check_dtype_on_device(dtype, queue, "Tensor.from_shape")
        be = _backend_for(queue, backend)
        if be.name == "cpu":
            arr = be.from_shape(dims, dtype, fill)
            return cls(shape=dims, dtype=dtype, queue=queue, array=arr, _backend=be)
        tensor = cls(shape=dims, dtype=dtype, queue=queue, context=queue.context, _backend=be)
        track_owner(tensor)
        if math.prod(dims):
            lease = be.from_shape(dims, dtype, fill, pool)
            tensor.pool_handle = lease
            tensor.buffer = lease.buffer
        return tensor

    # -- attributes --------------------------------------------------------------------------

    @property
    def backend(self) -> str:
        """``"cl"`` or ``"cpu"``."""
        if isinstance(self.queue, CPUQueue) or (not self._released and self.array is not None):
            return "cpu"
        return "cl"

    @property
    def released(self) -> bool:
        """True once :meth:`release` gave the storage back (this tensor's or its base's)."""
        return self._released

    @property
    def size(self) -> Size:
        """Number of elements: an int that PyTorch code can also call, ``x.size()`` giving the
        shape and ``x.size(d)`` one dimension (NOTE [ Tensor.size ] in
        :mod:`netcl.core.tensor_methods`)."""
        size = self._size
        if size is None or size._shape is not self.shape:
            size = self._size = Size(math.prod(self.shape), self.shape)
        return size

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of data."""
        return self.size * numpy_dtype(self.dtype).itemsize

    @property
    def device(self) -> Any:
        """The ``pyopencl.Device`` (``None`` on the NumPy backend)."""
        return getattr(self.queue, "device", None)

    @property
    def is_floating_point(self) -> bool:
        """True for float16/32/64."""
        return self.dtype in FLOAT_DTYPES

    # -- lifecycle ---------------------------------------------------------------------------

    def wait(self) -> None:
        """Block until the pending upload finished; release its pinned lease. Idempotent."""
        if self.pending_event is not None:
            self.pending_event.wait()
        elif self.pending_release is None and self.host_ref is None:
            return  # nothing pending: what every op's read of an op's result finds
        self._clear_pending()

    def _clear_pending(self) -> None:
        release, self.pending_release = self.pending_release, None
        self.pending_event = None
        if release is not None:
            release.release()
        # a zero-copy buffer keeps its host_ref: it *is* the storage
        if self._released or self.buffer is None or self.array is not None \
                or self.pool_handle is not None:
            self.host_ref = None

    def to_host(self) -> np.ndarray[Any, Any]:
        """Synchronously read the data into a NumPy array (the array itself on NumPy)."""
        recorder = recording_state.recorder
        if recorder is not None:  # a graph capture refuses reads it could not replay
            recorder.host_read("Tensor.to_host", self.shape, self.dtype)
        self.wait()
        if self.array is not None:
            return self.array.reshape(self.shape)
        if self.size == 0:
            return np.empty(self.shape, dtype=numpy_dtype(self.dtype))
        out: np.ndarray[Any, Any] = self._backend.to_host(
            self.buffer, self.shape, self.dtype, self.offset
        )
        return out

    def to_host_async(self) -> tuple[np.ndarray[Any, Any], Any]:
        """Start a download; returns ``(array, event)``; the array is valid once event is done."""
        recorder = recording_state.recorder
        if recorder is not None:
            recorder.host_read("Tensor.to_host_async", self.shape, self.dtype)
        self.wait()
        if self.array is not None or self.size == 0:
            return self.to_host(), None
        out: tuple[np.ndarray[Any, Any], Any] = self._backend.to_host_async(
            self.buffer, self.shape, self.dtype, self.offset
        )
        return out

    def numpy(self) -> np.ndarray[Any, Any]:
        """A host copy of the data, always a new array."""
        return np.array(self.to_host(), copy=True)

    def release(self) -> None:
        """Give the storage back now (a pooled buffer to its pool); idempotent.

        Every later use of this tensor or of a view of it raises ``ValueError`` (see the class
        docstring and NOTE [ Released tensors ]).
        """
        if self.released:
            return
        self.wait()
        handle, self.pool_handle = self.pool_handle, None
        if handle is not None and not self.persistent:
            handle.release()
        self._retire_zero_copy()
        self._drop_storage()

    def _drop_storage(self) -> None:
        # Uncovers _ReleasedStorage here and in every live view (NOTE [ Released tensors ]).
        # (`del`, not `self.__dict__`: touching __dict__ would slow every later attribute read)
        if not self._released:
            self._released = True
            del self.buffer, self.array
        self.host_ref = None
        views, self._views = self._views, None
        for ref in views or ():
            view = ref()
            if view is not None:
                view._drop_storage()

    def _retire_zero_copy(self) -> None:
        # A zero-copy buffer (no pool lease, host memory in host_ref) owned by this tensor.
        if not self._released and self.buffer is not None and self.host_ref is not None \
                and self.pool_handle is None and self._base is None and self._backend is not None:
            self._backend.retire(self.buffer, self.host_ref)
            self.host_ref = None

    def __del__(self) -> None:
        try:
            self.wait()
            handle = self.pool_handle
            if handle is not None and not self.persistent:
                self.pool_handle = None
                handle.release()
            self._retire_zero_copy()
        except Exception:
            pass

    def copy_(self, src: Any) -> Tensor:
        """Overwrite this tensor's data with ``src`` in place (PyTorch's ``copy_``); returns it.

        ``src`` is a Tensor on the same device (broadcast to this shape and cast to this
        dtype by ops) or host data (:func:`copy_from_host`). Everything holding this tensor,
        and every view of its storage, sees the new values. In-place writes are not recorded
        by autograd.

        Raises:
            ValueError: ``src`` is on another device, or ``src`` cannot broadcast to this
                shape; or a graph capture is running (a device-to-device copy is not
                capturable).

        Examples:
            >>> from netcl.core.device import manager
            >>> q = manager.default("cpu").queue
            >>> t = Tensor.from_shape(q, (2,))
            >>> t.copy_(Tensor.from_host(q, [3.0, 4.0])).to_host().tolist()
            [3.0, 4.0]
        """
        if not isinstance(src, Tensor):
            return copy_from_host(self, np.broadcast_to(np.asarray(src), self.shape))
        check_same_device("Tensor.copy_", self, src)
        if src.shape != self.shape:
            src = lookup("broadcast_to")(src, self.shape)
        if src.dtype != self.dtype:
            src = lookup("cast")(src, self.dtype)
        if src is self or self.size == 0:
            return self
        self.wait()
        src.wait()
        if self.array is not None:
            self.array[...] = src.to_host()
            return self
        if recording_state.recorder is not None:
            raise ValueError("Tensor.copy_: an in-place device copy cannot be captured; "
                             "write the update as an op whose result you keep")
        itemsize = numpy_dtype(self.dtype).itemsize
        cl().enqueue_copy(self.queue, self.buffer, src.buffer, byte_count=self.nbytes,
                          dst_offset=self.offset * itemsize, src_offset=src.offset * itemsize)
        return self

    def _narrow_view(self, start: int, shape: tuple[int, ...]) -> Tensor:
        """:func:`narrow_view` (what basic indexing returns for a contiguous run)."""
        return narrow_view(self, start, shape)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        host = self.to_host()
        if dtype is not None:
            host = host.astype(dtype, copy=False)
        return np.array(host, copy=True) if copy else host

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d Tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        where = "cpu" if self.backend == "cpu" else f"cl:{self.device.name.strip()}"
        head = f"Tensor(shape={self.shape}, dtype={self.dtype}, device={where}"
        if self.requires_grad:
            head += ", requires_grad=True"
        if self.released:
            return head + ", released)"
        if self.size <= 16 and (self.buffer is not None or self.array is not None):
            body = np.array2string(self.to_host(), separator=", ")
            return f"{head}, data={body})"
        return head + ")"


# NOTE [ Output tensors ]
# Every op allocates its result with output_tensor. Tensor.from_shape checks the shape, the
# dtype, the device's float64 support, the backend and the device's size limits, and asks the
# driver for the queue's context: the same answers every time for one (queue, shape, dtype),
# which was a third of a small op's host time. So the first call per key goes through
# from_shape, and later ones reuse its answers and only lease a buffer from the same pool.
# The table holds its queues (an id could be reused by a later queue) and is cleared when full.

_outputs: dict[tuple[Any, tuple[int, ...], str], tuple[tuple[int, ...], str, Any, Any, Any,
                                                      int]] = {}
_MAX_OUTPUTS = 4096


def output_tensor(queue: Any, shape: tuple[int, ...], dtype: str) -> Tensor:
    """An uninitialized ``Tensor.from_shape(queue, shape, dtype, fill=None)``: what ops
    allocate their results with (pooled on OpenCL, see NOTE [ Output tensors ]).

    ``shape`` is a tuple of ints; its checks, and every error of :meth:`Tensor.from_shape`,
    happen on the first call for each (queue, shape, dtype).

    Examples:
        >>> from netcl.core.device import manager
        >>> t = output_tensor(manager.default("cpu").queue, (2, 3), "float32")
        >>> t.shape, t.dtype
        ((2, 3), 'float32')
    """
    key = (queue, shape, dtype)
    try:
        spec = _outputs.get(key)
    except TypeError:  # an unhashable queue (the NumPy backend's) or shape
        spec = None
    if spec is None:
        return _first_output(queue, shape, dtype, key)
    dims, canonical, context, backend, pool, nbytes = spec
    tensor = Tensor(shape=dims, dtype=canonical, queue=queue, context=context, _backend=backend)
    track_owner(tensor)
    lease = pool.allocate(nbytes)
    tensor.pool_handle = lease
    tensor.buffer = lease.buffer
    return tensor


def _first_output(queue: Any, shape: tuple[int, ...], dtype: str,
                  key: tuple[Any, tuple[int, ...], str]) -> Tensor:
    tensor = Tensor.from_shape(queue, shape, dtype, fill=None)
    lease = tensor.pool_handle
    if lease is None or tensor.array is not None:  # NumPy, or no elements: nothing to keep
        return tensor
    try:
        hash(key)
    except TypeError:
        return tensor
    if len(_outputs) >= _MAX_OUTPUTS:
        _outputs.clear()
    _outputs[key] = (tensor.shape, tensor.dtype, tensor.context, tensor._backend,
                     get_persistent_pool(queue), lease.nbytes)
    return tensor


def reshape(t: Tensor, shape: Sequence[int]) -> Tensor:
    """A view of ``t`` with ``shape`` (same element count; no ``-1`` inference).

    The view shares storage and keeps ``_base`` pointing at ``t``; releasing ``t`` releases the
    view too.

    Raises:
        ValueError: the element counts differ, or ``t`` was released.
    """
    dims = check_shape(shape, "reshape")
    if math.prod(dims) != t.size:
        raise ValueError(
            f"reshape: cannot view {t.size} elements of shape {t.shape} as shape {dims} "
            f"({math.prod(dims)} elements)"
        )
    return _view(t, dims, 0)


def narrow_view(t: Tensor, start: int, shape: Sequence[int]) -> Tensor:
    """A view of the ``prod(shape)`` elements of ``t`` from element ``start`` on (row-major),
    with ``shape``: what ``x[2:5]`` or ``x[1]`` is when the result is one contiguous run.

    It shares storage like :func:`reshape` (``_base`` is ``t``; releasing ``t`` releases it).

    Raises:
        ValueError: the run does not lie inside ``t``, or ``t`` was released.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> t = Tensor.from_host(manager.default("cpu").queue, np.arange(6.0))
        >>> narrow_view(t, 2, (2, 2)).to_host().tolist()
        [[2.0, 3.0], [4.0, 5.0]]
    """
    dims = check_shape(shape, "narrow_view")
    n = math.prod(dims)
    if start < 0 or start + n > t.size:
        raise ValueError(f"narrow_view: elements {start}..{start + n} lie outside a tensor of "
                         f"shape {t.shape} ({t.size} elements)")
    return _view(t, dims, start)


def _view(t: Tensor, dims: tuple[int, ...], start: int) -> Tensor:
    t.wait()
    array = None
    if t.array is not None:
        n = math.prod(dims)
        array = t.array.reshape(dims) if n == t.size else \
            t.array.reshape(-1)[start:start + n].reshape(dims)
    view = Tensor(
        buffer=t.buffer,
        shape=dims,
        dtype=t.dtype,
        context=t.context,
        queue=t.queue,
        persistent=True,
        host_ref=t.host_ref,
        array=array,
        offset=t.offset if array is not None else t.offset + start,
        _base=t,
        _backend=t._backend,
    )
    views = t._views
    if views is None:
        views = t._views = []
    elif len(views) >= _MAX_VIEW_REFS:
        views[:] = [ref for ref in views if ref() is not None]
    views.append(weakref.ref(view))
    return view


def copy_from_host(t: Tensor, data: Any) -> Tensor:
    """Overwrite ``t``'s data in place with ``data`` (same shape; cast to ``t.dtype``).

    The buffer stays the same object, so everything holding ``t`` (an optimizer, a view) sees
    the new values.

    Raises:
        ValueError: the shapes differ, or ``t`` was released.
        TypeError: data that :meth:`Tensor.from_host` refuses (complex, strings, ...).

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> t = Tensor.from_shape(manager.default("cpu").queue, (2,))
        >>> copy_from_host(t, [3, 4]).to_host().tolist()
        [3.0, 4.0]
    """
    src = np.asarray(data)
    check_host_dtype(src.dtype, "copy_from_host")
    # np.asarray keeps 0-d data 0-d (ascontiguousarray would make it 1-d)
    host = np.asarray(src, dtype=numpy_dtype(t.dtype), order="C")
    if host.shape != t.shape:
        raise ValueError(f"copy_from_host: data of shape {host.shape} does not fit a tensor of "
                         f"shape {t.shape}")
    t.wait()
    if t.array is not None:
        t.array[...] = host
    elif host.size:
        recorder = recording_state.recorder
        if recorder is not None:
            recorder.upload(t.queue, t.buffer, host, t.offset * host.itemsize)
        else:
            cl().enqueue_copy(t.queue, t.buffer, host, dst_offset=t.offset * host.itemsize,
                              is_blocking=True)
    return t


def check_same_device(op: str, *tensors: Tensor) -> Any:
    """Return the queue all ``tensors`` share; ``ValueError`` naming both if they differ."""
    first = tensors[0]
    for t in tensors[1:]:
        if t.queue is not first.queue and (
            t.backend != first.backend or t.context != first.context
        ):
            raise ValueError(
                f"{op}: tensors are on different devices: {first.shape} on "
                f"{_where(first)} and {t.shape} on {_where(t)}; move them with Tensor.from_host"
            )
    return first.queue


def _where(t: Tensor) -> str:
    if t.backend == "cpu":
        return "cpu"
    return "no device" if t.device is None else f"cl:{t.device.name.strip()}"
