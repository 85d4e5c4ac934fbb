"""Build OpenCL programs once: cached in memory per (context, source, options) and on disk.

The memory cache is a :class:`ContextCache`: its entries go with their context (see NOTE
[ Per-context caches ] in :mod:`.family`).

The disk cache keys a program binary by platform, device, driver version, source and options,
so a second process start compiles nothing. Kernel objects are cached too: ``prg.name`` makes a
new ``cl.Kernel`` each time, so hot paths call :func:`get_kernel` instead.

# NOTE [ Corrupt program binaries ]
# A binary handed to clCreateProgramWithBinary is trusted by the driver: PoCL segfaults on one
# cut in half and aborts on one 10 bytes short (pocl_binary_deserialize asserts), and a sound
# binary of another kernel runs as if it were this one. So each entry is written with its key
# and a checksum (netcl.core._paths.write_entry) and verified before the driver sees it; a bad
# entry is deleted with one RuntimeWarning naming the file and the fault, and rebuilt from
# source. pyopencl's own binary cache (pickled, unchecked) is bypassed: cache_dir=False.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._cl import cl
from .._paths import (
    CacheEntryError,
    atomic_write,
    cache_dir,
    discard_entry,
    read_entry,
    write_entry,
)
from ..env import env_flag
from ._signature import parse_signature, read_only, type_aliases

__all__ = [
    "ContextCache",
    "KernelBuildError",
    "build_stats",
    "entry_key",
    "entry_path",
    "get_kernel",
    "get_program",
    "kernel_source",
    "read_only_arguments",
]


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build; carries the log, device, options and saved source."""

    def __init__(
        self, name: str, device: str, options: str, log: str, source_path: Path
    ) -> None:
        self.name = name
        self.device = device
        self.options = options
        self.log = log
        self.source_path = source_path
        super().__init__(
            f"OpenCL build of kernel {name!r} failed on device {device!r} with options "
            f"{options!r}; source saved to {source_path}\n--- build log ---\n{log.strip()}"
        )


class ContextCache:
    """A dict per OpenCL context, dropped with the context (see NOTE [ Per-context caches ] in
    :mod:`netcl.core.kernels.family`): ``cache.of(context)[key]``.

    Iterating gives ``(context, *key)`` for tuple keys (``(context, key)`` otherwise) over
    every live context, the shape the ``id(context)``-keyed dicts it replaces had.

    Examples:
        >>> class Context:
        ...     pass
        >>> cache = ContextCache("doc")
        >>> ctx = Context()
        >>> cache.of(ctx)[("k", 1)] = "v"
        >>> [key[1:] for key in cache], len(cache)
        ([('k', 1)], 1)
        >>> del ctx
        >>> len(cache)
        0
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._weak: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()
        self._strong: dict[int, tuple[Any, dict[Any, Any]]] = {}  # contexts without weakrefs
        self._lock = threading.Lock()
        # the last context asked for (weakly) and its dict: a process on one device pays one
        # weakref call per lookup, not a WeakKeyDictionary lookup (which makes a weakref)
        self._last: tuple[weakref.ref[Any], dict[Any, Any]] | None = None

    def of(self, context: Any) -> dict[Any, Any]:
        """The dict of ``context`` (made empty on first use)."""
        last = self._last
        if last is not None and last[0]() is context:
            return last[1]
        try:
            found = self._weak.get(context)
        except TypeError:  # not weak-referenceable (a stand-in object): held strongly
            entry = self._strong.get(id(context))
            if entry is None or entry[0] is not context:
                entry = self._strong[id(context)] = (context, {})
            return entry[1]
        if found is None:
            with self._lock:
                found = self._weak.get(context)
                if found is None:
                    found = self._weak[context] = {}
        self._last = (weakref.ref(context), found)
        return found

    def clear(self) -> None:
        """Forget every context's entries."""
        with self._lock:
            self._weak.clear()
            self._strong.clear()
            self._last = None

    def _tables(self) -> list[tuple[Any, dict[Any, Any]]]:
        return [*list(self._weak.items()), *self._strong.values()]

    def items(self) -> Iterator[tuple[tuple[Any, ...], Any]]:
        """``((context, *key), value)`` of every entry of every live context (a snapshot)."""
        for context, table in self._tables():
            for key, value in list(table.items()):
                yield ((context, *key) if isinstance(key, tuple) else (context, key)), value

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return (key for key, _ in self.items())

    def __len__(self) -> int:
        """Entries over every live context."""
        return sum(len(table) for _, table in self._tables())


