"""Random numbers from the counter-based Philox4x32-10 generator, identical on every backend.

# NOTE [ Philox streams ]
# A (seed, offset) pair names a stream of uint32 words: word j is lane j % 4 of
# Philox4x32-10(counter = (j // 4 low 32 bits, j // 4 high 32 bits, 0, 0),
#              key = (seed low 32 bits, seed high 32 bits)),
# the generator of Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11),
# and a draw of n values reads words offset .. offset + n - 1. NumPy (uint32 arithmetic with
# uint64 products) and OpenCL (mul_hi) compute the same words bit for bit; one OpenCL work
# item computes one 4-word block. Values from words:
# - uniform float32: (w >> 8) * 2^-24; float16: (w >> 21) * 2^-11; float64: w * 2^-32 (all
#   exact, in [0, 1)), then low + (high - low) * u;
# - bernoulli / dropout: (w >> 8) < round(p * 2^24), an integer test, so masks are identical;
# - normal: Box-Muller on the word pair at even stream position 2k, 2k + 1: r = sqrt(-2 log u1)
#   with u1 in (0, 1] (float32/float16: ((w >> 8) + 1) * 2^-24; float64: (w + 1) * 2^-32),
#   r cos(2 pi u2) at 2k and r sin(2 pi u2) at 2k + 1. Each value is a function of its stream
#   position only, so any offset gives the same numbers.
# Every result is identical across backends, bit for bit: integer ones trivially; uniform and
# dropout's scale are single roundings of the same operations (no fma: FP_CONTRACT OFF), and
# normal computes log, sin, cos and sqrt from correctly rounded operations only (NOTE
# [ Portable Box-Muller ] in _random_normal.py).
# Generator starts each draw on a 4-word block boundary, so draws never share words.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, canonical_dtype, numpy_dtype
from netcl.core.kernels.family import KernelSource, kernel_family
from netcl.core.kernels.header import literal_macro
from netcl.core.recording import drawing, numpy_call
from netcl.core.tensor import CPU_BACKEND, Tensor

from ._common import check_tensor, empty
from ._creation import device_queue, shape_arg
from ._dtype_policy import np_compute, require_float
from ._elementwise_dispatch import host, np_results
from ._launch import device_buffer, index_defs, launch_items
from ._random_normal import box_muller_source, np_box_muller

__all__ = [
    "Generator",
    "bernoulli",
    "default_generator",
    "dropout",
    "manual_seed",
    "normal",
    "philox4x32_10",
    "random_bits",
    "uniform",
]

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK = 0xFFFFFFFF
_P_SCALE = 1 << 24  # bernoulli/dropout thresholds compare the top 24 bits of a word

_SOURCE = """
/* No a * b + c fused into one fma: the results must round as NumPy's do (see NOTE
   [ Portable Box-Muller ]). */
#pragma OPENCL FP_CONTRACT OFF

inline uint4 philox(const ulong block, uint k0, uint k1) {
  uint c0 = (uint)block, c1 = (uint)(block >> 32), c2 = 0u, c3 = 0u;
  for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const uint hi0 = mul_hi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint hi1 = mul_hi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
  }
  return (uint4)(c0, c1, c2, c3);
}

/* The block of this work item and its words; lanes outside [offset, offset + n) skip. */
#define BLOCK_WORDS \\
  const ulong block = (offset >> 2) + get_global_id(0); \\
  if (block * 4 >= offset + (ulong)n) return; \\
  const uint4 w4 = philox(block, k0, k1); \\
  const uint w[4] = {w4.x, w4.y, w4.z, w4.w};
#define FOR_LANES for (int lane = 0; lane < 4; ++lane) { \\
  const ulong j = block * 4 + lane; \\
  if (j < offset || j >= offset + (ulong)n) continue; \\
  const IDX e = (IDX)(j - offset);
#define END_LANES }
"""

# one program per kernel and dtype: uniform/normal only make sense for float outputs
_KERNELS = {
    "bits": """
__kernel void rng_bits(__global long* out, const IDX n, const ulong offset,
                       const uint k0, const uint k1) {
  BLOCK_WORDS
  FOR_LANES out[e] = (long)w[lane]; END_LANES
}
""",
    "uniform": """
