"""Build OpenCL programs once: cached in memory per (context, source, options) and on disk.

The disk cache keys a program binary by platform, device, driver version, source and options,
so a second process start compiles nothing. Kernel objects are cached too: ``prg.name`` makes a
new ``cl.Kernel`` each time, so hot paths call :func:`get_kernel` instead.
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from .._cl import cl
from .._paths import atomic_write, cache_dir

__all__ = ["KernelBuildError", "build_stats", "get_kernel", "get_program"]


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


_lock = threading.Lock()
_programs: dict[tuple[int, str, str], Any] = {}
_kernels: dict[tuple[int, str, str, str], Any] = {}
_contexts: dict[int, Any] = {}  # keeps contexts alive while their programs are cached
_stats = {"compiled": 0, "from_disk": 0, "from_memory": 0}


def build_stats() -> dict[str, int]:
    """How many programs were compiled from source, loaded from disk, found in memory."""
    return dict(_stats)


def _disk_cache_enabled(dev: Any) -> bool:
    """``NETCL_DISK_CACHE`` (default 1); PoCL is skipped unless it is set to 1 explicitly:
    PoCL keeps its own kernel cache, and reading a PoCL program's binaries compiles every
    kernel in it a second time."""
    setting = os.environ.get("NETCL_DISK_CACHE")
    if setting is not None:
        return setting != "0"
    return "Portable Computing Language" not in str(dev.platform.name)


def _device_key(dev: Any) -> str:
    return "|".join(
        str(x).strip()
        for x in (dev.platform.name, dev.name, dev.driver_version, dev.version)
    )


def _build_from_source(context: Any, source: str, options: str, name: str) -> Any:
    program = cl().Program(context, source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return program.build(options=options)
    except Exception as exc:
        dev = context.devices[0]
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        path = cache_dir("failed") / f"{name}-{digest}.cl"
        path.write_text(source)
        try:
            log = program.get_build_info(dev, cl().program_build_info.LOG)
        except Exception:
            log = str(exc)
        raise KernelBuildError(name, dev.name.strip(), options, log or str(exc), path) from exc


def _load_or_build(context: Any, source: str, options: str, name: str) -> Any:
    devices = context.devices
    if len(devices) != 1 or not _disk_cache_enabled(devices[0]):
        _stats["compiled"] += 1
        return _build_from_source(context, source, options, name)
    dev = devices[0]
    digest = hashlib.sha256(
        "\0".join((_device_key(dev), options, source)).encode()
    ).hexdigest()
    path = cache_dir("programs") / f"{digest}.bin"
    if path.exists():
        try:
            binary = path.read_bytes()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = cl().Program(context, [dev], [binary]).build(options=options)
            _stats["from_disk"] += 1
            return program
        except Exception:
            path.unlink(missing_ok=True)  # stale or corrupt binary: rebuild from source
    program = _build_from_source(context, source, options, name)
    _stats["compiled"] += 1
    try:
        atomic_write(path, bytes(program.binaries[0]))
    except OSError:
        pass  # a read-only cache only costs compile time
    return program


def get_program(context: Any, source: str, options: str = "", name: str = "program") -> Any:
    """The built ``cl.Program`` for ``source``; compiled at most once per process and device.

    Raises:
        KernelBuildError: the source does not compile (the message has the build log).
    """
    key = (id(context), source, options)
    with _lock:
        program = _programs.get(key)
        if program is not None:
            _stats["from_memory"] += 1
            return program
        program = _load_or_build(context, source, options, name)
        _programs[key] = program
        _contexts[id(context)] = context
        return program


def get_kernel(context: Any, source: str, name: str, options: str = "") -> Any:
    """The one ``cl.Kernel`` object named ``name`` in ``source`` for ``context``."""
    key = (id(context), source, options, name)
    kernel = _kernels.get(key)
    if kernel is None:
        program = get_program(context, source, options, name)
        with _lock:
            kernel = _kernels.get(key)
            if kernel is None:
                kernel = _kernels[key] = cl().Kernel(program, name)
    return kernel
