"""Kernel codegen: ``KernelSpec``, the macro preamble, the work-group tuner, elementwise builders.

``KernelSpec`` takes either a whole ``src`` or ``params`` + ``body`` (+ ``preamble``), and
``build(queue_or_context)`` returns a :class:`BuiltKernel` whose ``run(queue, global, local,
*args)`` accepts Tensors and Python scalars, checked against the parameters the source declares
(:mod:`._signature`, :mod:`._arguments`); :mod:`._local_size` decides local sizes and tunes them.

Examples:
    >>> spec = KernelSpec(name="vec_add", params=["__global const float* a",
    ...                   "__global float* c"], body="c[get_global_id(0)] = a[0];")
    >>> "__kernel void vec_add(__global const float* a, __global float* c)" in spec.to_source()
    True
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._cl import cl
from ..dtypes import canonical_dtype
from ..recording import state as recording_state
from ..tensor import Tensor
from ._arguments import Converter, converters, unparsed_converter
from ._local_size import autotune, kernel_local_limits, pick_local, size_tuple
from ._signature import KernelParam, parse_signature, type_aliases, work_group_features
from .cache import ContextCache, KernelBuildError, get_kernel
from .header import EXPRESSION_MACROS, PRIMITIVE_PREAMBLE, pragmas_for

__all__ = [
    "EXPRESSION_MACROS",
    "PRIMITIVE_PREAMBLE",
    "BuiltKernel",
    "KernelSpec",
    "PrimitiveBuilder",
    "WorkGroupTuner",
    "buffer_token",
    "build_elementwise_kernel",
    "count_launches",
    "forget_arguments",
    "launch",
    "launch_count",
    "set_scalar_argument",
]

# -- launches -------------------------------------------------------------------------------

_launches = [0]
_launch_lock = threading.Lock()


def launch_count() -> int:
    """Kernels launched through :func:`launch` in this process so far."""
    return _launches[0]


@contextlib.contextmanager
def count_launches() -> Iterator[list[int]]:
    """Count kernel launches inside the block; the yielded list holds the count at exit.

    Examples:
        >>> with count_launches() as n:
        ...     pass
        >>> n[0]
        0
    """
    start = _launches[0]
    box = [0]
    try:
        yield box
    finally:
        box[0] = _launches[0] - start


def _name(kernel: Any) -> str:
    """The kernel's function name, for error messages (a driver query: never per launch)."""
    return str(getattr(kernel, "function_name", "kernel"))


def _kernel_arg(arg: Any, kernel: Any) -> Any:
    if isinstance(arg, Tensor):
        if arg.array is not None:
            raise TypeError(f"{_name(kernel)}: Tensor argument is on the NumPy backend, "
                            "not an OpenCL one")
        if arg.offset:
            raise ValueError(f"{_name(kernel)}: Tensor argument has element offset {arg.offset}; "
                             "pass the offset as a kernel argument instead")
        arg.wait()
        return arg.buffer
    if isinstance(arg, np.generic):
        return arg  # NumPy scalars keep their width (np.float64 is also a float)
    if isinstance(arg, bool):
        return np.int32(arg)
    if isinstance(arg, int):
        return np.int32(arg)
    if isinstance(arg, float):
        return np.float32(arg)
    return arg


def _type_scalars(kernel: Any, values: Sequence[Any]) -> None:
    """Tell PyOpenCL the scalar argument types of ``kernel``, from its first launch.

    # NOTE [ Typed kernel arguments ]
    # Without declared scalar types PyOpenCL's ``set_args`` inspects every argument on every
    # call: measured 85 us for a 12-argument kernel on this project's 2-core VM, against
    # 0.9 us once ``set_scalar_arg_dtypes`` has generated a typed invoker. That was most of an
    # op's dispatch time (a small elementwise add cost 150 us per call on the H100's host).
    # A kernel's C signature is fixed, and every caller passes NumPy scalars of the parameter's
    # width (``_kernel_arg`` converts Python numbers), so the first launch's types are the
    # kernel's; buffers, NULL (``None``) and local memory are untyped (``None``).
    """
    dtypes = [v.dtype if isinstance(v, (np.generic, np.ndarray)) else None for v in values]
    _declare(kernel, dtypes)


