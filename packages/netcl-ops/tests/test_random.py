"""Philox streams: known answers; words, masks, uniform and normal values bit-identical on every
backend; normal's accuracy against libm; Generator offsets, the default generator, what a
recorder learns of draws, distributions, errors."""

from __future__ import annotations

import doctest
import threading
from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle, manager
from netcl.core.recording import recording
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import _random
from netcl.ops._random_normal import np_box_muller

_NUMPY = manager.default("cpu")
assert _NUMPY is not None
CPU = _NUMPY.queue

# Random123's known-answer vectors for Philox4x32-10: (counter, key, output)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def test_known_answers() -> None:
    counters = np.array([c for c, _, _ in KAT], dtype=np.uint32)
    for row, (_, key, want) in zip(counters, KAT):
        got = ops.philox4x32_10(row[None, :], key)[0]
        assert got.tolist() == list(want)


# (seed, offset, n): block-aligned and not, a seed above 2**32, an odd count
STREAMS = [(0, 0, 4), (7, 0, 257), (7, 3, 33), (2**40 + 5, 1, 7), (123, 2**33 + 2, 9)]


@pytest.mark.parametrize("stream", STREAMS, ids=str)
def test_bits_identical_everywhere(dev: DeviceHandle, stream: tuple[int, int, int]) -> None:
    seed, offset, n = stream
    got = ops.random_bits(dev.queue, (n,), seed, offset)
    assert got.dtype == "int64"
    want = ops.random_bits(CPU, (offset + n + 8,), seed, 0).to_host()[offset:offset + n] \
        if offset < 1000 else _random._words(seed, offset, n).astype(np.int64)
    np.testing.assert_array_equal(got.to_host(), want)


def _bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The bit patterns of float values (so -0.0 and 0.0 differ)."""
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_floats_bit_identical_to_numpy(dev: DeviceHandle, dtype: str) -> None:
    """uniform (with and without low/high) and normal: the same bits on every backend."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    draws = [(ops.uniform, 0.0, 1.0), (ops.uniform, -2.0, 3.0), (ops.normal, 0.0, 1.0),
             (ops.normal, 1.0, 2.0)]
    for offset, shape in ((0, (33,)), (5, (3, 7)), (2, (1,)), (3, (4099,))):
        for draw, a, b in draws:
            got = draw(dev.queue, shape, a, b, seed=11, offset=offset, dtype=dtype)
            want = draw(CPU, shape, a, b, seed=11, offset=offset, dtype=dtype)
            assert got.dtype == dtype and got.shape == shape
            np.testing.assert_array_equal(_bits(got.to_host()), _bits(want.to_host()))


def test_normal_bit_identical_on_a_long_stream(dev: DeviceHandle) -> None:
    """2^16 normals in each float dtype, bit for bit as NumPy computes them."""
    for dtype in ("float32", "float16", "float64"):
        if not supports_dtype(dev, dtype):
            continue
        got = ops.normal(dev.queue, (1 << 16,), seed=7, offset=1, dtype=dtype).to_host()
        want = ops.normal(CPU, (1 << 16,), seed=7, offset=1, dtype=dtype).to_host()
        np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_normal_accuracy_against_float64_libm(dtype: str) -> None:
    """The portable log/sin/cos/sqrt (NOTE [ Portable Box-Muller ]) against libm in float64
    on 2^20 word pairs: within 3 float32 ulp of r for float32 (and float16's float32 values),
    within 1e-15 r for float64. (Every backend computes these bits: tests above.)"""
    rng = np.random.default_rng(9)
    w1, w2 = (rng.integers(0, 2**32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
              for _ in range(2))
    # the ends of u1 (its smallest value, u1 = 1) and the angle's quadrant/octant boundaries
    edges1 = [0, 1, 255, 256, 0xFFFFFEFF, 0xFFFFFF00, 0xFFFFFFFF, 0x80000000]
    edges2 = [0, 0x1FFFFFFF, 0x20000000, 0x20000100, 0x3FFFFFFF, 0x40000000, 0xC0000000,
              0xFFFFFFFF]
    w1[:8], w2[:8] = edges1, edges2
    bits = {"float64": 32, "float16": 11}.get(dtype, 24)
    if dtype == "float64":
        u1 = (w1.astype(np.float64) + 1.0) * 2.0**-32
    else:
        u1 = ((w1 >> 8) + 1).astype(np.float64) * 2.0**-24
    theta = 2 * np.pi * ((w2 >> (32 - bits)).astype(np.float64) * 2.0**-bits)
    r = np.sqrt(-2 * np.log(u1))
    z0, z1 = np_box_muller(w1, w2, dtype)
    err = np.maximum(np.abs(z0 - r * np.cos(theta)), np.abs(z1 - r * np.sin(theta)))
    if dtype == "float64":
        assert (err <= 1e-15 * np.maximum(r, 1.0)).all(), err.max()
    else:
        ulp = np.spacing(r.astype(np.float32)).astype(np.float64)
        assert (err[r > 0] <= 3 * ulp[r > 0]).all(), (err[r > 0] / ulp[r > 0]).max()


def test_float64_values_from_the_words(dev: DeviceHandle) -> None:
    """float64 uniform and normal against the raw words, computed here in float64 (the
    NumPy backend is not the reference: it could share a float32 step with the kernels)."""
    if not supports_dtype(dev, "float64"):
        pytest.skip(f"{dev.device_name} has no float64")
    w = ops.random_bits(CPU, (34,), seed=11).to_host().astype(np.float64)
    u = ops.uniform(dev.queue, (34,), -2.0, 3.0, seed=11, dtype="float64").to_host()
    assert_close(u, -2.0 + 5.0 * (w * 2.0**-32), "float64")
    r = np.sqrt(-2.0 * np.log((w[0::2] + 1.0) * 2.0**-32))
    theta = 2.0 * np.pi * (w[1::2] * 2.0**-32)
    z = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1).reshape(-1)
    got = ops.normal(dev.queue, (34,), 1.0, 2.0, seed=11, dtype="float64").to_host()
    assert_close(got, 1.0 + 2.0 * z, "float64", scale=10.0)


