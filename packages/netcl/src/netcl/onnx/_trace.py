"""Recording a model's forward op by op, for the ONNX exporter.

# NOTE [ Tracing the functional ops ]
# Layers call ``netcl.nn.functional`` (``F.conv2d``, ``F.batch_norm``, ...) and models call
# ``netcl.autograd.ops`` (ResNet's ``F.add``, ``F.relu``) through their module objects, so while
# :func:`trace` is active each traced name in those two modules is a wrapper that runs the real
# function and records one :class:`Call`: the name, the bound arguments (defaults applied) and
# the output. A traced function that calls another traced one (``nn.functional.conv2d`` calls
# ``autograd.ops.conv2d``) records only the outer call. Anything the model computes outside
# these functions leaves tensors nobody recorded; the exporter names the op that consumed one.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from netcl.autograd import ops as autograd_ops
from netcl.core.tensor import Tensor
from netcl.nn import functional as nn_functional

__all__ = ["Call", "trace", "traced_names"]

_NOT_OPS = frozenset({"no_grad", "enable_grad", "inference_mode", "set_grad_enabled",
                      "is_grad_enabled", "check_padding_mode", "autocast"})


def traced_names(module: Any) -> list[str]:
    """Every public function of ``module`` the tracer wraps: all of them, so that an op the
    exporter has no rule for is recorded and named (calls returning no Tensor are dropped).

    Examples:
        >>> "conv2d" in traced_names(nn_functional), "no_grad" in traced_names(autograd_ops)
        (True, False)
    """
    return sorted(n for n in dir(module) if not n.startswith("_") and n not in _NOT_OPS
                  and inspect.isfunction(getattr(module, n)))


@dataclass
class Call:
    """One recorded call: the function's name, its bound arguments and its output."""

    name: str
    args: dict[str, Any]
    output: Any


class _Depth(threading.local):
    def __init__(self) -> None:
        self.depth = 0


_depth = _Depth()


def _wrap(name: str, fn: Callable[..., Any], calls: list[Call]) -> Callable[..., Any]:
    try:
        signature: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        _depth.depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            _depth.depth -= 1
        if _depth.depth == 0 and isinstance(out, Tensor):
            if signature is not None:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                named = dict(bound.arguments)
            else:
                named = {f"arg{i}": a for i, a in enumerate(args)} | kwargs
            calls.append(Call(name, named, out))
        return out

    return traced


@contextlib.contextmanager
def trace() -> Iterator[list[Call]]:
    """Record every traced call made inside the block (outermost calls only), in order.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.tensor import Tensor
        >>> x = Tensor.from_host(None, np.array([-1.0, 2.0], np.float32))
        >>> with trace() as calls:
        ...     _ = nn_functional.relu(x)
        >>> [c.name for c in calls]
        ['relu']
    """
    calls: list[Call] = []
    saved: list[tuple[Any, str, Any]] = []
    try:
        for module in (nn_functional, autograd_ops):
            for name in traced_names(module):
                fn = getattr(module, name)
                saved.append((module, name, fn))
                setattr(module, name, _wrap(name, fn, calls))
        yield calls
    finally:
        for module, name, fn in reversed(saved):
            setattr(module, name, fn)