def _declare(kernel: Any, dtypes: Sequence[Any]) -> None:
    """``set_scalar_arg_dtypes(dtypes)``, and remember each scalar's NumPy type for
    :func:`_set_changed`; a stand-in kernel object (no such method) stays untyped."""
    try:
        kernel.set_scalar_arg_dtypes(dtypes)
        kernel._netcl_types = tuple(None if d is None else np.dtype(d).type for d in dtypes)
        kernel._netcl_typed = True
        kernel._netcl_args = None
    except (AttributeError, TypeError):  # a stand-in kernel object: keep the untyped path
        pass


def launch(
    queue: Any,
    kernel: Any,
    global_size: Sequence[int],
    local_size: Sequence[int] | None,
    *args: Any,
) -> Any:
    """Set ``args`` on ``kernel`` and enqueue it; Tensors become their buffers.

    Every netcl kernel launch goes through here, which is what :func:`launch_count` counts.
    """
    passing = _PASSING if len(_PASSING) > _PLAIN else _with_buffer()
    return launch_values(queue, kernel, global_size, local_size,
                         [a if type(a) in passing else _kernel_arg(a, kernel) for a in args])


# the types _kernel_arg returns unchanged (None, NumPy scalars, and once pyopencl is loaded,
# its Buffer), looked up first so a launch's buffers and scalars skip its isinstance chain
_PASSING: set[type] = {type(None), np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                       np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64}
_PLAIN = len(_PASSING)


def _with_buffer() -> set[type]:
    with contextlib.suppress(ImportError):
        _PASSING.add(_buffer_type())
    return _PASSING


def launch_values(
    queue: Any,
    kernel: Any,
    global_size: Sequence[int],
    local_size: Sequence[int] | None,
    values: Sequence[Any],
) -> Any:
    """:func:`launch` for arguments already in kernel form: buffers, ``None``, NumPy scalars
    of the parameters' widths (0-d arrays for doubles). The hot path of callers that keep
    an op's argument list between calls; counted like :func:`launch`.
    """
    if getattr(kernel, "_netcl_typed", False):
        _set_changed(kernel, values)
    else:
        _type_scalars(kernel, values)
        kernel.set_args(*values)
    return _enqueue(queue, kernel, global_size, local_size, values)


# NOTE [ Arguments set once ]
# OpenCL keeps a kernel's arguments between launches, and a repeated small op launches the
# same kernel object with the same arguments but a buffer or two (its output, leased from the
# pool, often the very buffer of two calls ago): setting all of them again costs about 1 us an
# argument on PoCL (a 13-argument elementwise kernel: most of a small add's host time there).
# So a typed kernel remembers what it was last launched with (``_netcl_args``), and a launch
# sets only the arguments that changed, each with ``set_arg``: buffers, and NumPy scalars of
# exactly the declared type (``set_arg`` passes a scalar's own bytes; an integer or nonzero
# float equal to the last one is no change). Past a few changes one ``set_args`` is cheaper,
# and anything else that changed (a scalar of another width, a NULL, which some PyOpenCL
# builds refuse in ``set_arg``) sets them all through the typed ``set_args``, which packs
# scalars to the declared widths. Every netcl path that sets a kernel's arguments goes
# through here or forgets the record (``BuiltKernel.run`` comes here too, and forgets it after
# local-size autotuning, which sets scratch buffers); a graph replay sets its own clones'
# arguments.
# The record does not hold a buffer, only its *token* (:func:`buffer_token`, an object made
# once per buffer and kept on it): a record holding the buffers kept the last buffers of every
# kernel alive, so memory a pool freed (a buffer over its cache limit, ``clear()`` when the
# device ran out) or a tensor outside the pools stayed allocated. A token is compared by
# identity, and the record keeps it alive, so a dead buffer's token is never mistaken for a
# new buffer's (a new buffer gets a new token; an id() or a handle address could be reused).
# Other objects (NULL, NumPy scalars, LocalMemory) are held as they are.


def buffer_token(buffer: Any) -> object:
    """The identity token of a ``pyopencl.Buffer`` (see NOTE [ Arguments set once ]): the
    same object for the buffer's whole life, made on first use.

    Examples:
        >>> class Stand:  # any object that takes attributes, as pyopencl.Buffer does
        ...     pass
        >>> a, b = Stand(), Stand()
        >>> buffer_token(a) is buffer_token(a), buffer_token(a) is buffer_token(b)
        (True, False)
    """
    token = getattr(buffer, "_netcl_token", None)
    if token is None:
        token = buffer._netcl_token = object()
    return token


