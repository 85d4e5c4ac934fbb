"""Weight initialisers, PyTorch's formulas, each taking an ``np.random.Generator`` (``rng``);
without one they draw from the default generator, so :func:`netcl.nn.manual_seed` replays them.

Initialisation is not a hot path: values are drawn on the host and written into the tensor in
place (so an optimizer holding it keeps working).

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> w = Tensor.from_shape(manager.default("cpu").queue, (64, 32))
    >>> _ = kaiming_uniform_(w, rng=np.random.default_rng(0))
    >>> bool(np.abs(w.to_host()).max() <= np.sqrt(6 / 32))
    True
"""

from __future__ import annotations

import math

import numpy as np

from netcl.core.tensor import Tensor, copy_from_host
from netcl.ops import default_generator

__all__ = [
    "calculate_gain",
    "constant_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(f"init: fan in/out need a tensor of at least 2 dims, got shape {t.shape}")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (linear, sigmoid, tanh, relu, leaky_relu)."""
    if nonlinearity in ("linear", "conv2d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _rng(rng: np.random.Generator | None) -> np.random.Generator:
    # Without an explicit rng, draw from the default generator (netcl.nn.manual_seed), so
    # that seeding it also replays the initial weights of a model.
    return rng if rng is not None else default_generator.numpy_generator()


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0,
             rng: np.random.Generator | None = None) -> Tensor:
    """Fill with U(a, b)."""
    return copy_from_host(t, _rng(rng).uniform(a, b, t.shape))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0,
            rng: np.random.Generator | None = None) -> Tensor:
    """Fill with N(mean, std^2)."""
    return copy_from_host(t, _rng(rng).normal(mean, std, t.shape))


def constant_(t: Tensor, value: float) -> Tensor:
    """Fill with ``value``."""
    return copy_from_host(t, np.full(t.shape, value))


def zeros_(t: Tensor) -> Tensor:
    """Fill with 0."""
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    """Fill with 1."""
    return constant_(t, 1.0)


def xavier_uniform_(t: Tensor, gain: float = 1.0,
                    rng: np.random.Generator | None = None) -> Tensor:
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot & Bengio)."""
    fan_in, fan_out = _fans(t)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -a, a, rng)


def xavier_normal_(t: Tensor, gain: float = 1.0,
                   rng: np.random.Generator | None = None) -> Tensor:
    """N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), rng)


def _kaiming_std(t: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"kaiming init: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     rng: np.random.Generator | None = None) -> Tensor:
    """U(-b, b) with ``b = gain * sqrt(3 / fan)`` (He et al.)."""
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound, rng)


def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    rng: np.random.Generator | None = None) -> Tensor:
    """N(0, std^2) with ``std = gain / sqrt(fan)`` (He et al.)."""
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity), rng)


_TRUNC_ROUNDS = 1000  # redraws before an interval of (almost) no mass is reported


def trunc_normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, rng: np.random.Generator | None = None) -> Tensor:
    """Fill with N(mean, std^2) truncated to ``[a, b]`` (absolute bounds, as PyTorch's
    ``trunc_normal_``): values outside are drawn again, so the distribution is exactly the
    truncated normal.

    Raises:
        ValueError: ``a >= b``, ``std <= 0``, or an interval the normal almost never reaches.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> w = Tensor.from_shape(manager.default("cpu").queue, (100, 7))
        >>> v = trunc_normal_(w, std=0.02, a=-0.04, b=0.04, rng=np.random.default_rng(0))
        >>> bool(np.abs(v.to_host()).max() <= 0.04)
        True
    """
    if not a < b or std <= 0:
        raise ValueError(f"trunc_normal_: need a < b and std > 0, got a={a}, b={b}, std={std}")
    gen = _rng(rng)
    values = gen.normal(mean, std, t.shape)
    for _ in range(_TRUNC_ROUNDS):
        outside = (values < a) | (values > b)
        count = int(outside.sum())
        if not count:
            return copy_from_host(t, values)
        values[outside] = gen.normal(mean, std, count)
    raise ValueError(f"trunc_normal_: [{a}, {b}] is too far in the tail of N({mean}, {std}^2) "
                     f"to sample by redrawing")


def orthogonal_(t: Tensor, gain: float = 1.0, rng: np.random.Generator | None = None
                ) -> Tensor:
    """Fill with a (semi-)orthogonal matrix times ``gain`` (Saxe et al.; PyTorch's
    ``orthogonal_``): the Q of the QR decomposition of a normal matrix, signs fixed by R's
    diagonal, over the tensor viewed as ``(shape[0], prod(shape[1:]))``.

    Raises:
        ValueError: fewer than 2 dims.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> w = Tensor.from_shape(manager.default("cpu").queue, (3, 5), dtype="float64")
        >>> q = orthogonal_(w, rng=np.random.default_rng(0)).to_host()
        >>> bool(np.allclose(q @ q.T, np.eye(3)))
        True
    """
    if t.ndim < 2:
        raise ValueError(f"orthogonal_: needs a tensor of at least 2 dims, got shape {t.shape}")
    rows = t.shape[0]
    cols = t.size // rows
    flat = _rng(rng).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return copy_from_host(t, (gain * q).reshape(t.shape))