_lock = threading.Lock()
_programs = ContextCache("programs")  # (source, options) -> cl.Program
_kernels = ContextCache("kernels")  # (source, options, name) -> cl.Kernel
_stats = {"compiled": 0, "from_disk": 0, "from_memory": 0}


def build_stats() -> dict[str, int]:
    """How many programs were compiled from source, loaded from disk, found in memory."""
    return dict(_stats)


def _disk_cache_enabled(dev: Any) -> bool:
    """``NETCL_DISK_CACHE`` (default 1); PoCL is skipped unless it is set to 1 explicitly:
    PoCL keeps its own kernel cache, and reading a PoCL program's binaries compiles every
    kernel in it a second time."""
    setting = env_flag("NETCL_DISK_CACHE", None)
    if setting is not None:
        return setting
    return "Portable Computing Language" not in str(dev.platform.name)


def entry_key(dev: Any, source: str, options: str) -> dict[str, str]:
    """What a cached binary of ``source`` was built for; stored in the entry and checked on load.

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> dev = NS(platform=NS(name="PoCL"), name="cpu", driver_version="6.0", version="3.0")
        >>> entry_key(dev, "k", "-O2")["driver_version"]
        '6.0'
    """
    return {
        "store": "program",
        "platform": str(dev.platform.name).strip(),
        "device": str(dev.name).strip(),
        "driver_version": str(dev.driver_version).strip(),
        "device_version": str(dev.version).strip(),
        "options": options,
        "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
    }


def entry_path(key: dict[str, str]) -> Path:
    """The file of the entry for ``key``: ``$NETCL_CACHE_DIR/programs/<sha256 of key>.program``.

    Raises:
        OSError: the cache folder cannot be created.
    """
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return cache_dir("programs") / f"{digest}.program"


def _build_from_source(context: Any, source: str, options: str, name: str) -> Any:
    program = cl().Program(context, source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return program.build(options=options, cache_dir=False)
    except Exception as exc:
        dev = context.devices[0]
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        path = cache_dir("failed") / f"{name}-{digest}.cl"
        atomic_write(path, source.encode())  # processes failing the same build at once
        try:
            log = program.get_build_info(dev, cl().program_build_info.LOG)
        except Exception:
            log = str(exc)
        raise KernelBuildError(name, dev.name.strip(), options, log or str(exc), path) from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:200] + "...") if len(text) > 200 else text or type(exc).__name__


def _load_entry(context: Any, path: Path, key: dict[str, str], options: str) -> Any | None:
    """The program built from the verified entry at ``path``; None (after one warning and
    deleting the file) when it is missing, corrupt, for another key or refused by the driver."""
    try:
        binary = read_entry(path, key)
    except FileNotFoundError:
        return None
    except CacheEntryError as exc:
        discard_entry(path, exc.reason, "rebuilding it from source", stacklevel=4)
        return None
    except OSError:
        return None  # unreadable (permissions): compile, as without a disk cache
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cl().Program(context, [context.devices[0]], [binary]).build(options=options)
    except Exception as exc:  # a driver update that kept its version string
        discard_entry(path, f"the driver refused the binary ({_one_line(exc)})",
                      "rebuilding it from source", stacklevel=4)
        return None