def _set_changed(kernel: Any, values: Sequence[Any]) -> None:
    """Set the arguments of typed ``kernel`` that differ from its last launch's."""
    last = kernel._netcl_args
    types = kernel._netcl_types
    if last is not None and len(last) == len(values) == len(types):
        buffer = _buffer_types[0] if _buffer_types else _buffer_type()
        changed = []
        for i, v in enumerate(values):
            w = last[i]
            if v is w:
                continue
            kind = type(v)
            if kind is buffer:
                token = getattr(v, "_netcl_token", None) or buffer_token(v)
                if token is not w:
                    changed.append(i)
                continue
            if kind is not types[i]:
                break
            if kind is type(w) and v == w and (kind in _EXACT or v != 0):
                continue  # an equal integer or nonzero float: the same bytes
            changed.append(i)
        else:
            if len(changed) <= _MAX_SINGLE:
                for i in changed:
                    v = values[i]
                    if type(v) is buffer:
                        kernel.set_arg(i, v)
                        last[i] = buffer_token(v)
                    else:
                        set_scalar_argument(kernel, i, v)
                        last[i] = v
                return
    kernel.set_args(*values)
    kernel._netcl_args = _record(values)


def _record(values: Sequence[Any]) -> list[Any]:
    """The record of a launch with ``values``: buffers by their tokens."""
    buffer = _buffer_types[0] if _buffer_types else _buffer_type()
    return [buffer_token(v) if type(v) is buffer else v for v in values]


def set_scalar_argument(kernel: Any, index: int, value: Any) -> None:
    """Set scalar argument ``index`` of ``kernel`` to ``value``, a NumPy scalar of exactly the
    declared type: its own bytes, through PyOpenCL's ``_set_arg_buf`` where it has one.

    Examples:
        >>> class Stand:  # a kernel object without _set_arg_buf gets set_arg
        ...     def set_arg(self, index, value):
        ...         print(index, repr(value))
        >>> set_scalar_argument(Stand(), 3, np.int32(7))
        3 np.int32(7)

    # NOTE [ Setting one scalar ]
    # PyOpenCL's public ``Kernel.set_arg`` of a NumPy scalar costs 17 us on the 2-core VM
    # (PyOpenCL 2026.1: it tries the value as other argument kinds first), against 0.16 us for
    # ``_set_arg_buf``, which sets the scalar's bytes, and 3.5 us for a whole typed
    # ``set_args``; the eager MLP step of bench_dispatch set about one scalar per launch. The
    # value has the declared type exactly (``_set_changed`` checks), so its bytes are the
    # argument's; a PyOpenCL without ``_set_arg_buf`` gets ``set_arg``.
    """
    setter = getattr(kernel, "_set_arg_buf", None)
    if setter is None:
        kernel.set_arg(index, value)
    else:
        setter(index, value)


# == of two scalars of one of these types means equal bytes; of floats only when nonzero
# (-0.0 == 0.0), and NaN is never equal
_EXACT = frozenset({np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                    np.uint64})
_MAX_SINGLE = 4  # more changes than this: one set_args call is cheaper


def forget_arguments(kernel: Any) -> None:
    """Make the next launch of ``kernel`` set every argument (see NOTE [ Arguments set once ]):
    for code that sets its arguments by other means."""
    with contextlib.suppress(AttributeError):
        kernel._netcl_args = None


_buffer_types: list[Any] = []


def _buffer_type() -> Any:
    """``pyopencl.Buffer``, imported on first use (``netcl.core`` imports without pyopencl)."""
    if not _buffer_types:
        _buffer_types.append(cl().Buffer)
    return _buffer_types[0]


def _enqueue(
    queue: Any,
    kernel: Any,
    global_size: Sequence[int],
    local_size: Sequence[int] | None,
    values: Sequence[Any],
) -> Any:
    """Enqueue ``kernel`` (its arguments ``values`` set) and count the launch; nothing for an
    empty range. With a recorder active (:mod:`netcl.core.recording`: a graph capture, the
    profiler) the recorder enqueues it, or only records it."""
    with _launch_lock:
        _launches[0] += 1
    recorder = recording_state.recorder
    if recorder is not None:
        return recorder.launch(queue, kernel, global_size, local_size, values)
    if 0 in global_size:
        return None
    return cl().enqueue_nd_range_kernel(
        queue, kernel, tuple(global_size), None if local_size is None else tuple(local_size)
    )