def test_normal_any_offset_is_the_same_stream(dev: DeviceHandle) -> None:
    """A value depends on its stream position only, so an odd offset reads the same numbers."""
    whole = ops.normal(dev.queue, (12,), seed=3).to_host()
    part = ops.normal(dev.queue, (7,), seed=3, offset=5).to_host()
    np.testing.assert_array_equal(part, whole[5:])  # the same numbers, bit for bit


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float16", "float64"])
def test_bernoulli_exact(dev: DeviceHandle, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    for p in (0.0, 0.3, 1.0):
        b = ops.bernoulli(dev.queue, (257,), p, seed=5, offset=3, dtype=dtype)
        want = ops.bernoulli(CPU, (257,), p, seed=5, offset=3, dtype=dtype)
        assert b.dtype == dtype
        np.testing.assert_array_equal(b.to_host(), want.to_host())


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_dropout(dev: DeviceHandle, dtype: str) -> None:
    """Masks bit-identical everywhere; kept values scaled by 1 / (1 - p) in the compute type
    (1 / 0.7 is not a float32: a float32 scale is 2.4e-8 off, relative, in float64)."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    x_host = np.random.default_rng(0).standard_normal((9, 33))
    x_seen = x_host.astype(dtype).astype(np.float64)
    for p in (0.0, 0.3, 1.0):
        y, mask = ops.dropout(Tensor.from_host(dev.queue, x_host, dtype=dtype), p, seed=9,
                              offset=2)
        yr, mr = ops.dropout(Tensor.from_host(CPU, x_host, dtype=dtype), p, seed=9, offset=2)
        assert mask.dtype == "uint8" and y.dtype == dtype and y.shape == x_host.shape
        np.testing.assert_array_equal(mask.to_host(), mr.to_host())
        scale = 0.0 if p == 1 else 1 / (1 - p)
        assert_close(y.to_host(), x_seen * mask.to_host() * scale, dtype)
        assert_close(yr.to_host(), x_seen * mask.to_host() * scale, dtype)


def test_distributions(dev: DeviceHandle) -> None:
    n = 200_000
    u = ops.uniform(dev.queue, (n,), seed=1).to_host()
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.005
    z = ops.normal(dev.queue, (n,), seed=2).to_host()
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    b = ops.bernoulli(dev.queue, (n,), 0.2, seed=3).to_host()
    assert abs(b.mean() - 0.2) < 0.005
    bits = ops.random_bits(dev.queue, (n,), seed=4).to_host()
    assert bits.min() >= 0 and bits.max() < 2**32 and abs(bits.mean() / 2**32 - 0.5) < 0.005


def test_generator(dev: DeviceHandle) -> None:
    g = ops.Generator(42)
    a = g.uniform(dev.queue, (5,))
    b = g.normal(dev.queue, (3, 3))
    _, mask = g.dropout(Tensor.from_host(dev.queue, np.ones(6)), 0.5)
    assert g.offset == 8 + 12 + 8  # each draw starts on a 4-word block
    again = ops.Generator(42)
    np.testing.assert_array_equal(again.uniform(dev.queue, (5,)).to_host(), a.to_host())
    np.testing.assert_array_equal(again.normal(dev.queue, (3, 3)).to_host(), b.to_host())
    np.testing.assert_array_equal(ops.dropout(Tensor.from_host(dev.queue, np.ones(6)), 0.5, 42,
                                              20)[1].to_host(), mask.to_host())
    assert repr(again) == "Generator(seed=42, offset=20)"


def test_default_generator(dev: DeviceHandle) -> None:
    """Draws without a seed take the default generator's next words (each its own 4-word
    blocks), equal to the explicit (seed, offset) draws; manual_seed restarts the stream; a
    refused call does not advance it."""
    g = ops.manual_seed(3)
    assert g is ops.default_generator and (g.seed, g.offset) == (3, 0)
    q = dev.queue
    u, z = ops.uniform(q, (5,)), ops.normal(q, (3,))
    _, mask = ops.dropout(Tensor.from_host(q, np.ones(9)), 0.5)
    bits, b = ops.random_bits(q, (2,)), ops.bernoulli(q, (1,), 0.5)
    assert g.offset == 8 + 4 + 12 + 4 + 4
    np.testing.assert_array_equal(u.to_host(), ops.uniform(q, (5,), seed=3).to_host())
    np.testing.assert_array_equal(z.to_host(), ops.normal(q, (3,), seed=3, offset=8).to_host())
    np.testing.assert_array_equal(
        mask.to_host(), ops.dropout(Tensor.from_host(q, np.ones(9)), 0.5, 3, 12)[1].to_host())
    np.testing.assert_array_equal(bits.to_host(), ops.random_bits(q, (2,), 3, 24).to_host())
    np.testing.assert_array_equal(b.to_host(), ops.bernoulli(q, (1,), seed=3, offset=28)
                                  .to_host())
    with pytest.raises(ValueError, match="bernoulli: p must be"):
        ops.bernoulli(q, (4,), 1.5)
    with pytest.raises(ValueError, match="uniform: offset=4 needs a seed"):
        ops.uniform(q, (4,), offset=4)
    assert g.offset == 32
    ops.manual_seed(3)
    np.testing.assert_array_equal(ops.uniform(q, (5,)).to_host(), u.to_host())
    with pytest.raises(ValueError, match=r"manual_seed: seed must be in \[0, 2\*\*64\)"):
        ops.manual_seed(-1)
    with pytest.raises(TypeError, match="manual_seed: seed must be an int"):
        ops.manual_seed(1.5)  # type: ignore[arg-type]


class _Streams:
    """A recorder that only wants to know of random draws."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, int, int, bool]] = []

    def random_stream(self, stream: Any, host: bool) -> None:
        self.seen.append((stream, stream.seed, stream.offset, host))


