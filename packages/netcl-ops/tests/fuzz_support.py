"""What the ops fuzz suite (``test_fuzz*.py``) shares: Hypothesis settings and example counts,
the op tables of the sibling test modules, input strategies (odd, empty and size-1 shapes;
dtypes the device has; views with an element offset) and the clean-error oracle.

Every fuzzed call either matches the float64 NumPy reference within
``netcl.core.testing.TOLERANCES`` (through :func:`netcl.ops.testing.check_op`) or raises a
clean typed error (:data:`CLEAN_ERRORS`) whose message starts with the op's name.

Examples run per test: each test's CI count below, derandomized (the same examples on every
run), or ``NETCL_FUZZ_EXAMPLES`` per test and device, randomized (Hypothesis prints the seed
and a ``@reproduce_failure`` blob for a failure; ``--hypothesis-seed`` pins one). The counts
actually run are written at the end of each module and, with ``NETCL_FUZZ_REPORT=<file>``,
appended to that file as JSON lines. An example running past ``NETCL_FUZZ_TIMEOUT`` seconds
(default 600) ends the run with every thread's traceback: a hang fails, it does not block.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import math
import os
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import device_id, supports_dtype
from netcl.ops.testing import offset_view

EXAMPLES_ENV = "NETCL_FUZZ_EXAMPLES"
REPORT_ENV = "NETCL_FUZZ_REPORT"
CLEAN_ERRORS: tuple[type[Exception], ...] = (TypeError, ValueError, IndexError, MemoryError)
FLOATS = ("float32", "float16", "float64")
INTS = ("int32", "int64", "uint8")
# A hung kernel or host loop ends the run with every thread's traceback (on the terminal, past
# pytest's capture) instead of blocking CI: no single example, a cold PoCL build included,
# comes near this. NETCL_FUZZ_TIMEOUT (seconds) overrides it.
TIMEOUT_ENV = "NETCL_FUZZ_TIMEOUT"
EXAMPLE_TIMEOUT_S = 600
# Sides people get wrong: empty, 1, odd, just past a power of two (tiles, vector widths).
SIDES = (0, 1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33)


def _positive_env(name: str) -> int | None:
    """The environment variable ``name`` as a positive integer, ``None`` when unset.

    Raises:
        ValueError: a value that is not a positive integer.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive integer, got {raw!r}")
    return int(raw)


def examples_override() -> int | None:
    """``NETCL_FUZZ_EXAMPLES`` as a count, ``None`` when unset."""
    return _positive_env(EXAMPLES_ENV)


def fuzz_settings(ci_examples: int) -> settings:
    """``ci_examples`` derandomized examples, or ``NETCL_FUZZ_EXAMPLES`` random ones.

    No deadline (a first call builds kernels), no example database (nothing written into the
    work tree); the health checks about slow or filtered generation are off because the
    strategies build tensors on a device on purpose.
    """
    many = examples_override()
    return settings(
        max_examples=many or ci_examples,
        derandomize=many is None,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                               HealthCheck.data_too_large],
    )


# -- example counts ---------------------------------------------------------------------------

RUN: Counter[str] = Counter()


_GUARD: dict[str, Any] = {}  # "file": the terminal's stderr, duplicated past the capture


def ran(test: str, dev: DeviceHandle) -> None:
    """Count one example of ``test`` on ``dev`` and restart the hang guard."""
    RUN[f"{test}[{device_id(dev)}]"] += 1
    if "file" in _GUARD:
        faulthandler.dump_traceback_later(_positive_env(TIMEOUT_ENV) or EXAMPLE_TIMEOUT_S,
                                          exit=True, file=_GUARD["file"])


