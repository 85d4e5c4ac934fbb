"""Tensor methods and operators: the slots netcl-core defines and the op packages fill.

``x + y``, ``x.sum(dim=1)``, ``x[0]``, ``loss.backward()`` are methods of
:class:`~netcl.core.tensor.Tensor`, but the ops they run live in higher layers, which
netcl-core must not import. So each method parses its PyTorch-style arguments here and calls
a named *slot*; ``netcl.ops`` fills the slots with its forward ops when it is imported, and
``netcl.autograd`` replaces the differentiable ones with the versions that record on a tape
(and adds ``backward``). A slot nobody filled raises :class:`MissingOpError` naming the package
to install. On a miss the registry first imports the provider modules by name
(``netcl.ops``, ``netcl.autograd``), as an entry point would be loaded: netcl-core never
imports them, but ``Tensor.from_host(q, a) + 1`` works as soon as netcl-ops is installed.

# NOTE [ Tensor.size ]
# The Tensor page makes ``size`` a property: the element count, an int. PyTorch code calls
# ``x.size()`` (the shape) and ``x.size(0)``. ``Tensor.size`` returns a :class:`Size`: an int
# (equal to, hashing and computing like ``prod(shape)``, so the spec's contract holds) that can
# also be called, PyTorch-style. ``numel()`` is the element count as a method.

Examples:
    >>> import numpy as np
    >>> import netcl.ops  # fills the slots
    >>> from netcl.core import Tensor, manager
    >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(6.0).reshape(2, 3))
    >>> ((x * 2 + 1)[1]).tolist(), x.sum(dim=1).tolist(), x.size, x.size(1), x.numel()
    ([7.0, 9.0, 11.0], [3.0, 12.0], 6, 3, 6)
    >>> (x.mean() > 2).item(), x.T.shape, x.reshape(-1).shape, x.max(dim=1).indices.tolist()
    (1, (3, 2), (6,), [2, 2])
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from .dtypes import canonical_dtype

__all__ = [
    "PROVIDERS",
    "MissingOpError",
    "Size",
    "TensorMethods",
    "lookup",
    "register",
    "registered",
]

#: provider distribution -> (module that registers its slots, rank: a higher rank wins)
PROVIDERS: dict[str, tuple[str, int]] = {
    "netcl-ops": ("netcl.ops", 0),
    "netcl-autograd": ("netcl.autograd", 1),
}
_SLOT_PROVIDER = {"backward": "netcl-autograd"}  # every other slot: netcl-ops
_slots: dict[str, tuple[int, Callable[..., Any]]] = {}
_loaded = [False]


class MissingOpError(ImportError):
    """A Tensor method whose op no installed package registered; the message names the
    package to install."""


def register(name: str, fn: Callable[..., Any], provider: str = "netcl-ops") -> None:
    """Fill slot ``name`` with ``fn`` on behalf of ``provider`` (a key of :data:`PROVIDERS`).

    A provider of higher rank keeps the slot (``netcl-autograd`` over ``netcl-ops``), whatever
    the import order.

    Raises:
        ValueError: an unknown ``provider``.
    """
    if provider not in PROVIDERS:
        raise ValueError(f"tensor_methods.register: unknown provider {provider!r}; known: "
                         f"{', '.join(PROVIDERS)}")
    rank = PROVIDERS[provider][1]
    held = _slots.get(name)
    if held is None or held[0] <= rank:
        _slots[name] = (rank, fn)


def registered(name: str) -> Callable[..., Any] | None:
    """The function in slot ``name``, or ``None`` (no provider is loaded here)."""
    held = _slots.get(name)
    return None if held is None else held[1]


def lookup(name: str) -> Callable[..., Any]:
    """The function in slot ``name``, loading the installed providers on the first miss.

    Raises:
        MissingOpError: no installed package provides ``name``.
    """
    held = _slots.get(name)
    if held is not None:
        return held[1]
    if not _loaded[0]:
        _loaded[0] = True
        for module, _ in PROVIDERS.values():
            try:
                importlib.import_module(module)  # a provider registers its slots on import
            except ImportError:
                pass
        held = _slots.get(name)
        if held is not None:
            return held[1]
    package = _SLOT_PROVIDER.get(name, "netcl-ops")
    raise MissingOpError(
        f"Tensor.{name}: no installed package provides this op; it comes with {package} "
        f"(pip install {package}, or pip install netcl for the whole framework)"
    )


class Size(int):
    """``Tensor.size``: the element count (an int, the spec's contract) that can also be
    called like PyTorch's ``size()``: ``x.size()`` is the shape, ``x.size(d)`` dimension d.

    Examples:
        >>> s = Size(6, (2, 3))
        >>> s == 6, s + 1, s(), s(-1)
        (True, 7, (2, 3), 3)
    """

    _shape: tuple[int, ...]

    def __new__(cls, count: int, shape: tuple[int, ...]) -> Size:
        obj = super().__new__(cls, count)
        obj._shape = shape
        return obj

    def __call__(self, dim: int | None = None) -> Any:
        if dim is None:
            return self._shape
        return self._shape[_dim("size", dim, len(self._shape))]


class MaxResult(NamedTuple):
    """``x.max(dim)`` / ``x.min(dim)``: values and indices, as PyTorch's named tuple."""

    values: Any  # Tensor
    indices: Any  # Tensor


def _dim(op: str, dim: int, ndim: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"Tensor.{op}: dim must be an int, got {dim!r}")
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"Tensor.{op}: dim {dim} is out of range for a {ndim}-d tensor")
    return int(dim) % max(ndim, 1)


