"""The Tape: what records ops, the node graph, and the reverse pass that fills ``.grad``.

# NOTE [ Recording ]
# Ops record when one of their Tensor inputs has ``requires_grad``, outside ``no_grad``, as in
# PyTorch: inside ``with Tape():`` on every active tape, and with no tape active on none (the
# implicit tape, the "Tape singleton" of the architecture page: the node is held by the graph
# alone, so it lives as long as the tensors computed from it, and ``loss.backward()`` runs it).
# ``implicit_tape(False)`` limits recording to ``with Tape()`` blocks (process-wide).
# A recorded op's output gets ``requires_grad=True`` and
# ``grad_fn``: its :class:`Node`, which holds the backward closure (and through it whatever the
# closure captured), the nodes of its inputs (``grad_fn`` links) and the leaves among them. A
# node never refers to intermediate tensors except through its closure, so a tensor lives
# exactly as long as the user or some pending backward needs it.
#
# NOTE [ No reference cycles ]
# A backward closure often captures the op's own output (sigmoid, exp, softmax). If the tensor
# returned to the user were that output, ``out.grad_fn -> node -> closure -> out`` would be a
# cycle that only the garbage collector frees. So a recorded op returns a *view* of its output
# (``reshape(out, out.shape)``, which keeps ``out`` alive through ``_base``) and the node keeps
# ``out`` itself; nothing points back at the view.
#
# NOTE [ Tapes, nesting and consumption ]
# Tapes nest; every tape on the thread's stack records every node created while it is active,
# so an outer tape sees the inner tape's ops too. The graph itself is the ``grad_fn`` links, as
# in PyTorch: ``tape.backward(loss)`` walks every node reachable from ``loss``. Without
# ``retain_graph`` it frees each node's closure as soon as that node ran (the saved tensors go
# back to the buffer pool while the pass continues), frees every other node the tape recorded,
# and marks the tape consumed: a second backward raises ``RuntimeError``, and so does a backward
# that reaches a node another tape's backward already freed.
#
# NOTE [ Gradient dtypes ]
# A gradient always has the dtype of the tensor it is the gradient of, as in PyTorch. Backward
# rules may return a wider one (``add(float16, float32)`` hands its float32 upstream gradient
# to both operands), so the reverse pass casts each input gradient to the recorded input dtype
# before passing it on: the float16 ops of mixed precision then always get float16 gradients,
# and a float32 master weight a float32 ``.grad``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any

from netcl.core.tensor import Tensor, reshape
from netcl.ops import add, cast, full

__all__ = [
    "Backward",
    "Node",
    "Tape",
    "current_tape",
    "detach",
    "enable_grad",
    "implicit_tape",
    "implicit_tape_enabled",
    "is_recording",
    "no_grad",
    "record",
]

#: A backward closure: ``(upstream grad, needs_input_grad) -> one grad (or None) per input``.
Backward = Callable[[Tensor, tuple[bool, ...]], Sequence["Tensor | None"]]


class _State(threading.local):
    def __init__(self) -> None:
        self.tapes: list[Tape] = []
        self.disabled = 0


_state = _State()
_tape_ids = itertools.count(1)
# whether ops record with no tape active (NOTE [ Recording ]); process-wide, as PyTorch's
_implicit = [True]


def implicit_tape(enabled: bool = True) -> bool:
    """Whether ops on tensors that require grad record with no ``with Tape()`` block active
    (on by default, as PyTorch; NOTE [ Recording ]); returns the previous setting.
    Process-wide. ``no_grad`` still turns recording off inside its block.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> w = Tensor.from_host(manager.default("cpu").queue, np.array([2.0]))
        >>> w.requires_grad = True
        >>> (w * w).requires_grad
        True
        >>> before = implicit_tape(False)
        >>> (w * w).requires_grad, is_recording()
        (False, False)
        >>> _ = implicit_tape(before)
    """
    previous = _implicit[0]
    _implicit[0] = bool(enabled)
    return previous


def implicit_tape_enabled() -> bool:
    """Whether :func:`implicit_tape` is on."""
    return _implicit[0]


def current_tape() -> Tape | None:
    """The innermost active :class:`Tape` of this thread, or ``None``.

    Examples:
        >>> with Tape() as tape:
        ...     current_tape() is tape
        True
        >>> current_tape() is None
        True
    """
    return _state.tapes[-1] if _state.tapes else None


def is_recording() -> bool:
    """Whether an op run now would be recorded: grad is not disabled, and a tape is active or
    the implicit tape is on (the default; NOTE [ Recording ]).

    Examples:
        >>> with Tape():
        ...     inside = is_recording()
        ...     with no_grad():
        ...         disabled = is_recording()
        >>> inside, disabled, is_recording()
        (True, False, True)
        >>> before = implicit_tape(False)
        >>> is_recording()
        False
        >>> _ = implicit_tape(before)
    """
    return (_implicit[0] or bool(_state.tapes)) and _state.disabled == 0


class _NoGrad(contextlib.ContextDecorator):
    """What :func:`no_grad` returns: a context manager (and decorator) that disables recording
    while active. A class, not a generator: autograd enters it once per recorded op and once
    per backward node, where ``contextlib.contextmanager``'s generator cost shows."""

    def __enter__(self) -> None:
        _state.disabled += 1

    def __exit__(self, *exc: object) -> None:
        _state.disabled -= 1