@pytest.fixture(scope="module", autouse=True)
def report_examples(request: pytest.FixtureRequest) -> Iterator[None]:
    """Around a module: the hang guard's stream, then how many examples its tests ran on each
    device (on the terminal) and per test and device (in ``NETCL_FUZZ_REPORT``'s file)."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if capture is not None:
        with capture.global_and_fixture_disabled():
            _GUARD["file"] = os.fdopen(os.dup(sys.stderr.fileno()), "w")
    before = Counter(RUN)
    yield
    faulthandler.cancel_dump_traceback_later()
    if "file" in _GUARD:
        _GUARD.pop("file").close()
    counts = {k: n - before[k] for k, n in RUN.items() if n > before[k]}
    module = Path(str(request.node.path)).name
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and capture is not None and counts:
        devices: Counter[str] = Counter()
        for key, n in counts.items():
            devices[key[key.index("[") + 1:-1]] += n
        with capture.global_and_fixture_disabled():
            reporter.write_line(
                f"\n{module}: {sum(counts.values())} fuzz examples in {len(counts)} tests ("
                + ", ".join(f"{d} {n}" for d, n in sorted(devices.items()))
                + f"; {REPORT_ENV}=<file> records each test's count)")
    target = os.environ.get(REPORT_ENV)
    if target and counts:
        with open(target, "a", encoding="utf-8") as f:
            f.write(json.dumps({"module": module, "examples": counts,
                                "per_test_setting": examples_override()}) + "\n")


# -- the op tables of the other test modules --------------------------------------------------


def sibling(name: str) -> ModuleType:
    """The test module ``name`` of this folder (its OpInfo tables and NumPy references: one
    definition each), imported under a private name; test modules are not importable by name
    under ``--import-mode=importlib``."""
    key = f"netcl_ops_fuzz_tables.{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"fuzz: cannot load the test module {name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


# -- strategies -------------------------------------------------------------------------------


def shapes(min_dims: int = 0, max_dims: int = 4, min_side: int = 0,
           max_size: int = 4096) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes of ``min_dims..max_dims`` sides from :data:`SIDES` with at most ``max_size``
    elements."""
    side = st.sampled_from([s for s in SIDES if s >= min_side])
    return st.lists(side, min_size=min_dims, max_size=max_dims).map(tuple).filter(
        lambda s: math.prod(s) <= max_size)


@st.composite
def broadcast_shapes(draw: st.DrawFn, n: int, max_dims: int = 4
                     ) -> tuple[list[tuple[int, ...]], bool]:
    """``n`` shapes that broadcast together (trailing dims of one base shape, some set to 1),
    or now and then a side changed so that they may not; and whether they do."""
    base = draw(shapes(max_dims=max_dims, max_size=2048))
    out = []
    for _ in range(n):
        nd = draw(st.integers(0, len(base)))
        out.append(tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in base[len(base) - nd:]))
    if draw(st.integers(0, 7)) == 0 and any(out):
        k = draw(st.sampled_from([i for i, s in enumerate(out) if s]))
        i = draw(st.integers(0, len(out[k]) - 1))
        out[k] = (*out[k][:i], out[k][i] + 2, *out[k][i + 1:])
    try:
        np.broadcast_shapes(*out)
    except ValueError:
        return out, False
    return out, True


def dtypes(dev: DeviceHandle, names: Sequence[str] = FLOATS) -> st.SearchStrategy[str]:
    """The dtypes of ``names`` that ``dev`` has (float64 needs cl_khr_fp64)."""
    return st.sampled_from([d for d in names if supports_dtype(dev, d)])


def is_pocl(dev: DeviceHandle) -> bool:
    """Whether ``dev`` is a PoCL device (for the known bugs only it shows)."""
    return dev.backend == "cl" and "Portable Computing Language" in dev.platform_name


OFFSETS = st.sampled_from([0, 0, 1, 3, 5, 17])