__kernel void rng_uniform(__global T* out, const IDX n, const ulong offset,
                          const uint k0, const uint k1, const CT low, const CT span) {
  BLOCK_WORDS
  FOR_LANES ST(out, e, low + span * UNIT(w[lane])); END_LANES
}
""",
    "normal": """
__kernel void rng_normal(__global T* out, const IDX n, const ulong offset,
                         const uint k0, const uint k1, const CT mean, const CT std) {
  BLOCK_WORDS
  CT z[4];
  box_muller(w[0], w[1], &z[0], &z[1]);
  box_muller(w[2], w[3], &z[2], &z[3]);
  FOR_LANES ST(out, e, mean + std * z[lane]); END_LANES
}
""",
    "bernoulli": """
__kernel void rng_bernoulli(__global T* out, const IDX n, const ulong offset,
                            const uint k0, const uint k1, const uint threshold) {
  BLOCK_WORDS
  FOR_LANES ST(out, e, (w[lane] >> 8) < threshold ? (CT)1 : (CT)0); END_LANES
}
""",
    "dropout": """
__kernel void rng_dropout(__global T* out, __global uchar* mask, __global const T* x,
                          const IDX xo, const IDX n, const ulong offset,
                          const uint k0, const uint k1, const uint threshold, const CT scale) {
  BLOCK_WORDS
  FOR_LANES
    const uchar keep = (w[lane] >> 8) >= threshold;
    mask[e] = keep;
    ST(out, e, keep ? LD(x, xo + e) * scale : (CT)0);
  END_LANES
}
""",
}

_UNITS = {
    # word -> [0, 1) per dtype, in the compute type
    "float32": "((float)((u) >> 8) * 0x1.0p-24f)",
    "float16": "((float)((u) >> 21) * 0x1.0p-11f)",
    "float64": "((double)(u) * 0x1.0p-32)",
}


# -- the NumPy reference --------------------------------------------------------------------


def philox4x32_10(counters: np.ndarray[Any, Any], key: Sequence[int]) -> np.ndarray[Any, Any]:
    """Philox4x32-10 of ``counters`` (shape (N, 4), uint32) under ``key`` (two uint32).

    Vectorized uint32 arithmetic with uint64 products; returns (N, 4) uint32.

    Examples:
        >>> philox4x32_10(np.zeros((1, 4), np.uint32), (0, 0))[0].tolist() == [
        ...     0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]  # Random123's known answer
        True
    """
    c = np.asarray(counters, dtype=np.uint32)
    c0, c1, c2, c3 = (c[:, i].copy() for i in range(4))
    k0, k1 = int(key[0]) & _MASK, int(key[1]) & _MASK
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
        p0 = c0.astype(np.uint64) * np.uint64(_M0)
        p1 = c2.astype(np.uint64) * np.uint64(_M1)
        hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), p0.astype(np.uint32)
        hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), p1.astype(np.uint32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint32(k0), lo1, hi0 ^ c3 ^ np.uint32(k1), lo0
    return np.stack([c0, c1, c2, c3], axis=1)


def _words(seed: int, offset: int, n: int) -> np.ndarray[Any, Any]:
    """Stream words ``offset .. offset + n - 1`` of ``seed`` (uint32), as NumPy."""
    if n == 0:
        return np.zeros(0, np.uint32)
    first, last = offset // 4, (offset + n - 1) // 4
    blocks = np.arange(first, last + 1, dtype=np.uint64)
    counters = np.zeros((blocks.size, 4), np.uint32)
    counters[:, 0] = (blocks & np.uint64(_MASK)).astype(np.uint32)
    counters[:, 1] = (blocks >> np.uint64(32)).astype(np.uint32)
    words = philox4x32_10(counters, (seed & _MASK, seed >> 32)).reshape(-1)
    start = offset - 4 * first
    return words[start:start + n]


# NumPy draws: seed and offset are scalar arguments of one recordable call, which a NumPy
# capture makes slots of (NOTE [ Replaying NumPy calls ] in netcl.runtime._numpy_graph)

def _np_tensor(queue: Any, dtype: str, fn: Any, *args: Any) -> Tensor:
    arr = numpy_call(fn, *args)
    if arr.dtype != numpy_dtype(dtype):
        arr = numpy_call(_as_dtype, arr, numpy_dtype(dtype))
    return Tensor(shape=arr.shape, dtype=dtype, queue=queue, array=arr, _backend=CPU_BACKEND)


def _as_dtype(a: Any, dtype: Any) -> Any:
    return a.astype(dtype)


def _bits_np(seed: int, offset: int, dims: tuple[int, ...]) -> Any:
    return _words(seed, offset, math.prod(dims)).reshape(dims)


def _uniform_np(seed: int, offset: int, dims: tuple[int, ...], low: Any, span: Any,
                dt: str) -> Any:
    u = _np_unit(_words(seed, offset, math.prod(dims)), dt)
    return (low + span * u).reshape(dims)


def _normal_np(seed: int, offset: int, dims: tuple[int, ...], mean: Any, std: Any,
               dt: str) -> Any:
    return (mean + std * _np_normal(seed, offset, math.prod(dims), dt)).reshape(dims)


def _bernoulli_np(seed: int, offset: int, dims: tuple[int, ...], threshold: int) -> Any:
    return ((_words(seed, offset, math.prod(dims)) >> 8) < threshold).reshape(dims)


def _dropout_np(x: np.ndarray[Any, Any], seed: int, offset: int, threshold: int, scale: Any
                ) -> tuple[Any, Any]:
    keep = ((_words(seed, offset, x.size) >> 8) >= threshold).reshape(x.shape)
    return np.where(keep, x.astype(type(scale), copy=False) * scale, type(scale)(0)), keep


def _np_normal(seed: int, offset: int, n: int, dtype: str) -> np.ndarray[Any, Any]:
    """Box-Muller normals at stream positions ``offset ..`` (see NOTE [ Philox streams ])."""
    lo = offset - offset % 2
    hi = offset + n + (offset + n) % 2
    w = _words(seed, lo, hi - lo).reshape(-1, 2)
    z0, z1 = np_box_muller(w[:, 0], w[:, 1], dtype)
    z = np.stack([z0, z1], axis=1).reshape(-1)
    return z[offset - lo:offset - lo + n]


def _np_unit(words: np.ndarray[Any, Any], dtype: str) -> np.ndarray[Any, Any]:
    unit: np.ndarray[Any, Any]
    if dtype == "float64":
        unit = words.astype(np.float64) * 2.0**-32
    else:
        shift = 21 if dtype == "float16" else 8
        unit = (words >> shift).astype(np.float32) * np.float32(2.0 ** (shift - 32))
    return unit


# -- dispatch ---------------------------------------------------------------------------------


def _seed(op: str, seed: Any, offset: Any) -> tuple[int, int]:
    for name, v, limit in (("seed", seed, 2**64), ("offset", offset, 2**63)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}: {name} must be an int, got {v!r}")
        if not 0 <= v < limit:
            raise ValueError(f"{op}: {name} must be in [0, 2**{int(math.log2(limit))}), got {v}")
    return int(seed), int(offset)


def _stream(op: str, seed: Any, offset: Any, n: int) -> tuple[int, int]:
    """The ``(seed, offset)`` a draw of ``n`` words uses: the given ones, or with ``seed=None``
    the default generator's next unused words (NOTE [ The default generator ]). Call it after
    every other argument check, so a refused call does not advance the generator."""
    if seed is None:
        if offset is not None:
            raise ValueError(f"{op}: offset={offset!r} needs a seed; without one the draw comes "
                             "from the default generator (netcl.ops.manual_seed)")
        return default_generator.seed, default_generator.take(n)
    return _seed(op, seed, 0 if offset is None else offset)


def _threshold(op: str, p: float) -> int:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: p must be in [0, 1], got {p}")
    return round(p * _P_SCALE)


def _float_dtype(op: str, dtype: Any) -> str:
    dt = canonical_dtype(dtype, op)
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{op}: dtype must be a float type, got {dt}")
    return dt


def _program_source(name: str, dtype: str, wide: bool) -> str:
    """Kernel ``rng_<name>`` writing ``dtype``, with 64-bit indices if ``wide``; the dtype
    header comes from :func:`random_family`."""
    unit = _UNITS.get(dtype, _UNITS["float32"])
    defs = index_defs(2**31 if wide else 0)[0]
    helpers = box_muller_source(dtype) if name == "normal" else ""
    return (f"{defs}{literal_macro(dtype)}#define UNIT(u) {unit}\n{_SOURCE}{helpers}"
            f"{_KERNELS[name]}")


def _random_golden() -> list[tuple[str, tuple[str, str, bool]]]:
    cases = [("random/bits-int64", ("bits", "int64", False))]
    for kernel, dtypes in (("uniform", FLOAT_DTYPES), ("normal", FLOAT_DTYPES),
                           ("bernoulli", ("float32",)), ("dropout", ("float32", "float16"))):
        cases += [(f"random/{kernel}-{dt}", (kernel, dt, False)) for dt in dtypes]
    return cases


@kernel_family("ops.random", golden=_random_golden)
def random_family(name: str, dtype: str, wide: bool) -> KernelSource:
    """The Philox kernel ``rng_<name>`` writing ``dtype``; one work item per output block."""
    return KernelSource(_program_source(name, dtype, wide), (f"rng_{name}",), dtype)


def _launch(name: str, out: Tensor, seed: int, offset: int, extra: tuple[Any, ...] = (),
            mask: Tensor | None = None, x: Tensor | None = None) -> None:
    """Run ``rng_<name>`` writing ``out.size`` values from stream position ``offset``.

    ``mask`` and ``x`` are dropout's; ``extra`` are the kernel's trailing scalar arguments.
    """
    n = out.size
    if n == 0:
        return
    q = out.queue
    _, idx = index_defs(n, 0 if x is None else x.offset + x.size)
    kernel = random_family(q.context, name, out.dtype, idx is np.int64).kernel
    head = [device_buffer(out)]
    if mask is not None and x is not None:
        head += [device_buffer(mask), device_buffer(x), idx(x.offset)]
    # one block more than n words need from an aligned offset: the launch size must not depend
    # on the offset, which a captured step's replays change (NOTE [ Random streams under a
    # recorder ] in netcl.core.recording); the extra work item returns at once
    blocks = -(-n // 4) + 1
    launch_items(q, kernel, blocks, *head, idx(n), np.uint64(offset),
                 np.uint32(seed & _MASK), np.uint32(seed >> 32), *extra)


def random_bits(queue: Any, shape: Sequence[int], seed: int | None = None,
                offset: int | None = None) -> Tensor:
    """The raw uint32 words of the stream, as int64 (netcl has no uint32 dtype).

    Every draw takes the stream ``seed`` from word ``offset`` (default 0) on, or with no
    ``seed`` the default generator's next words (:func:`manual_seed`); so do
    :func:`uniform`, :func:`normal`, :func:`bernoulli` and :func:`dropout`.

    Raises:
        ValueError: an ``offset`` without a ``seed``; a seed or offset out of range.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> random_bits(q, (4,), seed=0).to_host().tolist() == [
        ...     0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
        True
    """
    q = device_queue(queue)
    dims = shape_arg(shape, "random_bits")
    seed, offset = _stream("random_bits", seed, offset, math.prod(dims))
    if getattr(q, "backend", None) == "cpu":
        return _np_tensor(q, "int64", _bits_np, seed, offset, dims)
    out = empty(q, dims, "int64")
    _launch("bits", out, seed, offset)
    return out


def uniform(queue: Any, shape: Sequence[int], low: float = 0.0, high: float = 1.0, *,
            seed: int | None = None, offset: int | None = None, dtype: Any = "float32"
            ) -> Tensor:
    """Uniform values in ``[low, high)`` (float rounding may reach ``high`` for float16).

    Examples:
        >>> from netcl.core.device import manager
        >>> x = uniform(manager.default("cpu").queue, (1000,), -1, 1, seed=7)
        >>> bool(x.to_host().min() >= -1 and x.to_host().max() < 1)
        True
    """
    dt = _float_dtype("uniform", dtype)
    q = device_queue(queue)
    dims = shape_arg(shape, "uniform")
    seed, offset = _stream("uniform", seed, offset, math.prod(dims))
    ct = np_compute(dt).type
    if getattr(q, "backend", None) == "cpu":
        return _np_tensor(q, dt, _uniform_np, seed, offset, dims, ct(low), ct(high - low), dt)
    out = empty(q, dims, dt)
    _launch("uniform", out, seed, offset, (ct(low), ct(high - low)))
    return out


def normal(queue: Any, shape: Sequence[int], mean: float = 0.0, std: float = 1.0, *,
           seed: int | None = None, offset: int | None = None, dtype: Any = "float32"
           ) -> Tensor:
    """Normal values with ``mean`` and ``std`` (Box-Muller, see NOTE [ Philox streams ]).

    Examples:
        >>> from netcl.core.device import manager
        >>> z = normal(manager.default("cpu").queue, (10000,), seed=1).to_host()
        >>> bool(abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05)
        True
    """
    dt = _float_dtype("normal", dtype)
    q = device_queue(queue)
    dims = shape_arg(shape, "normal")
    seed, offset = _stream("normal", seed, offset, math.prod(dims))
    ct = np_compute(dt).type
    if getattr(q, "backend", None) == "cpu":
        return _np_tensor(q, dt, _normal_np, seed, offset, dims, ct(mean), ct(std), dt)
    out = empty(q, dims, dt)
    _launch("normal", out, seed, offset, (ct(mean), ct(std)))
    return out


def bernoulli(queue: Any, shape: Sequence[int], p: float = 0.5, *, seed: int | None = None,
              offset: int | None = None, dtype: Any = "float32") -> Tensor:
    """1 with probability ``p`` (to 2^-24), else 0, in ``dtype`` (any dtype).

    Raises:
        ValueError: ``p`` outside [0, 1].

    Examples:
        >>> from netcl.core.device import manager
        >>> b = bernoulli(manager.default("cpu").queue, (10000,), 0.25, seed=3).to_host()
        >>> bool(abs(b.mean() - 0.25) < 0.02)
        True
    """
    threshold = _threshold("bernoulli", p)
    dt = canonical_dtype(dtype, "bernoulli")
    q = device_queue(queue)
    dims = shape_arg(shape, "bernoulli")
    seed, offset = _stream("bernoulli", seed, offset, math.prod(dims))
    if getattr(q, "backend", None) == "cpu":
        return _np_tensor(q, dt, _bernoulli_np, seed, offset, dims, threshold)
    out = empty(q, dims, dt)
    _launch("bernoulli", out, seed, offset, (np.uint32(threshold),))
    return out


def dropout(x: Tensor, p: float, seed: int | None = None, offset: int | None = None
            ) -> tuple[Tensor, Tensor]:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    Returns ``(y, mask)`` with ``mask`` a uint8 tensor, 1 where kept (the backward pass
    multiplies by it and the same scale). ``p = 1`` zeroes everything. Without a ``seed`` the
    mask comes from the default generator, which each call advances, so successive calls and
    different layers draw different masks (:func:`manual_seed` replays them).

    Raises:
        TypeError: an integer ``x``.
        ValueError: ``p`` outside [0, 1].

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones(8))
        >>> y, mask = dropout(x, 0.5, seed=0)
        >>> bool(((y.to_host() == 2) == (mask.to_host() == 1)).all())
        True
    """
    x = check_tensor("dropout", x)
    require_float("dropout", x)
    threshold = _threshold("dropout", p)
    seed, offset = _stream("dropout", seed, offset, x.size)
    ct = np_compute(x.dtype).type
    scale = ct(0.0 if p >= 1.0 else 1.0 / (1.0 - p))
    if x.array is not None:  # seed and offset are scalars a NumPy capture makes slots of
        y, mask = np_results(x, (x.dtype, "uint8"), _dropout_np, host(x), seed, offset,
                             threshold, scale)
        return y, mask
    out = empty(x.queue, x.shape, x.dtype)
    mask = empty(x.queue, x.shape, "uint8")
    _launch("dropout", out, seed, offset, (np.uint32(threshold), scale), mask, x)
    return out, mask


class Generator:
    """A Philox stream with a counter: each draw takes the next unused words.

    Draws start on 4-word block boundaries, so no two draws share a word. ``offset`` is the
    stream position of the next draw; set it (or build a new Generator) to replay.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> g = Generator(42)
        >>> a = g.uniform(q, (3,))
        >>> g.offset
        4
        >>> b = Generator(42).uniform(q, (3,))
        >>> bool((a.to_host() == b.to_host()).all())
        True
    """

    def __init__(self, seed: int, offset: int = 0) -> None:
        self.seed, self.offset = _seed("Generator", seed, offset)
        self._lock = threading.Lock()  # threads drawing at once still get disjoint words

    def __repr__(self) -> str:
        return f"Generator(seed={self.seed}, offset={self.offset})"

    def manual_seed(self, seed: int) -> Generator:
        """Restart at stream ``seed``, word 0; returns this generator.

        Raises:
            TypeError, ValueError: ``seed`` is not an int in ``[0, 2**64)``.
        """
        seed, _ = _seed("manual_seed", seed, 0)
        drawing(self)
        with self._lock:
            self.seed, self.offset = seed, 0
        return self

    def take(self, n: int) -> int:
        """Reserve ``n`` words: returns the offset to draw them at and advances past them.

        A graph capture that traces the draw learns of it (:func:`netcl.core.recording.drawing`)
        and makes this generator's seed and offset parameters of the graph, so each replay
        draws the words eager execution would have drawn and advances the offset as it would.
        """
        drawing(self)
        with self._lock:
            start = self.offset
            self.offset += -(-int(n) // 4) * 4
        return start

    def numpy_generator(self) -> np.random.Generator:
        """A NumPy generator seeded with this stream's next four words (it advances by four):
        host-side draws, such as weight initialisation, that :func:`manual_seed` replays too.

        Examples:
            >>> a = Generator(5).numpy_generator().integers(1000, size=3)
            >>> bool((a == Generator(5).numpy_generator().integers(1000, size=3)).all())
            True
        """
        drawing(self, host=True)  # a captured step cannot repeat host-side draws
        words = _words(self.seed, self.take(4), 4)
        return np.random.default_rng([int(w) for w in words])

    def random_bits(self, queue: Any, shape: Sequence[int]) -> Tensor:
        """:func:`random_bits` at this generator's next offset."""
        return random_bits(queue, shape, self.seed, self.take(math.prod(shape_arg(shape))))

    def uniform(self, queue: Any, shape: Sequence[int], low: float = 0.0, high: float = 1.0,
                dtype: Any = "float32") -> Tensor:
        """:func:`uniform` at this generator's next offset."""
        return uniform(queue, shape, low, high, seed=self.seed,
                       offset=self.take(math.prod(shape_arg(shape))), dtype=dtype)

    def normal(self, queue: Any, shape: Sequence[int], mean: float = 0.0, std: float = 1.0,
               dtype: Any = "float32") -> Tensor:
        """:func:`normal` at this generator's next offset."""
        return normal(queue, shape, mean, std, seed=self.seed,
                      offset=self.take(math.prod(shape_arg(shape))), dtype=dtype)

    def bernoulli(self, queue: Any, shape: Sequence[int], p: float = 0.5,
                  dtype: Any = "float32") -> Tensor:
        """:func:`bernoulli` at this generator's next offset."""
        return bernoulli(queue, shape, p, seed=self.seed,
                         offset=self.take(math.prod(shape_arg(shape))), dtype=dtype)

    def dropout(self, x: Tensor, p: float) -> tuple[Tensor, Tensor]:
        """:func:`dropout` at this generator's next offset."""
        x = check_tensor("dropout", x)
        return dropout(x, p, self.seed, self.take(x.size))


# NOTE [ The default generator ]
# Every random op called without a seed -- dropout, uniform, normal, bernoulli, random_bits, and
# so netcl.nn.Dropout and the weight initialisers of netcl.nn.init -- draws from one
# process-wide Generator, as PyTorch's global generator. Each draw reserves its own words (the
# offset advances past them), so successive calls and different layers never share a mask, and
# manual_seed(s) replays the whole sequence: the same model built and trained the same way
# after manual_seed(s) draws the same numbers on every backend. Like PyTorch's it starts from a
# fixed seed (0), so an unseeded process is reproducible too. It lives here, in the lowest layer
# that owns random ops; netcl.nn re-exports manual_seed.
default_generator = Generator(0)
"""The process-wide :class:`Generator` that random ops without a ``seed`` draw from."""


def manual_seed(seed: int) -> Generator:
    """Restart the default generator at stream ``seed`` (PyTorch's ``torch.manual_seed``);
    returns it. Everything drawn afterwards without an explicit seed -- dropout masks, random
    tensors, weight initialisation -- repeats after the same call.

    Raises:
        TypeError, ValueError: ``seed`` is not an int in ``[0, 2**64)``.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> _ = manual_seed(7)
        >>> a, b = uniform(q, (3,)).to_host(), uniform(q, (3,)).to_host()
        >>> bool((a != b).all())  # each draw takes new words
        True
        >>> _ = manual_seed(7)
        >>> bool((uniform(q, (3,)).to_host() == a).all())  # and the same seed replays them
        True
    """
    return default_generator.manual_seed(seed)