_NO_GRAD = _NoGrad()  # stateless (the count lives in _state): one instance serves every use


def no_grad() -> _NoGrad:
    """Run the block without recording, even inside a :class:`Tape` (nests; thread-local).

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> w = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
        >>> w.requires_grad = True
        >>> with ag.Tape(), ag.no_grad():
        ...     y = ag.ops.mul(w, w)
        >>> y.requires_grad, y.grad_fn is None
        (False, True)
    """
    return _NO_GRAD


@contextlib.contextmanager
def enable_grad() -> Iterator[None]:
    """Record again inside a :func:`no_grad` block (the tapes still have to be active).

    Examples:
        >>> with Tape(), no_grad(), enable_grad():
        ...     is_recording()
        True
    """
    saved, _state.disabled = _state.disabled, 0
    try:
        yield
    finally:
        _state.disabled = saved


def detach(t: Tensor) -> Tensor:
    """A tensor sharing ``t``'s storage that is not part of any graph (no ``grad_fn``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
        >>> x.requires_grad = True
        >>> d = detach(x)
        >>> d.requires_grad, d.to_host().tolist()
        (False, [1.0, 1.0])
    """
    if not isinstance(t, Tensor):
        raise TypeError(f"detach: expected a netcl Tensor, got {type(t).__name__}")
    return reshape(t, t.shape)


class Node:
    """One recorded op: its backward closure and where its input gradients go.

    ``node(grad)`` runs the closure and returns one gradient (or ``None``) per input, which is
    what the Tensor page calls ``grad_fn``.
    """

    __slots__ = (
        "__weakref__", "_backward", "in_dtypes", "in_shapes", "leaves", "name", "needs",
        "out_dtype", "out_shape", "parents", "tape_ids",
    )

    def __init__(
        self,
        name: str,
        inputs: Sequence[Tensor],
        backward: Backward,
        out: Tensor,
        tape_ids: tuple[int, ...],
    ) -> None:
        self.name = name
        self._backward: Backward | None = backward
        needs, parents, leaves = [], [], []
        for t in inputs:  # one pass: this runs for every recorded op
            need = bool(t.requires_grad)
            fn = t.grad_fn if need and isinstance(t.grad_fn, Node) else None
            needs.append(need)
            parents.append(fn)
            leaves.append(t if need and fn is None else None)
        self.needs = tuple(needs)
        self.parents: tuple[Node | None, ...] = tuple(parents)
        self.leaves: tuple[Tensor | None, ...] = tuple(leaves)
        self.in_shapes = tuple(t.shape for t in inputs)
        self.in_dtypes = tuple(t.dtype for t in inputs)
        self.out_shape = out.shape
        self.out_dtype = out.dtype
        self.tape_ids = tape_ids

    @property
    def released(self) -> bool:
        """Whether a backward pass already freed this node's saved tensors."""
        return self._backward is None

    def release(self) -> None:
        """Drop the backward closure and every tensor it saved."""
        self._backward = None

    def __call__(self, grad: Tensor) -> tuple[Tensor | None, ...]:
        """The gradients of this op's inputs, given the gradient of its output.

        Raises:
            RuntimeError: the node was already freed by a backward pass.
        """
        fn = self._backward
        if fn is None:
            raise RuntimeError(
                f"backward through {self.name!r}: its saved tensors were already freed by a "
                "backward pass; pass retain_graph=True to the first backward to run two"
            )
        with no_grad():
            grads = tuple(fn(grad, self.needs))
        if len(grads) != len(self.needs):
            raise RuntimeError(
                f"backward of {self.name!r} returned {len(grads)} gradients for "
                f"{len(self.needs)} inputs"
            )
        for i, g in enumerate(grads):
            if g is not None and g.shape != self.in_shapes[i]:
                raise RuntimeError(
                    f"backward of {self.name!r}: gradient {i} has shape {g.shape}, its input "
                    f"has shape {self.in_shapes[i]}"
                )
        return grads

    def __repr__(self) -> str:
        state = ", released" if self.released else ""
        return f"Node({self.name!r}, out={self.out_shape}{state})"


