"""``Module`` and ``Parameter``: the tree of layers, its parameters, buffers, modes and hooks."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from netcl.autograd import backward_hook
from netcl.core.device import DeviceHandle, get_active_device
from netcl.core.dtypes import FLOAT_DTYPES, canonical_dtype, numpy_dtype
from netcl.core.placement import resolve_queue
from netcl.core.tensor import Tensor, copy_from_host, reshape

__all__ = ["HookHandle", "Module", "Parameter", "placement", "write_host"]

_M = TypeVar("_M", bound="Module")  # methods that return the module itself


@dataclass(eq=False, repr=False)
class Parameter(Tensor):
    """A Tensor that is a module's learnable weight: ``requires_grad`` and never pooled away.

    Build it like a Tensor: ``Parameter.from_host(queue, data)``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> w = Parameter.from_host(manager.default("cpu").queue, np.ones((2, 3)))
        >>> w.requires_grad, w.persistent, w.shape
        (True, True, (2, 3))
    """

    def __post_init__(self) -> None:
        self.requires_grad = True
        self.persistent = True

    def __repr__(self) -> str:
        return "Parameter" + super().__repr__()[len("Tensor"):]


_hook_ids = itertools.count()


class HookHandle:
    """Returned by ``register_forward_hook``; ``remove()`` unregisters the hook."""

    def __init__(self, table: dict[int, Any], key: int) -> None:
        self._table, self._key = table, key

    def remove(self) -> None:
        """Unregister the hook (idempotent)."""
        self._table.pop(self._key, None)


class Module:
    """Base class of every layer: holds parameters, buffers and child modules by attribute.

    Subclasses call ``super().__init__()`` first, assign :class:`Parameter` s, child modules and
    :meth:`register_buffer` tensors as attributes, and implement ``forward``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> class Scale(Module):
        ...     def __init__(self) -> None:
        ...         super().__init__()
        ...         self.w = Parameter.from_host(manager.default("cpu").queue, np.ones(3))
        ...     def forward(self, x: Any) -> Any:
        ...         return x
        >>> m = Scale()
        >>> [name for name, _ in m.named_parameters()]
        ['w']
        >>> sorted(m.state_dict())
        ['w']
    """

    training: bool
    _parameters: OrderedDict[str, Parameter]
    _buffers: OrderedDict[str, Tensor | None]
    _modules: OrderedDict[str, Module]
    _forward_hooks: OrderedDict[int, Callable[..., Any]]
    _forward_pre_hooks: OrderedDict[int, Callable[..., Any]]
    _backward_hooks: OrderedDict[int, Callable[..., Any]]

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_backward_hooks", OrderedDict())
        object.__setattr__(self, "training", True)

    # -- registration ----------------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning "
                               f"attribute {name!r}")
        for table in ("_parameters", "_buffers", "_modules"):
            self.__dict__[table].pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        elif name in self.__dict__.get("_buffer_names", ()):
            self._buffers[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        for table in ("_parameters", "_buffers", "_modules"):
            self.__dict__[table].pop(name, None)
        object.__delattr__(self, name)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True
                        ) -> None:
        """A tensor that is state but not learnable (running statistics): moved with the
        module, not trained, and saved in :meth:`state_dict` unless ``persistent=False``."""
        names = self.__dict__.setdefault("_buffer_names", set())
        names.add(name)
        transient = self.__dict__.setdefault("_transient_buffers", set())
        if persistent:
            transient.discard(name)
        else:
            transient.add(name)
        if tensor is not None:
            tensor.persistent = True
        setattr(self, name, tensor)
        if tensor is None:
            self._buffers.pop(name, None)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register a child under ``name`` (what attribute assignment does)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {name!r} must be a Module, got {type(module).__name__}")
        setattr(self, name, module)

    # -- traversal -------------------------------------------------------------------------

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Direct children with their attribute names."""
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        """Direct children."""
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every descendant, with dotted names."""
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        """This module and every descendant."""
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True
                         ) -> Iterator[tuple[str, Parameter]]:
        """Every parameter with its dotted name (each object once)."""
        seen: set[int] = set()
        mods = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for mod_name, mod in mods:
            for name, p in mod._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mod_name}.{name}" if mod_name else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter (what an optimizer takes)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """Every buffer with its dotted name."""
        for mod_name, mod in self.named_modules(prefix):
            for name, b in mod._buffers.items():
                if b is not None:
                    yield (f"{mod_name}.{name}" if mod_name else name), b

    def buffers(self) -> Iterator[Tensor]:
        """Every buffer."""
        for _, b in self.named_buffers():
            yield b

    def apply(self: _M, fn: Callable[[Module], Any]) -> _M:
        """Call ``fn`` on every child (recursively, children first) and then on this module;
        returns this module (PyTorch's ``Module.apply``: custom initialisation).

        Examples:
            >>> from netcl.core.device import manager
            >>> from netcl.nn import Linear, Sequential, init
            >>> def zero_linear(m: Module) -> None:
            ...     if isinstance(m, Linear):
            ...         init.zeros_(m.weight)
            >>> q = manager.default("cpu").queue
            >>> net = Sequential(Linear(2, 3, device=q), Linear(3, 1, device=q)).apply(zero_linear)
            >>> float(abs(net[1].weight.to_host()).sum())
            0.0
        """
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def num_parameters(self, trainable_only: bool = False) -> int:
        """How many scalars the parameters hold (each parameter once), PyTorch's
        ``sum(p.numel() for p in model.parameters())``; with ``trainable_only``, only those
        with ``requires_grad``.

        Examples:
            >>> from netcl.core.device import manager
            >>> from netcl.nn import Linear
            >>> Linear(4, 3, device=manager.default("cpu").queue).num_parameters()
            15
        """
        return sum(p.size for p in self.parameters()
                   if p.requires_grad or not trainable_only)

    # -- modes, grads ----------------------------------------------------------------------

    def train(self: _M, mode: bool = True) -> _M:
        """Training mode (dropout active, batch norm uses batch statistics) for the whole tree."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self: _M) -> _M:
        """Evaluation mode: ``train(False)``."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Set every parameter's ``.grad`` to ``None`` (or, with ``set_to_none=False``, to a
        zero tensor)."""
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = Tensor.from_shape(p.queue, p.shape, p.dtype, fill=0)

    def requires_grad_(self: _M, requires_grad: bool = True) -> _M:
        """Set ``requires_grad`` on every parameter (``False`` freezes the module, as for
        fine-tuning); returns the module.

        Examples:
            >>> from netcl.nn import Linear
            >>> lin = Linear(2, 2, device="cpu").requires_grad_(False)
            >>> lin.weight.requires_grad, lin.num_parameters(trainable_only=True)
            (False, 0)
        """
        for p in self.parameters():
            p.requires_grad = bool(requires_grad)
        return self

    def float(self: _M) -> _M:
        """``to(dtype="float32")``."""
        return self.to(dtype="float32")

    def half(self: _M) -> _M:
        """``to(dtype="float16")``."""
        return self.to(dtype="float16")

    def double(self: _M) -> _M:
        """``to(dtype="float64")``."""
        return self.to(dtype="float64")

    # -- state -----------------------------------------------------------------------------

    def state_dict(self) -> OrderedDict[str, Tensor]:
        """Parameters and buffers by dotted name (the tensors themselves, not copies)."""
        out: OrderedDict[str, Tensor] = OrderedDict()
        for name, p in self.named_parameters():
            out[name] = p
        for mod_name, mod in self.named_modules():
            transient = mod.__dict__.get("_transient_buffers", ())
            for name, b in mod._buffers.items():
                if b is not None and name not in transient:
                    out[f"{mod_name}.{name}" if mod_name else name] = b
        return out

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Copy values into this module's tensors in place.

        Every key and shape is checked before anything is written, so a mismatch leaves the
        module untouched.

        Raises:
            KeyError: ``strict`` and keys are missing or unexpected (both listed).
            ValueError: a shape differs (all listed).
        """
        own = self.state_dict()
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict({type(self).__name__}): missing keys {missing}, "
                           f"unexpected keys {unexpected}")
        bad = [
            f"{k}: module {own[k].shape}, state {tuple(np.shape(_host(state[k])))}"
            for k in sorted(set(own) & set(state))
            if tuple(np.shape(_host(state[k]))) != own[k].shape
        ]
        if bad:
            raise ValueError(f"load_state_dict({type(self).__name__}): shape mismatch for "
                             + "; ".join(bad))
        for k in set(own) & set(state):
            write_host(own[k], _host(state[k]))

    def to(self: _M, device: DeviceHandle | str | Any = None, dtype: Any = None) -> _M:
        """Move every parameter and buffer to ``device`` (a selector string such as ``"cpu"``
        or ``"cl"``, a DeviceHandle or a queue; None keeps each where it is) and cast the
        floating-point ones to ``dtype`` (None keeps theirs). ``to(dtype)`` alone, with a dtype
        name as the only argument, casts (``model.to("float64")``).

        As in PyTorch, integer buffers keep their dtype. Casting to float16 or float64 on an
        OpenCL device needs the dtype there (float64: ``cl_khr_fp64``).

        Raises:
            TypeError: ``dtype`` is not a float dtype.

        Examples:
            >>> from netcl.core.device import manager
            >>> from netcl.nn import Linear
            >>> lin = Linear(3, 2, queue=manager.default("cpu").queue).to(dtype="float64")
            >>> lin.weight.dtype, lin.weight.requires_grad
            ('float64', True)
        """
        if dtype is None and isinstance(device, str) and _is_dtype_name(device):
            device, dtype = None, device
        queue = None if device is None else device_queue("Module.to", device)
        if dtype is not None:
            dtype = canonical_dtype(dtype, op="Module.to")
            if dtype not in FLOAT_DTYPES:
                raise TypeError(f"Module.to: dtype must be one of {', '.join(FLOAT_DTYPES)}, "
                                f"got {dtype!r}")

        def moved(t: Tensor, cls: type[Tensor]) -> Any:
            dt = dtype if dtype is not None and t.dtype in FLOAT_DTYPES else t.dtype
            return cls.from_host(t.queue if queue is None else queue,
                                 t.to_host().astype(numpy_dtype(dt)), dtype=dt)

        for mod in self.modules():
            for name, p in list(mod._parameters.items()):
                setattr(mod, name, moved(p, Parameter))
            for name, b in list(mod._buffers.items()):
                if b is not None:
                    buf = moved(b, Tensor)
                    buf.persistent = True
                    setattr(mod, name, buf)
        return self

    # -- calling ---------------------------------------------------------------------------

    def register_forward_pre_hook(self, hook: Callable[[Module, tuple[Any, ...]], Any]
                                  ) -> HookHandle:
        """``hook(module, inputs)`` before forward; a non-None return replaces the inputs."""
        key = next(_hook_ids)
        self._forward_pre_hooks[key] = hook
        return HookHandle(self._forward_pre_hooks, key)

    def register_forward_hook(self, hook: Callable[[Module, tuple[Any, ...], Any], Any]
                              ) -> HookHandle:
        """``hook(module, inputs, output)`` after forward; a non-None return replaces output."""
        key = next(_hook_ids)
        self._forward_hooks[key] = hook
        return HookHandle(self._forward_hooks, key)

    def register_full_backward_hook(
            self, hook: Callable[[Module, tuple[Tensor | None, ...], tuple[Tensor, ...]], Any]
    ) -> HookHandle:
        """``hook(module, grad_input, grad_output)`` when the gradient of the module's input
        has been computed in the backward pass; a non-None return (a tuple of one Tensor)
        replaces ``grad_input``.

        netcl's form of PyTorch's hook: the module's output is its first Tensor result and
        its input its first Tensor argument (layers take one); ``grad_input`` is ``(None,)``
        when that input needs no gradient (the hook then runs once the output's gradient is
        known). The gradients are device tensors: reading them is a host round trip.

        Examples:
            >>> import numpy as np
            >>> import netcl.autograd as ag
            >>> from netcl.core import Tensor, manager
            >>> from netcl.nn import Linear
            >>> q = manager.default("cpu").queue
            >>> lin = Linear(3, 2, device=q)
            >>> seen = []
            >>> h = lin.register_full_backward_hook(
            ...     lambda m, gi, go: seen.append((gi[0].shape, go[0].shape)))
            >>> x = Tensor.from_host(q, np.ones((4, 3))); x.requires_grad = True
            >>> with ag.Tape() as tape:
            ...     loss = ag.ops.sum(lin(x))
            >>> tape.backward(loss)
            >>> seen
            [((4, 3), (4, 2))]
            >>> h.remove()
        """
        key = next(_hook_ids)
        self._backward_hooks[key] = hook
        return HookHandle(self._backward_hooks, key)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; every subclass defines it."""
        raise TypeError(f"{type(self).__name__} defines no forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not (self._forward_pre_hooks or self._forward_hooks
                or self._backward_hooks):  # the usual case
            return self.forward(*args, **kwargs)
        for hook in list(self._forward_pre_hooks.values()):
            changed = hook(self, args)
            if changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        grads: dict[str, Any] = {}
        if self._backward_hooks:
            args = self._hook_input(args, grads)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            changed = hook(self, args, out)
            if changed is not None:
                out = changed
        if self._backward_hooks and isinstance(out, Tensor) and out.requires_grad:
            out = backward_hook(out, lambda g: self._output_grad(g, grads))
        return out

    # NOTE [ Backward hooks ]
    # Two identity ops (netcl.autograd.backward_hook) bracket the forward: the one on the output
    # sees grad_output first (backward runs in reverse), the one on the input sees grad_input
    # and calls the hooks with both. An input that needs no gradient has no identity, so the
    # output's identity calls the hooks (grad_input = (None,)).

    def _hook_input(self, args: tuple[Any, ...], grads: dict[str, Any]) -> tuple[Any, ...]:
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                if not a.requires_grad:
                    return args
                grads["input"] = True
                hooked = backward_hook(a, lambda g: self._input_grad(g, grads))
                return (*args[:i], hooked, *args[i + 1:])
        return args

    def _output_grad(self, g: Tensor, grads: dict[str, Any]) -> None:
        grads["output"] = g
        if "input" not in grads:
            self._run_backward_hooks(None, g)

    def _input_grad(self, g: Tensor, grads: dict[str, Any]) -> Tensor | None:
        return self._run_backward_hooks(g, grads.get("output"))

    def _run_backward_hooks(self, grad_input: Tensor | None, grad_output: Tensor | None
                            ) -> Tensor | None:
        for hook in list(self._backward_hooks.values()):
            changed = hook(self, (grad_input,), (grad_output,))
            if changed is not None:
                grad_input = changed[0] if isinstance(changed, tuple) else changed
        return grad_input

    # -- display ---------------------------------------------------------------------------

    def extra_repr(self) -> str:
        """The part inside the parentheses of ``repr`` (layers describe their sizes)."""
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(child).replace("\n", "\n  ")
                 for name, child in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def write_host(t: Tensor, value: Any) -> None:
    """``copy_from_host`` that also writes 0-d tensors (through a 1-element view: the core's
    copy makes its host data at least 1-d)."""
    target = reshape(t, (1,)) if t.ndim == 0 else t
    copy_from_host(target, np.reshape(np.asarray(value), target.shape))


def _host(value: Any) -> Any:
    return value.to_host() if isinstance(value, Tensor) else np.asarray(value)


def default_queue() -> Any:
    """The active device's queue (layers are built there unless told otherwise)."""
    return get_active_device().queue


def _is_dtype_name(name: str) -> bool:
    try:
        canonical_dtype(name, op="Module.to")
    except (TypeError, ValueError):
        return False
    return True


def device_queue(op: str, device: DeviceHandle | str | Any) -> Any:
    """The queue of ``device``: a selector string (``"cpu"``, ``"cl"``, ``"cl:0:1"``, a name
    fragment), a DeviceHandle, a ``pyopencl.Device`` (``Tensor.device``) or a queue itself
    (:func:`netcl.core.placement.resolve_queue`).

    Raises:
        ValueError: an unknown selector.
        RuntimeError: the selector matches no usable device.

    Examples:
        >>> from netcl.core.device import manager
        >>> device_queue("Linear", "cpu") is manager.default("cpu").queue
        True
    """
    return resolve_queue(device, op)


def placement(op: str, device: Any = None, dtype: Any = None, queue: Any = None
              ) -> tuple[Any, str]:
    """Where a layer creates its parameters and in which dtype: ``(queue, dtype)`` from
    PyTorch's ``device=``/``dtype=`` keywords, or netcl's ``queue=`` (the active device's
    queue and float32 by default).

    Raises:
        TypeError: both ``device`` and ``queue`` given, or a non-float ``dtype``.

    Examples:
        >>> from netcl.core.device import manager
        >>> q, dt = placement("Linear", device="cpu", dtype="float64")
        >>> q is manager.default("cpu").queue, dt
        (True, 'float64')
    """
    if device is not None and queue is not None:
        raise TypeError(f"{op}: give device= or queue=, not both")
    where = queue if device is None else device_queue(op, device)
    dt = "float32" if dtype is None else canonical_dtype(dtype, op=op)
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{op}: dtype must be one of {', '.join(FLOAT_DTYPES)}, got {dt!r}")
    return (where if where is not None else default_queue()), dt