# -- work-group sizes ----------------------------------------------------------------------


@dataclass
class WorkGroupTuner:
    """Local sizes for callers that know no device; rounds global sizes up to a multiple
    (kernels guard the tail).

    1-D launches follow the one 1-D rule (NOTE [ The 1-D launch rule ] in :mod:`.family`):
    the same local size whatever the problem size, ``max_local`` rounded down to a power of
    two. Code that has a device uses :func:`.family.local_size_1d`, which also respects the
    device's limit.

    Examples:
        >>> WorkGroupTuner().launch_1d(1000), WorkGroupTuner().launch_1d(3)
        (((1024,), (256,)), ((256,), (256,)))
        >>> WorkGroupTuner().launch_2d(7, 33)
        ((16, 48), (16, 16))
    """

    max_local: int = 256
    tile_2d: tuple[int, int] = (16, 16)

    def local_size_1d(self, n: int) -> int:
        """``max_local`` rounded down to a power of two, for any ``n`` (a size that shrank for
        small ``n`` made PoCL compile a work-group function per new size)."""
        return 1 << (max(1, self.max_local).bit_length() - 1)

    @staticmethod
    def round_up(n: int, multiple: int) -> int:
        """``n`` rounded up to a multiple of ``multiple``."""
        return int(math.ceil(max(n, 1) / multiple) * multiple)

    def launch_1d(self, n: int) -> tuple[tuple[int], tuple[int]]:
        """``(global, local)`` for ``n`` work items."""
        local = self.local_size_1d(n)
        return (self.round_up(n, local),), (local,)

    def launch_2d(self, rows: int, cols: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """``(global, local)`` covering ``rows x cols`` (dimension 0 is rows)."""
        lr, lc = self.tile_2d
        return (self.round_up(rows, lr), self.round_up(cols, lc)), (lr, lc)


# -- KernelSpec ------------------------------------------------------------------------------


@dataclass
class KernelSpec:
    """One OpenCL kernel: its name and source (whole ``src`` or ``params`` + ``body``).

    Args:
        name: the ``__kernel`` function's name.
        src: complete OpenCL C source (may hold several kernels).
        params: parameter declarations, used with ``body`` when ``src`` is not given.
        body: the kernel's statements.
        preamble: code placed before the kernel (macros, helpers).
        shape_sig: shape signature the op dispatch uses as a cache slot.
        workgroup_size: the local size ``run`` uses when given ``local_size=None``.
        extra_flags: extra build options.
        tune: with ``local_size=None`` and no ``workgroup_size``, time candidate local sizes on
            the first run of each global size (default ``True``, as on the KernelSpec page) —
            but only for a kernel whose result cannot depend on its local size (see below).

    The source compiled is :data:`PRIMITIVE_PREAMBLE` (``NETCL_ADD``, ``NETCL_MUL``,
    ``NETCL_RELU``, ...: every netcl macro is prefixed, so a kernel may define its own ``RELU``
    or ``MAX``), then ``preamble``, then ``src`` (or the kernel made from ``params`` and
    ``body``). ``#line`` directives name the parts, so a build log points into your own text:
    ``src:3:5: error: ...`` is line 3 of ``src`` (likewise ``preamble``, ``params``,
    ``body``). NVIDIA's compiler ignores ``#line``; ``build`` rewrites its ``<kernel>:21:5``
    locations in the same way.

    ``build(queue_or_context)`` compiles once per context and returns a :class:`BuiltKernel`;
    ``run(queue, global_size, local_size, *args)`` launches it (``spec.run(...)`` builds and
    runs in one call). The kernel's parameter list is read from the source at build time, and
    each argument is checked against it:

    - a Python or NumPy number for a scalar parameter becomes the declared type (``2`` for
      ``const float k`` is ``2.0f``); a float for an integer parameter, or a value outside the
      type's range, raises;
    - a Tensor for a pointer parameter must have the declared element type (a float64 Tensor
      for ``__global float*`` raises ``TypeError``); NumPy arrays are refused (pass
      ``Tensor.from_host(queue, array)``); ``__local`` pointers take ``pyopencl.LocalMemory``;
    - a type given by a ``typedef`` or ``#define`` to a plain type (``#define T float``, also
      ``-D T=float`` in ``extra_flags``) is resolved; one netcl cannot resolve (a struct, a
      vector, a macro defined two ways) is not checked, and a Python number for it raises
      (pass a NumPy scalar of its width).

    A bad call raises before anything is set on the kernel, so later calls are unaffected.

    With ``local_size=None`` the local size is, in order: the kernel's
    ``__attribute__((reqd_work_group_size(X, Y, Z)))``; ``workgroup_size``; for a kernel whose
    source (all of it, if it holds several kernels) uses work-group features (``__local``
    memory, ``barrier``, ``get_local_id``, ``get_group_id``, ...) nothing else: that is a
    ``ValueError`` rather than a guess, since such a kernel (a tiled matmul) computes wrong
    results with a local size it was not written for.
    A kernel without those features gets the autotuned size (``tune=True``) or 64 where that
    divides a 1-D global size, else the driver's choice; every one of those gives it the same
    result.

    Examples:
        >>> spec = KernelSpec("scale", src="__kernel void scale(__global float* x, float k)\\n"
        ...                   "{ x[get_global_id(0)] *= k; }")
        >>> print(spec.to_source()[spec.to_source().index("#line"):])
        #line 1 "src"
        __kernel void scale(__global float* x, float k)
        { x[get_global_id(0)] *= k; }
    """

    name: str
    src: str | None = None
    params: Sequence[str] = ()
    body: str = ""
    preamble: str = ""
    shape_sig: tuple[Any, ...] = ()
    workgroup_size: int | tuple[int, ...] | None = None
    extra_flags: tuple[str, ...] = ()
    tune: bool = True
    _built: ContextCache = field(default_factory=lambda: ContextCache("KernelSpec"), repr=False,
                                 compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"KernelSpec: name must be a C identifier, got {self.name!r}")
        if self.src is None and not self.body:
            raise ValueError(f"KernelSpec {self.name!r}: give either src or params + body")

    def to_source(self) -> str:
        """The complete OpenCL C source: the netcl preamble, then the spec's parts, each after a
        ``#line 1 "<part>"`` so build logs count lines in the text you wrote."""
        parts = [PRIMITIVE_PREAMBLE]
        if self.preamble and self.preamble != PRIMITIVE_PREAMBLE:
            parts.append(f'#line 1 "preamble"\n{self.preamble}')
        if self.src is not None:
            parts.append(f'#line 1 "src"\n{self.src}')
        else:
            params = ", ".join(self.params)
            parts.append(f'#line 1 "params"\n__kernel void {self.name}({params}) {{\n'
                         f'#line 1 "body"\n{self.body}\n}}\n')
        return "\n".join(parts)

    def device_source(self, extensions: str) -> str:
        """:meth:`to_source` with the fp16/fp64 pragmas for a device with ``extensions``.

        Examples:
            >>> spec = KernelSpec("k", params=["__global double* x"], body="x[0] = 1.0;")
            >>> spec.device_source("cl_khr_fp64").splitlines()[0]
            '#pragma OPENCL EXTENSION cl_khr_fp64 : enable'
        """
        source = self.to_source()
        return pragmas_for(extensions, source) + source

    def build(self, queue_or_context: Any) -> BuiltKernel:
        """Compile for the context of ``queue_or_context`` (once; cached in the spec and on disk)
        and read the kernel's parameters and work-group use from the source.

        Raises:
            KernelBuildError: compilation failed; the error carries the build log.
        """
        context = getattr(queue_or_context, "context", queue_or_context)
        if context is None:
            raise TypeError(f"KernelSpec.build({self.name!r}): needs an OpenCL queue or context, "
                            "got the NumPy backend's queue")
        table = self._built.of(context)
        built = table.get(None)
        if built is None:
            device = context.devices[0]
            source = self.device_source(str(device.extensions))
            try:
                kernel = get_kernel(context, source, self.name, " ".join(self.extra_flags))
            except KernelBuildError as err:
                log = _user_lines(source, err.log)
                if log == err.log:
                    raise
                raise KernelBuildError(err.name, err.device, err.options, log,
                                       err.source_path) from err
            params = parse_signature(source, self.name, type_aliases(source, self.extra_flags))
            required, largest = kernel_local_limits(kernel, device)
            built = table[None] = BuiltKernel(
                self, kernel, _weak(context), source, params=params, required_local=required,
                max_local=largest, work_group_features=work_group_features(source),
            )
        return built

    def run(
        self,
        queue: Any,
        global_size: int | Sequence[int],
        local_size: int | Sequence[int] | None,
        *args: Any,
    ) -> Any:
        """``self.build(queue).run(queue, global_size, local_size, *args)``."""
        return self.build(queue).run(queue, global_size, local_size, *args)


def _weak(context: Any) -> Any:
    """A weak proxy of ``context`` (``context`` itself where it takes no weak references)."""
    try:
        return weakref.proxy(context)
    except TypeError:
        return context


_PART = re.compile(r'^#line 1 "(\w+)"$', re.M)
# a location in the whole program, from a compiler that ignores #line: NVIDIA's "<kernel>:21:10"
_WHOLE_PROGRAM_LINE = re.compile(r"(?:<kernel>|<source>):(\d+)(?=:\d+)")


def _user_lines(source: str, log: str) -> str:
    """``log`` with each whole-program line number (``<kernel>:21:10``, from a compiler that
    ignores ``#line``, such as NVIDIA's) rewritten as ``part:line`` (``src:2:10``), the form
    that compilers honouring the ``#line`` directives of :meth:`KernelSpec.to_source` print.

    Examples:
        >>> source = '#define A 1\\n#line 1 "src"\\n__kernel void k() {\\n  bad;\\n}\\n'
        >>> _user_lines(source, "<kernel>:4:3: error: use of undeclared identifier 'bad'")
        "src:2:3: error: use of undeclared identifier 'bad'"
    """
    # the line after a directive on line d (1-based) is line 1 of its part
    starts = [(source.count("\n", 0, m.start()) + 2, m.group(1)) for m in _PART.finditer(source)]

    def part_line(match: re.Match[str]) -> str:
        line = int(match.group(1))
        before = [(first, name) for first, name in starts if first <= line]
        if not before:
            return match.group(0)  # inside netcl's own preamble
        first, name = before[-1]
        return f"{name}:{line - first + 1}"

    return _WHOLE_PROGRAM_LINE.sub(part_line, log)


@dataclass
class BuiltKernel:
    """A compiled :class:`KernelSpec`: ``run(queue, global, local, *args)`` launches it.

    ``context`` is a weak proxy of the context it was built for (the spec's builds are a
    :class:`~netcl.core.kernels.cache.ContextCache`, dropped with the context).
    ``params`` is the parameter list read from the source (``None`` when no ``__kernel void
    <name>(`` was found in it), ``required_local`` the kernel's ``reqd_work_group_size``,
    ``max_local`` its largest work-group on the device, ``work_group_features`` the work-group
    built-ins its source uses, and ``tuned`` the autotuned local size per global size.
    """

    spec: KernelSpec
    kernel: Any
    context: Any
    source: str
    tuned: dict[tuple[int, ...], tuple[int, ...] | None] = field(default_factory=dict)
    params: tuple[KernelParam, ...] | None = None
    required_local: tuple[int, ...] | None = None
    max_local: int | None = None
    work_group_features: tuple[str, ...] = ()
    _convert: list[Converter] | None = field(default=None, init=False, repr=False,
                                             compare=False)

    def __post_init__(self) -> None:
        self._convert = converters(self.spec.name, self.params)
        if self.params is not None:
            _declare_scalars(self.kernel, self.params)

    def run(
        self,
        queue: Any,
        global_size: int | Sequence[int],
        local_size: int | Sequence[int] | None,
        *args: Any,
    ) -> Any:
        """Launch with ``args`` (Tensors, pyopencl buffers, Python and NumPy numbers), checked
        against the kernel's parameters; see :class:`KernelSpec` for the conversions and for
        how ``local_size=None`` is resolved.

        Raises:
            TypeError: wrong number of arguments; an argument of the wrong kind or type.
            ValueError: a number out of its parameter's range; a local size that does not fit
                the kernel, or that cannot be known (a kernel using ``__local`` memory or
                other work-group features, with no size given).
        """
        name = self.spec.name
        gsize = size_tuple(name, "global_size", global_size, 0)
        given = None if local_size is None else size_tuple(name, "local_size", local_size, 1)
        values = self._arguments(args)
        pick = pick_local(name, gsize, given, self.required_local, self.spec.workgroup_size,
                          self.work_group_features, self.spec.tune)
        local: tuple[int, ...] | None
        if pick == "tune":
            if gsize not in self.tuned:
                largest = self.max_local or int(queue.device.max_work_group_size)
                self.tuned[gsize] = (
                    None if 0 in gsize else autotune(queue, self.kernel, gsize, values, largest)
                )
                forget_arguments(self.kernel)  # the tuning launched it on scratch buffers
            local = self.tuned[gsize]
        else:
            local = pick if isinstance(pick, tuple) else None
        if getattr(self.kernel, "_netcl_typed", False):  # NOTE [ Arguments set once ]
            _set_changed(self.kernel, values)
        else:
            self.kernel.set_args(*values)
        return _enqueue(queue, self.kernel, gsize, local, values)

    def _arguments(self, args: Sequence[Any]) -> list[Any]:
        name = self.spec.name
        if self._convert is None:  # no parameter list: Tensors and NumPy values only
            return [unparsed_converter(name, i)(a) for i, a in enumerate(args)]
        if self.params is not None and len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise TypeError(f"kernel {name!r} takes {len(self.params)} arguments ({names}), "
                            f"got {len(args)}")
        return [convert(a) for convert, a in zip(self._convert, args)]


def _declare_scalars(kernel: Any, params: Sequence[KernelParam]) -> None:
    """Give PyOpenCL the declared scalar types (see NOTE [ Typed kernel arguments ]): read from
    the source, never from a first call, so no call's arguments can leave the kernel typed
    wrongly for the calls after it."""
    _declare(kernel, [p.dtype if p.kind == "scalar" else None for p in params])


# -- elementwise builders -------------------------------------------------------------------


@dataclass
class PrimitiveBuilder:
    """Builds elementwise :class:`KernelSpec` objects from a C expression over ``v0, v1, ...``.

    float16 is stored as ``half`` and loaded/stored with ``vload_half``/``vstore_half``, so the
    arithmetic runs in float and works on devices without ``cl_khr_fp16``. The expression may
    use the short macro names of :data:`EXPRESSION_MACROS` (``ADD``, ``MUL``, ``RELU``, ...),
    which the generated spec's ``preamble`` defines.

    Examples:
        >>> b = PrimitiveBuilder(dtype="float")
        >>> spec = b.elementwise_spec(name="mul_add", arity=2, expression="MUL(ADD(v0, v1), 2.0f)")
        >>> spec.params[-1]
        'const int n'
    """

    dtype: str = "float"
    tuner: WorkGroupTuner = field(default_factory=WorkGroupTuner)

    def elementwise_spec(self, name: str, arity: int, expression: str) -> KernelSpec:
        """``out[i] = expression(v0[i], ..., v{arity-1}[i])`` for ``i < n``."""
        if arity < 1:
            raise ValueError(f"PrimitiveBuilder.elementwise_spec: arity must be >= 1, got {arity}")
        dtype = canonical_dtype(self.dtype, "PrimitiveBuilder")
        ctype = {"float32": "float", "float16": "half", "float64": "double"}.get(dtype)
        if ctype is None:
            raise ValueError(
                f"PrimitiveBuilder.elementwise_spec: dtype must be a float type, got {self.dtype!r}"
            )
        params = [f"__global const {ctype}* in{i}" for i in range(arity)]
        params += [f"__global {ctype}* out", "const int n"]
        if ctype == "half":
            loads = "".join(f"    float v{i} = vload_half(gid, in{i});\n" for i in range(arity))
            store = f"    vstore_half(({expression}), gid, out);\n"
        else:
            loads = "".join(f"    {ctype} v{i} = in{i}[gid];\n" for i in range(arity))
            store = f"    out[gid] = ({expression});\n"
        body = f"  int gid = get_global_id(0);\n  if (gid < n) {{\n{loads}{store}  }}"
        flags: tuple[str, ...] = ("-cl-fast-relaxed-math",) if ctype == "half" else ()
        return KernelSpec(name=name, params=params, body=body, preamble=EXPRESSION_MACROS,
                          extra_flags=flags, tune=False)


def build_elementwise_kernel(
    context: Any, name: str, arity: int, expression: str, dtype: str = "float"
) -> tuple[KernelSpec, BuiltKernel]:
    """Make and build an elementwise spec; half dtypes get the fp16 pragma where supported."""
    spec = PrimitiveBuilder(dtype=dtype).elementwise_spec(name, arity, expression)
    return spec, spec.build(context)