@st.composite
def values(draw: st.DrawFn, shape: Sequence[int], dtype: str, lo: float = -3.0,
           hi: float = 3.0, special: bool = False) -> np.ndarray[Any, Any]:
    """Seeded values in ``[lo, hi]`` (integers for integer dtypes, clipped to the dtype), with
    a drawn chance of ties and, where ``special``, of 0, +-inf and NaN."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = tuple(shape)
    if dtype in INTS:
        info = np.iinfo(dtype)
        b = min(max(math.floor(hi), info.min), info.max)
        a = min(max(math.ceil(lo), info.min), b)
        return rng.integers(a, b, size=shape, endpoint=True).astype(dtype)
    x = rng.uniform(lo, hi, size=shape)
    if draw(st.booleans()):  # ties: a few distinct values
        x = np.asarray(np.round(x * 2) / 2)
    if special and x.size and draw(st.booleans()):
        picks = rng.integers(0, x.size, size=max(1, x.size // 4))
        x.reshape(-1)[picks] = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan], size=picks.size)
    return x


def numbers(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Python floats in ``[lo, hi]`` rounded to float16: a scalar or parameter then means the
    same in every dtype (the reference sees no digit the device rounded away)."""
    return st.floats(lo, hi).map(lambda v: float(np.float16(v)))


def on_device(dev: DeviceHandle, x: np.ndarray[Any, Any], dtype: str, offset: int) -> Tensor:
    """``x`` as a ``dtype`` tensor on ``dev``: a plain tensor, or for ``offset > 0`` a view that
    many elements into a bigger buffer (:func:`netcl.ops.testing.offset_view`)."""
    if offset:
        return offset_view(dev, x, offset, dtype)
    return Tensor.from_host(dev.queue, x, dtype=dtype)


def shifted(dev: DeviceHandle, op: Callable[..., Any], offsets: Sequence[int]
            ) -> Callable[..., Any]:
    """``op`` called with its k-th Tensor argument moved ``offsets[k]`` elements into a bigger
    buffer, so that :func:`netcl.ops.testing.check_op` runs the op on views."""
    def run(*args: Any, **kwargs: Any) -> Any:
        moved = list(args)
        k = 0
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                if k < len(offsets) and offsets[k]:
                    moved[i] = offset_view(dev, a.to_host(), offsets[k], a.dtype)
                k += 1
        return op(*moved, **kwargs)
    return run


# -- the oracle -------------------------------------------------------------------------------


def clean_error(op: str, err: BaseException) -> None:
    """Assert that ``err`` is one of :data:`CLEAN_ERRORS` and its message begins with the name
    of the op that ``op`` runs (``gelu`` for the ``gelu_tanh`` row; ``|`` separates names the
    op goes by)."""
    if not isinstance(err, CLEAN_ERRORS):
        raise AssertionError(f"{op}: raised {type(err).__name__}: {err}") from err
    match = re.match(r"([A-Za-z_][\w.]*)", str(err))
    name = match.group(1) if match else ""
    if not any(alt == name or alt.startswith(f"{name}_") or alt.endswith(f"_{name}")
               for alt in op.split("|")):
        raise AssertionError(f"{op}: {type(err).__name__} message does not name the op: "
                             f"{str(err)!r}") from err


@contextmanager
def quiet() -> Iterator[None]:
    """No floating-point warnings from the NumPy references (log of 0, mean of nothing)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def outcome(op: str, run: Callable[[], Any], allowed: tuple[type[Exception], ...] = ()
            ) -> BaseException | None:
    """Run ``run``: the error it raised (one of ``allowed``, naming ``op``), or ``None``.

    ``allowed=()`` marks a valid call, which must pass. An ``AssertionError`` (a value, shape or
    dtype different from the reference) always propagates.
    """
    try:
        run()
    except AssertionError:
        raise
    except Exception as err:  # every other kind is a finding
        if not isinstance(err, allowed):
            raise AssertionError(f"{op}: raised {type(err).__name__} (expected "
                                 f"{[e.__name__ for e in allowed] or 'no error'}): {err}"
                                 ) from err
        clean_error(op, err)
        return err
    return None
