"""Differentiable ``conv_transpose2d`` and ``backward_hook``, the identity that hands a
gradient to a callback (what ``netcl.nn.Module.register_full_backward_hook`` builds on).

``conv_transpose2d`` is the gradient of ``conv2d`` with respect to its input, so all three of
its directions are convolution kernels that exist already: the forward is
``conv2d_backward_data``, the input gradient is ``conv2d`` itself, and the weight gradient is
``conv2d_backward_weight`` with the roles of input and output gradient swapped. Stride,
padding, ``output_padding`` (below the stride), dilation and groups all come from those
kernels.

Both record their node with :func:`~._tape.record` directly rather than through
``@differentiable``: the op registry is the table of ops the shared op tests
(``tests/test_ops.py``) cover, and these two are tested in ``tests/test_ops_extra.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import netcl.ops as _ops
from netcl.core.tensor import Tensor, reshape

from ._function import Grads, tensor_inputs
from ._fusion import materialize_args
from ._lazy import Lazy
from ._tape import no_grad, record

__all__ = ["backward_hook", "conv_transpose2d", "conv_transpose2d_output_shape"]

IntPair = int | tuple[int, int]


def _pair(op: str, name: str, value: IntPair, minimum: int) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if (len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in pair)
            or min(pair) < minimum):
        raise ValueError(f"{op}: {name} must be an int >= {minimum} or a pair of them, got "
                         f"{value!r}")
    return pair[0], pair[1]


def conv_transpose2d_output_shape(
        input_shape: tuple[int, ...], weight_shape: tuple[int, ...], stride: IntPair = 1,
        padding: IntPair = 0, output_padding: IntPair = 0, groups: int = 1,
        dilation: IntPair = 1) -> tuple[int, int, int, int]:
    """``(N, C_out, H_out, W_out)`` of :func:`conv_transpose2d` (PyTorch's formula
    ``(H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``).

    Raises:
        ValueError: bad shapes, a non-positive output, or ``output_padding`` not below
            ``stride`` or ``dilation``.

    Examples:
        >>> conv_transpose2d_output_shape((2, 4, 5, 5), (4, 3, 3, 3), stride=2, padding=1,
        ...                               output_padding=1)
        (2, 3, 10, 10)
    """
    op = "conv_transpose2d"
    if len(input_shape) != 4 or len(weight_shape) != 4:
        raise ValueError(f"{op}: input (N, C_in, H, W) and weight (C_in, C_out / groups, kH, "
                         f"kW) must be 4-D, got input {input_shape} and weight {weight_shape}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if input_shape[1] != weight_shape[0] or weight_shape[0] % groups:
        raise ValueError(f"{op}: weight's dim 0 must equal the input channels "
                         f"(divisible by groups={groups}), got input {input_shape} and "
                         f"weight {weight_shape}")
    s, p = _pair(op, "stride", stride, 1), _pair(op, "padding", padding, 0)
    d, op_ = _pair(op, "dilation", dilation, 1), _pair(op, "output_padding", output_padding, 0)
    if op_[0] >= max(s[0], d[0]) or op_[1] >= max(s[1], d[1]):
        raise ValueError(f"{op}: output_padding {op_} must be smaller than stride {s} or "
                         f"dilation {d}")
    hw = tuple((input_shape[2 + k] - 1) * s[k] - 2 * p[k] + d[k] * (weight_shape[2 + k] - 1)
               + op_[k] + 1 for k in range(2))
    if min(hw) < 1:
        raise ValueError(f"{op}: output size {hw} is not positive for input {input_shape}, "
                         f"weight {weight_shape}, stride {s}, padding {p}, dilation {d}")
    return input_shape[0], weight_shape[1] * groups, hw[0], hw[1]


def conv_transpose2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,
                     padding: IntPair = 0, output_padding: IntPair = 0, groups: int = 1,
                     dilation: IntPair = 1) -> Tensor:
    """Transposed 2-D convolution of NCHW ``x`` with ``weight`` (C_in, C_out / groups, kH, kW)
    and ``bias`` (C_out,), PyTorch's ``conv_transpose2d`` (same argument order).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((1, 1, 2, 2)))
        >>> y = conv_transpose2d(x, Tensor.from_host(q, np.ones((1, 1, 2, 2))))
        >>> y.to_host()[0, 0].tolist()
        [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    if any(isinstance(t, Lazy) for t in (x, weight, bias)):  # inside compiler.jit
        (x, weight, bias), _ = materialize_args((x, weight, bias), {})
    shape = conv_transpose2d_output_shape(x.shape, weight.shape, stride, padding,
                                          output_padding, groups, dilation)
    if bias is not None and bias.shape != (shape[1],):
        raise ValueError(f"conv_transpose2d: bias must have shape ({shape[1]},), got "
                         f"{bias.shape}")
    with no_grad():
        out = _ops.conv2d_backward_data(x, weight, shape, stride, padding, dilation, groups)
        if bias is not None:
            out = _ops.bias_add(out, bias, 1)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        gx = gw = None
        if needs[0]:
            gx = _ops.conv2d(g, weight, None, stride, padding, dilation, groups)
        if needs[1]:
            gw = _ops.conv2d_backward_weight(g, x, weight.shape, stride, padding, dilation,
                                             groups)
        if bias is None:
            return gx, gw
        return gx, gw, (_ops.sum(g, axis=(0, 2, 3)) if needs[2] else None)

    return record("conv_transpose2d", tensor_inputs((x, weight, bias), {}), out, backward)


def backward_hook(x: Tensor, callback: Callable[[Tensor], Tensor | None]) -> Tensor:
    """``x`` unchanged (a view); in the backward pass ``callback(grad)`` sees the gradient of
    ``x`` and may return a replacement (``None`` keeps it).

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
        >>> x.requires_grad = True
        >>> seen = []
        >>> with ag.Tape() as tape:
        ...     y = ag.ops.sum(backward_hook(x, lambda g: seen.append(g.to_host().tolist())))
        >>> tape.backward(y)
        >>> seen
        [[1.0, 1.0]]
    """

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        changed = callback(g)
        if changed is not None and (not isinstance(changed, Tensor) or changed.shape != g.shape):
            raise ValueError(f"backward hook: a replacement gradient must be a Tensor of shape "
                             f"{g.shape}, got {getattr(changed, 'shape', type(changed).__name__)}")
        return (g if changed is None else changed,)

    return record("backward_hook", (x,), reshape(x, x.shape), backward)