def record(name: str, inputs: Sequence[Tensor], out: Tensor, backward: Backward) -> Tensor:
    """Record ``out = name(inputs)`` on every active tape; returns the tensor to hand out.

    When nothing records (``no_grad``, no input requires grad, or no tape active with the
    implicit tape off) ``out`` itself comes back. Otherwise a view of ``out`` with
    ``requires_grad`` and ``grad_fn`` set (see NOTE [ No reference cycles ]); ``backward`` may
    capture ``out``.
    """
    tapes = _state.tapes
    if _state.disabled or not (tapes or _implicit[0]) or not any(t.requires_grad for t in inputs):
        return out
    node = Node(name, inputs, backward, out, tuple(t.id for t in tapes))
    for tape in tapes:  # none: the implicit tape, the graph alone holds the node
        tape._nodes.append(node)
    view = reshape(out, out.shape)
    view.requires_grad = True
    view.grad_fn = node
    return view


def _copy(t: Tensor) -> Tensor:
    return add(t, 0)


class Tape:
    """Records differentiable ops run inside ``with Tape() as tape:``; ``tape.backward(loss)``
    accumulates gradients into the ``.grad`` of every leaf with ``requires_grad``.

    Gradients accumulate across backward calls until something sets ``.grad`` back to ``None``
    (an optimizer's ``zero_grad``). Only leaves (tensors with ``requires_grad`` and no
    ``grad_fn``) get ``.grad``; intermediate gradients are freed as soon as they are used.

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> w = Tensor.from_host(q, np.array([1.0, 2.0, 3.0]))
        >>> w.requires_grad = True
        >>> with ag.Tape() as tape:
        ...     loss = ag.ops.sum(ag.ops.mul(w, w))
        >>> tape.backward(loss)
        >>> w.grad.to_host().tolist()
        [2.0, 4.0, 6.0]
    """

    def __init__(self) -> None:
        self.id = next(_tape_ids)
        self._nodes: list[Node] = []
        self.consumed = False
        self._active = False

    # -- context manager ---------------------------------------------------------------------

    def __enter__(self) -> Tape:
        if self._active:
            raise RuntimeError("Tape: this tape is already active; nest a new Tape() instead")
        if self.consumed:
            raise RuntimeError("Tape: this tape was consumed by backward; record on a new Tape()")
        _state.tapes.append(self)
        self._active = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack = _state.tapes
        if not stack or stack[-1] is not self:
            raise RuntimeError("Tape: tapes must be exited in the reverse order they were entered")
        stack.pop()
        self._active = False

    # -- inspection --------------------------------------------------------------------------

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes recorded on this tape, in recording order."""
        return tuple(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __repr__(self) -> str:
        state = "consumed" if self.consumed else f"{len(self._nodes)} nodes"
        return f"Tape({state})"

    # -- backward ----------------------------------------------------------------------------

    def backward(
        self,
        loss: Tensor,
        grad: Tensor | None = None,
        retain_graph: bool = False,
        on_node: Callable[[Node], Any] | None = None,
    ) -> None:
        """Accumulate d(loss)/d(leaf) into ``leaf.grad`` for every leaf ``loss`` depends on.

        Args:
            loss: a tensor recorded on this tape (or a leaf with ``requires_grad``).
            grad: the gradient of ``loss`` itself (``None``: ones; only for a 1-element loss).
            retain_graph: keep every node's saved tensors so backward can run again.
            on_node: called after each node ran and its buffers were released (profiling).

        Raises:
            ValueError: ``loss`` has more than one element and ``grad`` is ``None``, or
                ``grad`` has a different shape.
            RuntimeError: the tape was already consumed, ``loss`` does not require grad or
                was not recorded on this tape, or the pass reaches a node already freed.
        """
        if not isinstance(loss, Tensor):
            raise TypeError(
                f"Tape.backward: loss must be a netcl Tensor, got {type(loss).__name__}"
            )
        if self.consumed:
            raise RuntimeError(
                "Tape.backward: this tape was already consumed by a backward call; record the "
                "forward again on a new Tape, or pass retain_graph=True to the first backward"
            )
        if not loss.requires_grad:
            raise RuntimeError(
                "Tape.backward: loss does not require grad; nothing recorded on this tape "
                "depends on a tensor with requires_grad=True"
            )
        seed = self._seed(loss, grad)
        root = loss.grad_fn
        try:
            if root is None:
                _accumulate(loss, seed, {})
            elif not isinstance(root, Node) or self.id not in root.tape_ids:
                raise RuntimeError(
                    "Tape.backward: loss was not recorded on this tape; call backward on the "
                    "tape that was active when loss was computed"
                )
            else:
                self._run(root, seed, retain_graph, on_node)
        finally:
            if not retain_graph:
                for node in self._nodes:
                    node.release()
                self._nodes.clear()
                self.consumed = True

    @staticmethod
    def _seed(loss: Tensor, grad: Tensor | None) -> Tensor:
        if grad is None:
            if loss.size != 1:
                raise ValueError(
                    f"Tape.backward: loss has shape {loss.shape} ({loss.size} elements); a "
                    "non-scalar loss needs grad= of the same shape (or reduce it, e.g. sum)"
                )
            return full(loss.queue, loss.shape, 1, loss.dtype)
        if not isinstance(grad, Tensor):
            raise TypeError(
                f"Tape.backward: grad must be a netcl Tensor, got {type(grad).__name__}"
            )
        if grad.shape != loss.shape:
            raise ValueError(
                f"Tape.backward: grad has shape {grad.shape}, loss has shape {loss.shape}"
            )
        return grad

    def _run(
        self, root: Node, seed: Tensor, retain: bool, on_node: Callable[[Node], Any] | None
    ) -> None:
        order = _topological(root)
        pending: dict[Node, Tensor] = {root: seed}
        handed: _Handed = {}
        _hand(handed, seed)
        for node in order:
            g = pending.pop(node, None)
            if g is None:  # no gradient reached this node (every path carried None)
                if not retain:
                    node.release()
                continue
            grads = node(g)
            del g
            if not retain:
                node.release()
            for i, gi in enumerate(grads):
                if gi is None or not node.needs[i]:
                    continue
                gi = _as_dtype(gi, node.in_dtypes[i])
                parent = node.parents[i]
                if parent is not None:
                    prev = pending.get(parent)
                    pending[parent] = gi if prev is None else add(prev, gi)
                    _hand(handed, gi)
                else:
                    leaf = node.leaves[i]
                    if leaf is not None:
                        _accumulate(leaf, gi, handed)
            del grads
            if on_node is not None:
                on_node(node)


def _topological(root: Node) -> list[Node]:
    """Nodes reachable from ``root``, each after every node that consumes it (root first)."""
    post: list[Node] = []
    seen: set[int] = {id(root)}
    stack: list[tuple[Node, Iterator[Node | None]]] = [(root, iter(root.parents))]
    _check_alive(root)
    while stack:
        node, parents = stack[-1]
        for p in parents:
            if p is not None and id(p) not in seen:
                _check_alive(p)
                seen.add(id(p))
                stack.append((p, iter(p.parents)))
                break
        else:
            stack.pop()
            post.append(node)
    post.reverse()
    return post


def _check_alive(node: Node) -> None:
    if node.released:
        raise RuntimeError(
            f"Tape.backward: the graph reaches {node.name!r}, whose saved tensors were already "
            "freed by a backward pass (this tape's or another's); pass retain_graph=True to "
            "that earlier backward, or record the forward again"
        )


def _as_dtype(g: Tensor, dtype: str) -> Tensor:
    """``g`` in the dtype of the tensor it is the gradient of (see NOTE [ Gradient dtypes ])."""
    if g.dtype == dtype:
        return g
    return cast(g, dtype)


# NOTE [ Handed gradients by identity ]
# A gradient handed to a parent or a leaf may be returned again by another backward (the same
# object), so the first gradient a leaf keeps is copied when it was handed before. The set of
# handed gradients held their id()s only: a dead gradient's id reused by a new tensor made a
# spurious copy on some calls and not others (the same step enqueued different work from call
# to call, which netcl.runtime's capture detects). It holds weak references now: a gradient
# counts as handed only while that very object lives, and it does not keep it alive.
_Handed = dict[int, "weakref.ref[Tensor]"]


def _hand(handed: _Handed, g: Tensor) -> None:
    handed[id(g)] = weakref.ref(g)


def _was_handed(handed: _Handed, g: Tensor) -> bool:
    ref = handed.get(id(g))
    return ref is not None and ref() is g


def _accumulate(leaf: Tensor, g: Tensor, handed: _Handed) -> None:
    """``leaf.grad += g``; the first gradient is copied if anything else may hold it."""
    g = _as_dtype(g, leaf.dtype)
    with no_grad():
        if leaf.grad is None:
            shared = _was_handed(handed, g) or g._base is not None
            leaf.grad = _copy(g) if shared else g
        else:
            leaf.grad = add(leaf.grad, g)
    _hand(handed, g)