def _entry_of(context: Any, source: str, options: str) -> tuple[Path, dict[str, str]] | None:
    """Where the program's disk entry lives and its key; None when the disk cache is off for
    this context (several devices, ``NETCL_DISK_CACHE``) or its folder cannot be made."""
    devices = context.devices
    if len(devices) != 1 or not _disk_cache_enabled(devices[0]):
        return None
    key = entry_key(devices[0], source, options)
    try:
        return entry_path(key), key
    except OSError:
        return None  # no usable cache folder only costs compile time


def _load_or_build(context: Any, source: str, options: str, name: str) -> Any:
    entry = _entry_of(context, source, options)
    if entry is not None:
        program = _load_entry(context, *entry, options)
        if program is not None:
            _stats["from_disk"] += 1
            return program
    program = _build_from_source(context, source, options, name)
    _stats["compiled"] += 1
    if entry is not None:
        try:
            write_entry(*entry, bytes(program.binaries[0]))
        except OSError:
            pass  # a read-only cache only costs compile time
    return program


def _detached(program: Any) -> Any:
    """``program`` wrapped anew from its handle: a ``pyopencl.Program`` built from source keeps
    its ``Context`` object, which would keep the context's :class:`ContextCache` entry (this
    program) alive for ever; the new wrapper holds the OpenCL handle only."""
    try:
        return cl().Program.from_int_ptr(program.int_ptr)
    except (AttributeError, TypeError):  # a stand-in program object
        return program


def get_program(context: Any, source: str, options: str = "", name: str = "program") -> Any:
    """The built ``cl.Program`` for ``source``; compiled at most once per process and device.

    Raises:
        KernelBuildError: the source does not compile (the message has the build log).
    """
    key = (source, options)
    table = _programs.of(context)
    with _lock:
        program = table.get(key)
        if program is not None:
            _stats["from_memory"] += 1
            return program
        program = table[key] = _detached(_load_or_build(context, source, options, name))
        return program


def get_kernel(context: Any, source: str, name: str, options: str = "") -> Any:
    """The one ``cl.Kernel`` object named ``name`` in ``source`` for ``context``."""
    key = (source, options, name)
    table = _kernels.of(context)
    kernel = table.get(key)
    if kernel is None:
        program = get_program(context, source, options, name)
        with _lock:
            kernel = table.get(key)
            if kernel is None:
                kernel = table[key] = cl().Kernel(program, name)
                # what kernel_source answers (a program loaded from the disk cache is a
                # binary: the driver no longer knows its source)
                with contextlib.suppress(AttributeError, TypeError):
                    kernel._netcl_source = source
    return kernel


def kernel_source(kernel: Any) -> str | None:
    """The OpenCL C source ``kernel`` was made from by :func:`get_kernel`; ``None`` for a
    kernel made otherwise.

    Examples:
        >>> kernel_source(object()) is None
        True
    """
    source = getattr(kernel, "_netcl_source", None)
    return source if isinstance(source, str) else None


def read_only_arguments(kernel: Any) -> tuple[bool, ...] | None:
    """Per argument of ``kernel``: whether the kernel only reads through it (a pointer to
    ``const`` data or ``__constant`` memory, see :func:`._signature.read_only`); ``None`` when
    its source or parameter list is not known (treat every buffer as written). Read from the
    source once per kernel object.

    Examples:
        >>> read_only_arguments(object()) is None
        True
    """
    known: tuple[bool, ...] | bool | None = getattr(kernel, "_netcl_read_only", False)
    if known is None or isinstance(known, tuple):
        return known
    source, name = kernel_source(kernel), getattr(kernel, "function_name", None)
    flags = None
    if source is not None and isinstance(name, str):
        params = parse_signature(source, name, type_aliases(source))
        flags = None if params is None else tuple(read_only(p) for p in params)
    with contextlib.suppress(AttributeError, TypeError):
        kernel._netcl_read_only = flags
    return flags