def _shape_args(op: str, shape: tuple[Any, ...]) -> Any:
    """``reshape(2, 3)`` and ``reshape((2, 3))`` alike."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        return tuple(shape[0])
    return shape


_SCALARS = (int, float, np.integer, np.floating)
_TM = TypeVar("_TM", bound="TensorMethods")


def _operand(self: TensorMethods, other: Any) -> Any:
    """``other`` as an operand of a binary op with ``self``: a Tensor or a Python/NumPy
    number passes; a NumPy array or a list is copied onto ``self``'s device; anything else
    gives ``NotImplemented`` (so ``t == None`` is ``False``, as Python's default)."""
    if isinstance(other, TensorMethods):
        return other
    if isinstance(other, bool):
        return int(other)
    if isinstance(other, _SCALARS):
        return other.item() if isinstance(other, np.generic) else other
    if isinstance(other, (np.ndarray, list, tuple)):
        return type(self).from_host(self.queue, np.asarray(other))  # type: ignore[attr-defined]
    return NotImplemented


def _contiguous_run(shape: tuple[int, ...], key: Any) -> tuple[int, tuple[int, ...]] | None:
    """``(start, shape)`` when basic index ``key`` selects one contiguous run of a contiguous
    tensor of ``shape`` (leading ints, at most one step-1 slice, then whole dims); ``None``
    otherwise (and for anything out of range: the getitem op raises the error)."""
    items = key if isinstance(key, tuple) else (key,)
    if any(not (i is None or i is Ellipsis or isinstance(i, slice)
                or (isinstance(i, (int, np.integer)) and not isinstance(i, bool)))
           for i in items):
        return None
    used = sum(i is not None and i is not Ellipsis for i in items)
    if used > len(shape) or sum(i is Ellipsis for i in items) > 1:
        return None
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + (slice(None),) * (len(shape) - used) + items[at + 1:]
    else:
        items = items + (slice(None),) * (len(shape) - used)
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    start, out, axis, state = 0, [], 0, 0  # state 0: only ints so far, 2: after a slice
    for item in items:
        if item is None:
            out.append(1)
            continue
        size = shape[axis]
        if isinstance(item, slice):
            lo, hi, step = item.indices(size)
            whole = (lo, hi, step) == (0, size, 1)
            if (state == 2 and not whole) or step != 1:
                return None
            n = max(0, hi - lo)
            start += lo * strides[axis] if n else 0
            out.append(n)
            state = 2
        else:
            i = int(item)
            if state or not -size <= i < size:
                return None
            start += (i % size) * strides[axis]
        axis += 1
    return start, tuple(out)


def _scaled(o: Any, alpha: float) -> Any:
    """``alpha * o`` for a Tensor or a number ``o`` (``add_(other, alpha=)``)."""
    if alpha == 1 or o is NotImplemented:
        return o
    return o * alpha if isinstance(o, (int, float)) else _binary("mul", o, alpha)


def _check_inplace(t: Any, op: str) -> None:
    """Let autograd refuse an in-place write it would not record (slot ``check_inplace``)."""
    check = registered("check_inplace")
    if check is not None:
        check(t, op)


def _binary(name: str, a: Any, b: Any) -> Any:
    return lookup(name)(a, b)


class TensorMethods:
    """The PyTorch-style methods and operators of :class:`~netcl.core.tensor.Tensor`.

    Each one parses its arguments and calls a slot (see the module docstring). Tensors hash by
    identity (``==`` is elementwise, as in PyTorch).
    """

    if TYPE_CHECKING:
        shape: tuple[int, ...]
        dtype: str
        queue: Any
        requires_grad: bool
        grad: Any

        def to_host(self) -> np.ndarray[Any, Any]: ...

        def _narrow_view(self: _TM, start: int, shape: tuple[int, ...]) -> _TM: ...

        def copy_(self: _TM, src: Any) -> _TM: ...

    __hash__ = object.__hash__
    __array_priority__ = 1000  # ndarray <op> Tensor defers to the Tensor's reflected op

    # -- operators ---------------------------------------------------------------------------

    def __add__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("add", self, o)

    def __radd__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("add", o, self)

    def __sub__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("sub", self, o)

    def __rsub__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("sub", o, self)

    def __mul__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("mul", self, o)

    def __rmul__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("mul", o, self)

    def __truediv__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("div", self, o)

    def __rtruediv__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("div", o, self)

    def __pow__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("pow", self, o)

    def __rpow__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("pow", o, self)

    def __matmul__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("matmul", self, o)

    def __rmatmul__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("matmul", o, self)

    def __eq__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("eq", self, o)

    def __ne__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("ne", self, o)

    def __lt__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("lt", self, o)

    def __le__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("le", self, o)

    def __gt__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("gt", self, o)

    def __ge__(self, other: Any) -> Any:
        o = _operand(self, other)
        return o if o is NotImplemented else _binary("ge", self, o)

    def __neg__(self: _TM) -> _TM:
        return lookup("neg")(self)  # type: ignore[no-any-return]

    def __pos__(self: _TM) -> _TM:
        return self

    def __abs__(self: _TM) -> _TM:
        return lookup("abs")(self)  # type: ignore[no-any-return]

    def __getitem__(self: _TM, key: Any) -> _TM:
        # NOTE [ Indexing ]: ints, slices, None and Ellipsis are basic indexing. Where the
        # result is one contiguous run of the storage (x[2], x[1:3], x[0, :, None]) and no
        # gradient is wanted it is a view sharing storage (as PyTorch); otherwise the getitem
        # op copies it (recorded under a tape). A 1-d integer Tensor, list or array picks
        # rows (index_select along dim 0); a boolean mask of the tensor's shape picks the
        # masked elements as a 1-d tensor (reading the mask on the host, as PyTorch syncs).
        if isinstance(key, (TensorMethods, list, np.ndarray)):
            return self._advanced_index(key)
        if not self.requires_grad:
            run = _contiguous_run(self.shape, key)
            if run is not None:
                return self._narrow_view(run[0], run[1])
        return lookup("getitem")(self, key)  # type: ignore[no-any-return]

    def __setitem__(self, key: Any, value: Any) -> None:
        # Every basic key (ints, slices of any step, None, Ellipsis) and keys with one advanced
        # index (an integer array or Tensor, a boolean mask); the value (a number, an array or
        # a Tensor) broadcasts to the selection and is converted to this dtype (slot
        # ``setitem``). Not recorded by autograd, as the other in-place writes.
        _check_inplace(self, "__setitem__")
        lookup("setitem")(self, key, value)

    def _advanced_index(self: _TM, key: Any) -> _TM:
        host = key.to_host() if isinstance(key, TensorMethods) else np.asarray(key)
        kind = getattr(key, "dtype", None)
        mask = host.dtype == np.bool_ or (kind == "uint8" and host.shape == self.shape)
        if mask:
            if host.shape != self.shape:
                raise IndexError(f"Tensor.__getitem__: a boolean mask must have the tensor's "
                                 f"shape {self.shape}, got {host.shape}")
            rows = np.flatnonzero(host.reshape(-1)).astype(np.int64)
            flat = self.reshape(-1)
            index = type(self).from_host(self.queue, rows)  # type: ignore[attr-defined]
            return lookup("index_select")(flat, 0, index)  # type: ignore[no-any-return]
        if host.dtype.kind not in "iu" or host.ndim != 1:
            raise IndexError(f"Tensor.__getitem__: a tensor index must be a 1-d integer or a "
                             f"boolean mask, got dtype {host.dtype}, shape {host.shape}")
        index = key if isinstance(key, TensorMethods) and key.dtype in ("int32", "int64") \
            else type(self).from_host(self.queue, host.astype(np.int64))  # type: ignore[attr-defined]
        return lookup("index_select")(self, 0, index)  # type: ignore[no-any-return]

    def __bool__(self) -> bool:
        return bool(self._scalar("bool"))

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __format__(self, spec: str) -> str:
        if spec and self.numel() == 1:
            return format(self.item(), spec)
        return format(repr(self), spec)

    # -- reading values ----------------------------------------------------------------------

    def _scalar(self, op: str) -> Any:
        if self.numel() != 1:
            raise ValueError(f"Tensor.{op}: only a one-element tensor converts to a Python "
                             f"scalar, got shape {self.shape} ({self.numel()} elements)")
        return self.to_host().reshape(()).item()

    def item(self) -> Any:
        """The value of a one-element tensor as a Python float or int (a host read).

        Raises:
            ValueError: the tensor has more than one element (its shape is named).
        """
        return self._scalar("item")

    def tolist(self) -> Any:
        """The data as (nested) Python lists; a 0-d tensor gives a number."""
        return self.to_host().tolist()

    # -- shape ---------------------------------------------------------------------------------

    def numel(self) -> int:
        """Number of elements (``Tensor.size`` as a method)."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    def dim(self) -> int:
        """Number of dimensions (``Tensor.ndim``)."""
        return len(self.shape)

    def reshape(self: _TM, *shape: Any) -> _TM:
        """A view with ``shape`` (one entry may be -1); ``x.reshape(2, 3)`` or ``((2, 3))``."""
        return lookup("view")(self, _shape_args("reshape", shape))  # type: ignore[no-any-return]

    def view(self: _TM, *shape: Any) -> _TM:
        """:meth:`reshape` (netcl tensors are always contiguous, so both are views)."""
        return lookup("view")(self, _shape_args("view", shape))  # type: ignore[no-any-return]

    def flatten(self: _TM, start_dim: int = 0, end_dim: int = -1) -> _TM:
        """A view merging dims ``start_dim..end_dim``."""
        return lookup("flatten")(self, start_dim, end_dim)  # type: ignore[no-any-return]

    def squeeze(self: _TM, dim: int | Sequence[int] | None = None) -> _TM:
        """A view without the size-1 dims ``dim`` (all of them for ``None``)."""
        return lookup("squeeze")(self, dim)  # type: ignore[no-any-return]

    def unsqueeze(self: _TM, dim: int) -> _TM:
        """A view with a new size-1 dim at ``dim``."""
        return lookup("unsqueeze")(self, dim)  # type: ignore[no-any-return]

    def permute(self: _TM, *dims: Any) -> _TM:
        """The dims reordered (a copy): ``x.permute(0, 2, 1)`` or ``x.permute((0, 2, 1))``."""
        return lookup("permute")(self, _shape_args("permute", dims))  # type: ignore[no-any-return]

    def transpose(self: _TM, dim0: int, dim1: int) -> _TM:
        """Dims ``dim0`` and ``dim1`` swapped (a copy)."""
        return lookup("transpose")(self, dim0, dim1)  # type: ignore[no-any-return]

    def t(self: _TM) -> _TM:
        """The transpose of a 2-d tensor (a 0-d or 1-d tensor comes back as it is)."""
        if len(self.shape) < 2:
            return self
        if len(self.shape) > 2:
            raise ValueError(f"Tensor.t: expects a tensor of at most 2 dims, got shape "
                             f"{self.shape}; use transpose(dim0, dim1)")
        return self.transpose(0, 1)

    @property
    def T(self: _TM) -> _TM:
        """All dims reversed (a copy)."""
        return self.permute(tuple(reversed(range(len(self.shape)))))

    def contiguous(self: _TM) -> _TM:
        """The tensor itself: netcl tensors are always contiguous."""
        return lookup("contiguous")(self)  # type: ignore[no-any-return]

    def expand(self: _TM, *sizes: Any) -> _TM:
        """Broadcast to ``sizes`` (-1 keeps a dim), as a new tensor."""
        target = list(_shape_args("expand", sizes))
        lead = len(target) - len(self.shape)
        for k, d in enumerate(self.shape):
            if target[lead + k] == -1:
                target[lead + k] = d
        return lookup("broadcast_to")(self, tuple(target))  # type: ignore[no-any-return]

    def clone(self: _TM) -> _TM:
        """A copy with its own storage (recorded under a tape)."""
        return lookup("copy")(self)  # type: ignore[no-any-return]

    # -- elementwise ---------------------------------------------------------------------------

    def add(self: _TM, other: Any) -> _TM:
        """``self + other``."""
        return _binary("add", self, _operand(self, other))  # type: ignore[no-any-return]

    def sub(self: _TM, other: Any) -> _TM:
        """``self - other``."""
        return _binary("sub", self, _operand(self, other))  # type: ignore[no-any-return]

    def mul(self: _TM, other: Any) -> _TM:
        """``self * other``."""
        return _binary("mul", self, _operand(self, other))  # type: ignore[no-any-return]

    def div(self: _TM, other: Any) -> _TM:
        """``self / other``."""
        return _binary("div", self, _operand(self, other))  # type: ignore[no-any-return]

    def pow(self: _TM, exponent: Any) -> _TM:
        """``self ** exponent``."""
        return _binary("pow", self, _operand(self, exponent))  # type: ignore[no-any-return]

    def matmul(self: _TM, other: Any) -> _TM:
        """``self @ other``."""
        return _binary("matmul", self, _operand(self, other))  # type: ignore[no-any-return]

    def eq(self: _TM, other: Any) -> _TM:
        """``self == other`` (uint8)."""
        return _binary("eq", self, _operand(self, other))  # type: ignore[no-any-return]

    def ne(self: _TM, other: Any) -> _TM:
        """``self != other`` (uint8)."""
        return _binary("ne", self, _operand(self, other))  # type: ignore[no-any-return]

    def lt(self: _TM, other: Any) -> _TM:
        """``self < other`` (uint8)."""
        return _binary("lt", self, _operand(self, other))  # type: ignore[no-any-return]

    def le(self: _TM, other: Any) -> _TM:
        """``self <= other`` (uint8)."""
        return _binary("le", self, _operand(self, other))  # type: ignore[no-any-return]

    def gt(self: _TM, other: Any) -> _TM:
        """``self > other`` (uint8)."""
        return _binary("gt", self, _operand(self, other))  # type: ignore[no-any-return]

    def ge(self: _TM, other: Any) -> _TM:
        """``self >= other`` (uint8)."""
        return _binary("ge", self, _operand(self, other))  # type: ignore[no-any-return]

    def maximum(self: _TM, other: Any) -> _TM:
        """Elementwise maximum."""
        return _binary("maximum", self, _operand(self, other))  # type: ignore[no-any-return]

    def minimum(self: _TM, other: Any) -> _TM:
        """Elementwise minimum."""
        return _binary("minimum", self, _operand(self, other))  # type: ignore[no-any-return]

    def neg(self: _TM) -> _TM:
        """``-self``."""
        return lookup("neg")(self)  # type: ignore[no-any-return]

    def abs(self: _TM) -> _TM:
        """``|self|``."""
        return lookup("abs")(self)  # type: ignore[no-any-return]

    def exp(self: _TM) -> _TM:
        """``e ** self``."""
        return lookup("exp")(self)  # type: ignore[no-any-return]

    def log(self: _TM) -> _TM:
        """Natural logarithm."""
        return lookup("log")(self)  # type: ignore[no-any-return]

    def sqrt(self: _TM) -> _TM:
        """Square root."""
        return lookup("sqrt")(self)  # type: ignore[no-any-return]

    def rsqrt(self: _TM) -> _TM:
        """``1 / sqrt(self)``."""
        return lookup("rsqrt")(self)  # type: ignore[no-any-return]

    def reciprocal(self: _TM) -> _TM:
        """``1 / self``."""
        return lookup("reciprocal")(self)  # type: ignore[no-any-return]

    def square(self: _TM) -> _TM:
        """``self * self``."""
        return _binary("mul", self, self)  # type: ignore[no-any-return]

    def sign(self: _TM) -> _TM:
        """-1, 0 or 1 per element (no gradient)."""
        return lookup("sign")(self)  # type: ignore[no-any-return]

    def relu(self: _TM) -> _TM:
        """``max(self, 0)``."""
        return lookup("relu")(self)  # type: ignore[no-any-return]

    def sigmoid(self: _TM) -> _TM:
        """``1 / (1 + exp(-self))``."""
        return lookup("sigmoid")(self)  # type: ignore[no-any-return]

    def tanh(self: _TM) -> _TM:
        """Hyperbolic tangent."""
        return lookup("tanh")(self)  # type: ignore[no-any-return]

    def clamp(self: _TM, min: float | None = None, max: float | None = None) -> _TM:
        """Each element limited to ``[min, max]``."""
        return lookup("clamp")(self, min, max)  # type: ignore[no-any-return]

    clip = clamp

    def softmax(self: _TM, dim: int = -1) -> _TM:
        """Softmax along ``dim``."""
        return lookup("softmax")(self, dim)  # type: ignore[no-any-return]

    def log_softmax(self: _TM, dim: int = -1) -> _TM:
        """Log-softmax along ``dim``."""
        return lookup("log_softmax")(self, dim)  # type: ignore[no-any-return]

    # -- reductions ------------------------------------------------------------------------------

    def sum(self: _TM, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> _TM:
        """Sum over ``dim`` (all dims for ``None``)."""
        return lookup("sum")(self, dim, keepdim)  # type: ignore[no-any-return]

    def mean(self: _TM, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> _TM:
        """Mean over ``dim`` (all dims for ``None``) of a floating-point tensor."""
        return lookup("mean")(self, dim, keepdim)  # type: ignore[no-any-return]

    def var(self: _TM, dim: int | Sequence[int] | None = None, keepdim: bool = False,
            correction: int = 1) -> _TM:
        """Variance over ``dim`` (unbiased for ``correction=1``, as PyTorch)."""
        return lookup("var")(self, dim, keepdim, correction)  # type: ignore[no-any-return]

    def std(self: _TM, dim: int | Sequence[int] | None = None, keepdim: bool = False,
            correction: int = 1) -> _TM:
        """Standard deviation over ``dim``."""
        return self.var(dim, keepdim, correction).sqrt()

    def max(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The maximum (a 0-d tensor); with ``dim``, ``(values, indices)`` as PyTorch."""
        if dim is None:
            return lookup("max")(self, None, keepdim)
        return MaxResult(lookup("max")(self, dim, keepdim), self.argmax(dim, keepdim))

    def min(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The minimum (a 0-d tensor); with ``dim``, ``(values, indices)`` as PyTorch."""
        if dim is None:
            return lookup("min")(self, None, keepdim)
        return MaxResult(lookup("min")(self, dim, keepdim), self.argmin(dim, keepdim))

    def argmax(self: _TM, dim: int | None = None, keepdim: bool = False) -> _TM:
        """Index (int64) of the first maximum along ``dim`` (or of the flattened tensor)."""
        return lookup("argmax")(self, dim, keepdim)  # type: ignore[no-any-return]

    def argmin(self: _TM, dim: int | None = None, keepdim: bool = False) -> _TM:
        """Index (int64) of the first minimum along ``dim`` (the argmax of ``-self``)."""
        return lookup("argmax")(lookup("neg")(self), dim, keepdim)  # type: ignore[no-any-return]

    # -- dtype and device ------------------------------------------------------------------------

    def to(self: _TM, *args: Any, dtype: Any = None, device: Any = None, copy: bool = False) -> _TM:
        """This tensor on another device and/or in another dtype (itself when nothing changes).

        ``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(other_tensor)``; a device is a
        string (``"cpu"``, ``"cl"``, ``"cl:0"``, a name fragment such as ``"pthread"``), a
        :class:`~netcl.core.device.DeviceHandle` or a queue. A dtype change is the ``cast`` op
        (recorded under a tape); a device change copies through the host.

        Raises:
            ValueError: an unknown dtype or device.
        """
        for arg in args:
            if isinstance(arg, TensorMethods):
                device, dtype = arg.queue, arg.dtype if dtype is None else dtype
            elif _is_dtype(arg):
                dtype = arg
            else:
                device = arg
        out: Any = self
        if device is not None:
            out = lookup("to_device")(out, device)
        if dtype is not None and canonical_dtype(dtype, "Tensor.to") != out.dtype:
            out = lookup("cast")(out, canonical_dtype(dtype, "Tensor.to"))
        if copy and out is self:
            out = self.clone()
        return out  # type: ignore[no-any-return]

    def cpu(self: _TM) -> _TM:
        """This tensor on the NumPy backend (``to("cpu")``)."""
        return self.to("cpu")

    # -- autograd --------------------------------------------------------------------------------

    def backward(self, gradient: Any = None, retain_graph: bool = False) -> None:
        """Accumulate the gradient of this (scalar) tensor into the ``.grad`` of every leaf it
        depends on (netcl-autograd; see ``netcl.autograd`` for when ops record)."""
        lookup("backward")(self, gradient, retain_graph)

    def requires_grad_(self: _TM, requires_grad: bool = True) -> _TM:
        """Set ``requires_grad`` in place; returns the tensor."""
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self: _TM) -> _TM:
        """A tensor sharing this one's storage, outside every graph."""
        return lookup("detach")(self)  # type: ignore[no-any-return]

    @property
    def data(self: _TM) -> _TM:
        """:meth:`detach` (PyTorch's ``x.data``)."""
        return self.detach()

    def __iadd__(self: _TM, other: Any) -> _TM:
        return self.add_(other)

    def __isub__(self: _TM, other: Any) -> _TM:
        return self.sub_(other)

    def __imul__(self: _TM, other: Any) -> _TM:
        return self.mul_(other)

    def __itruediv__(self: _TM, other: Any) -> _TM:
        return self.div_(other)

    def add_(self: _TM, other: Any, alpha: float = 1) -> _TM:
        """``self += alpha * other`` in place (not recorded by autograd, as a ``no_grad``
        update); returns the tensor."""
        _check_inplace(self, "add_")
        o = _scaled(_operand(self, other), alpha)
        return self.copy_(_binary("add", self, o))

    def sub_(self: _TM, other: Any, alpha: float = 1) -> _TM:
        """``self -= alpha * other`` in place; returns the tensor."""
        _check_inplace(self, "sub_")
        o = _scaled(_operand(self, other), alpha)
        return self.copy_(_binary("sub", self, o))

    def mul_(self: _TM, other: Any) -> _TM:
        """``self *= other`` in place; returns the tensor."""
        _check_inplace(self, "mul_")
        return self.copy_(_binary("mul", self, _operand(self, other)))

    def div_(self: _TM, other: Any) -> _TM:
        """``self /= other`` in place; returns the tensor."""
        _check_inplace(self, "div_")
        return self.copy_(_binary("div", self, _operand(self, other)))

    def clamp_(self: _TM, min: float | None = None, max: float | None = None) -> _TM:
        """Clamp in place; returns the tensor."""
        _check_inplace(self, "clamp_")
        return self.copy_(lookup("clamp")(self, min, max))

    def zero_(self: _TM) -> _TM:
        """Fill with 0 in place; returns the tensor."""
        _check_inplace(self, "zero_")
        return lookup("fill")(self, 0)  # type: ignore[no-any-return]

    def fill_(self: _TM, value: float) -> _TM:
        """Fill with ``value`` in place; returns the tensor."""
        _check_inplace(self, "fill_")
        return lookup("fill")(self, value)  # type: ignore[no-any-return]

    # -- dtype casts (last: ``float``/``int``/``type`` as method names would shadow the
    # builtins in the annotations of every method after them) --------------------------------

    def type(self, dtype: Any = None) -> Any:
        """The dtype name without an argument; else :meth:`to` that dtype."""
        return self.dtype if dtype is None else self.to(dtype)

    def float(self: _TM) -> _TM:
        """float32."""
        return self.to("float32")

    def half(self: _TM) -> _TM:
        """float16."""
        return self.to("float16")

    def double(self: _TM) -> _TM:
        """float64 (where the device has it)."""
        return self.to("float64")

    def long(self: _TM) -> _TM:
        """int64."""
        return self.to("int64")

    def int(self: _TM) -> _TM:
        """int32."""
        return self.to("int32")

    def byte(self: _TM) -> _TM:
        """uint8."""
        return self.to("uint8")


def _is_dtype(arg: Any) -> bool:
    if isinstance(arg, str):
        try:
            canonical_dtype(arg)
        except ValueError:
            return False
        return True
    return isinstance(arg, (type, np.dtype))
