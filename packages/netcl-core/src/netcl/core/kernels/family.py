"""Kernel families: builders that return source, kernel names and launch geometry together,
built once per (context, key) and held only as long as the context lives.

# NOTE [ Per-context caches ]
# A cache keyed on ``id(context)`` is wrong once the context is gone: CPython reuses the id
# for the next object, and a new context could be handed the old one's kernels. Every netcl
# cache of device objects is a :class:`ContextCache` instead: a ``WeakKeyDictionary`` keyed by
# the context itself (PyOpenCL contexts are weak-referenceable and hash by their handle), as
# ``pyopencl.tools.context_dependent_memoize`` does, so an entry goes with its context and a
# context is never kept alive by a cache. No cached value may hold the context itself, or the
# entry would never go: cached programs are re-wrapped from their handle (a
# ``pyopencl.Program`` built from source keeps its ``Context``) and a KernelSpec's build keeps
# a weak proxy. A lookup is one weakref call for the context asked last (one device: always),
# else a ``WeakKeyDictionary`` lookup, about 0.5 us (an ``id`` dict: 0.3 us).
#
# NOTE [ The 1-D launch rule ]
# Every 1-D launch of a netcl kernel uses one local size per device,
# :func:`local_size_1d`: the largest power of two <= min(256, the device's maximum work-group
# size). Not a size that shrinks for small problems (the old ``WorkGroupTuner.local_size_1d``):
# PoCL compiles a work-group function per (kernel, local size) on first use, so a
# size-dependent local size recompiles a kernel for every new small shape (measured on this
# project's 2-core VM: bias_add at n = 3, 7, 17, 33, 65, 129 cost 33-72 ms each on its first
# call with the shrinking rule, 0.1-0.5 ms with the fixed one), while the few idle work items
# of a rounded-up small launch cost nothing measurable. A power of two because
# the work-group reductions (autograd's reduce backward, ops' reductions) halve their strides.

Examples:
    >>> @kernel_family("doc.scale")
    ... def scale(dtype: str) -> KernelSource:
    ...     return KernelSource(
    ...         "__kernel void scale(__global T* x, const int n)"
    ...         " { int i = get_global_id(0); if (i < n) ST(x, i, 2 * LD(x, i)); }\\n",
    ...         ("scale",), dtype)
    >>> scale.source("float32").kernels
    ('scale',)
    >>> "#define CT float" in scale.source("float32").render(None)
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec

from .cache import ContextCache, get_kernel
from .golden import GoldenSource, register_golden
from .header import PRIMITIVE_PREAMBLE, kernel_header
from .primitives import launch

__all__ = [
    "LOCAL_1D",
    "BuiltFamily",
    "ContextCache",
    "Geometry",
    "KernelFamily",
    "KernelSource",
    "families",
    "grid_1d",
    "kernel_family",
    "local_size_1d",
]

P = ParamSpec("P")

LOCAL_1D = 256
"""The 1-D local size on a device allowing work-groups of at least 256 (the usual case)."""


def _local_of(max_work_group_size: int) -> int:
    return 1 << (min(LOCAL_1D, max(max_work_group_size, 1)).bit_length() - 1)


_device_local: dict[Any, int] = {}  # devices live as long as their platform: a plain dict


def local_size_1d(device: Any) -> int:
    """The one 1-D local size of ``device`` (see NOTE [ The 1-D launch rule ]).

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> local_size_1d(NS(max_work_group_size=4096)), local_size_1d(NS(max_work_group_size=96))
        (256, 64)
    """
    try:
        return _device_local[device]
    except KeyError:
        local = _device_local[device] = _local_of(int(device.max_work_group_size))
        return local
    except TypeError:  # an unhashable stand-in
        return _local_of(int(device.max_work_group_size))


def grid_1d(items: int, local: int) -> tuple[tuple[int], tuple[int]]:
    """``(global, local)`` covering ``items`` work items in groups of ``local`` (kernels guard
    the tail).

    Examples:
        >>> grid_1d(1000, 256), grid_1d(0, 256)
        (((1024,), (256,)), ((0,), (256,)))
    """
    return (-(-items // local) * local,), (local,)


@dataclass(frozen=True)
class Geometry:
    """How a family's kernels are launched.

    Args:
        per_item: elements each work item handles (a vectorized kernel's width), for
            :meth:`BuiltFamily.launch` over ``n`` elements.
        local: a fixed 1-D local size (a kernel written for work-groups of that size: one
            group per row or channel); ``None``: the device's :func:`local_size_1d`.

    Either way :meth:`BuiltFamily.grid` covers ``ceil(n / per_item)`` work items (rounded up to
    whole work-groups); a launch of another shape computes its own range.
    """

    per_item: int = 1
    local: int | None = None


ONE_PER_ITEM = Geometry()


@dataclass(frozen=True)
class KernelSource:
    """What a family builder returns for one key: the program, its kernels, how to launch them.

    Args:
        program: the program text after the header.
        kernels: the ``__kernel`` functions it defines.
        dtype: the dtype of the :func:`~netcl.core.kernels.header.kernel_header` put before
            ``program``; ``None``: ``program`` is complete.
        geometry: how its kernels are launched.
        options: build options.
        preamble: the header's preamble (see ``kernel_header``).
        defines: the header's extra defines (see ``kernel_header``).
    """

    program: str
    kernels: tuple[str, ...]
    dtype: str | None = "float32"
    geometry: Geometry = ONE_PER_ITEM
    options: str = ""
    preamble: str = PRIMITIVE_PREAMBLE
    defines: str = ""

    def render(self, target: Any) -> str:
        """The complete source for ``target`` (context, device or extension string)."""
        if self.dtype is None:
            return self.program
        return kernel_header(target, self.dtype, preamble=self.preamble,
                             defines=self.defines) + self.program

    def golden(self, extensions: str) -> GoldenSource:
        """The :class:`~netcl.core.kernels.golden.GoldenSource` rendered for ``extensions``
        (float64 programs need ``cl_khr_fp64``; float16 is storage only and needs nothing)."""
        needs = ("cl_khr_fp64",) if self.dtype == "float64" else ()
        return GoldenSource(self.render(extensions), self.kernels, needs)


@dataclass
class BuiltFamily:
    """A :class:`KernelSource` built for one context: its ``cl.Kernel`` objects by name."""

    source: KernelSource
    kernels: dict[str, Any]

    @property
    def kernel(self) -> Any:
        """The first (often only) kernel."""
        return self.kernels[self.source.kernels[0]]

    def grid(self, queue: Any, n: int) -> tuple[tuple[int], tuple[int]]:
        """``(global, local)`` for ``n`` elements on ``queue``'s device."""
        geometry = self.source.geometry
        local = geometry.local or local_size_1d(queue.device)
        return grid_1d(-(-n // geometry.per_item), local)

    def launch(self, queue: Any, n: int, *args: Any, kernel: str | None = None) -> Any:
        """Launch ``kernel`` (default: the first) over ``n`` elements; nothing for ``n == 0``."""
        if n <= 0:
            return None
        gsize, lsize = self.grid(queue, n)
        k = self.kernel if kernel is None else self.kernels[kernel]
        return launch(queue, k, gsize, lsize, *args)


GoldenCases = Callable[[], Iterable[tuple[str, tuple[Any, ...]]]]
"""A family's golden matrix: ``(file name without .cl, builder arguments)`` pairs."""


_families: dict[str, KernelFamily[Any]] = {}


class KernelFamily(Generic[P]):
    """A builder of :class:`KernelSource` (a pure function of hashable arguments) with a
    per-context cache of what it built; made by :func:`kernel_family`."""

    def __init__(self, name: str, builder: Callable[P, KernelSource]) -> None:
        self.name = name
        self.builder = builder
        self._source: Callable[..., KernelSource] = functools.cache(builder)
        self._built = ContextCache(f"family {name}")
        functools.update_wrapper(self, builder)

    def source(self, *args: P.args, **kwargs: P.kwargs) -> KernelSource:
        """The builder's :class:`KernelSource` for these arguments (memoized, no device)."""
        return self._source(*args, **kwargs)

    def __call__(self, context: Any, *args: P.args, **kwargs: P.kwargs) -> BuiltFamily:
        """The family built for ``context`` and these arguments: once per (context, key)."""
        key: Hashable = (args, tuple(kwargs.items())) if kwargs else args
        table = self._built.of(context)
        built = table.get(key)
        if built is None:
            src = self._source(*args, **kwargs)
            full = src.render(context)
            kernels = {name: get_kernel(context, full, name, src.options)
                       for name in src.kernels}
            built = table[key] = BuiltFamily(src, kernels)
        return built

    def register_golden(self, cases: GoldenCases) -> None:
        """Register the programs this family builds for ``cases`` as the golden programs of
        its package (see :func:`~netcl.core.kernels.golden.register_golden`); for a family
        whose matrix needs modules that import the family's own."""
        package, _, short = self.name.partition(".")
        render: Callable[..., KernelSource] = self.source

        def provider(extensions: str) -> Iterable[tuple[str, GoldenSource]]:
            for file, args in cases():
                yield f"{file}.cl", render(*args).golden(extensions)

        register_golden(package, short or self.name, provider)

    def cache_size(self) -> int:
        """Builds of this family held now, over every live context."""
        return len(self._built)


def kernel_family(
    name: str, golden: GoldenCases | None = None
) -> Callable[[Callable[P, KernelSource]], KernelFamily[P]]:
    """Make a builder of :class:`KernelSource` a :class:`KernelFamily` named ``name``.

    ``family(context, *key)`` returns the :class:`BuiltFamily` (built once per context and
    key, held as long as the context); ``family.source(*key)`` the source alone. ``name`` is
    ``"<package>.<family>"``; with ``golden`` the family registers the programs it builds for
    those cases with :func:`~netcl.core.kernels.golden.register_golden`, so the package's
    golden test renders them (``render_golden("<package>", extensions)``).

    Raises:
        ValueError: a family of that name exists already (defined elsewhere: the same function
            defined again, as by a module run twice, replaces it).
    """

    def wrap(builder: Callable[P, KernelSource]) -> KernelFamily[P]:
        old = _families.get(name)
        if old is not None and _origin(old.builder) != _origin(builder):
            raise ValueError(f"kernel_family: a family named {name!r} exists already")
        family: KernelFamily[P] = KernelFamily(name, builder)
        _families[name] = family
        if golden is not None:
            family.register_golden(golden)
        return family

    return wrap


def _origin(fn: Callable[..., Any]) -> tuple[str, str]:
    return (getattr(fn, "__module__", ""), getattr(fn, "__qualname__", ""))


def families(prefix: str = "") -> Sequence[KernelFamily[Any]]:
    """The registered families whose name starts with ``prefix``, by name."""
    return [f for n, f in sorted(_families.items()) if n.startswith(prefix)]