def test_generator_tells_the_recorder_before_each_draw() -> None:
    """A graph capture learns each draw and reseed, with the state before it (NOTE [ Random
    streams under a recorder ]); a recorder without the hook (a profiler) changes nothing."""
    g = ops.Generator(7, offset=3)
    with recording(_Streams()) as rec:
        assert g.take(5) == 3
        g.manual_seed(9)
        assert g.take(1) == 0
        g.numpy_generator()
    assert rec.seen == [(g, 7, 3, False), (g, 7, 11, False), (g, 9, 0, False), (g, 9, 4, True),
                        (g, 9, 4, False)]  # numpy_generator: a host draw, then its take
    with recording(object()):
        assert g.take(2) == 8
    assert g.offset == 12


def test_default_generator_is_thread_safe() -> None:
    """Threads drawing at once get disjoint words: the offsets they took never overlap."""
    ops.manual_seed(0)
    taken: list[int] = []

    def draw() -> None:
        for _ in range(200):
            taken.append(ops.default_generator.take(5))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == list(range(0, 8 * 800, 8))


def test_empty(dev: DeviceHandle) -> None:
    assert ops.uniform(dev.queue, (0, 3), seed=1).shape == (0, 3)
    y, mask = ops.dropout(Tensor.from_host(dev.queue, np.zeros((0,))), 0.5, 1)
    assert y.shape == mask.shape == (0,)


ERRORS: list[tuple[str, Any, type[Exception], str]] = [
    ("p_range", lambda q: ops.bernoulli(q, (2,), 1.5, seed=0), ValueError,
     r"bernoulli: p must be in \[0, 1\]"),
    ("dropout_p", lambda q: ops.dropout(Tensor.from_host(q, np.ones(2)), -0.1, 0), ValueError,
     "dropout: p must be"),
    ("dropout_int", lambda q: ops.dropout(Tensor.from_host(q, np.ones(2, np.int32)), 0.1, 0),
     TypeError, "dropout: needs a floating-point"),
    ("seed_negative", lambda q: ops.uniform(q, (2,), seed=-1), ValueError, "uniform: seed"),
    ("seed_type", lambda q: ops.normal(q, (2,), seed=1.5),  # type: ignore[arg-type]
     TypeError, "normal: seed must be"),
    ("offset_type", lambda q: ops.random_bits(q, (2,), 0, "3"),  # type: ignore[arg-type]
     TypeError, "offset must be"),
    ("uniform_int", lambda q: ops.uniform(q, (2,), seed=0, dtype="int32"), TypeError,
     "uniform: dtype must be a float"),
]


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c[0])
def test_errors(dev: DeviceHandle, case: Any) -> None:
    _, call, exc, pattern = case
    with pytest.raises(exc, match=pattern):
        call(dev.queue)


def test_doctests() -> None:
    assert doctest.testmod(_random).failed == 0
