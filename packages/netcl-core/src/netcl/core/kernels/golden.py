"""Golden kernel sources: generated OpenCL programs checked in, so a change to one shows.

A package renders its kernel templates for a fixed matrix of op families, dtypes and variants
(pure functions of their parameters: no device) into :class:`GoldenSource` rows named like
``elementwise/arith2-float32-vec4.cl``. Its ``test_golden_sources.py`` compares every row with
the file of that name in the package's ``tests/golden`` folder (:func:`check_golden`: a unified
diff on mismatch), fails on files no row renders any more (:func:`check_no_stale_golden`) and
builds every row on each OpenCL device present (:func:`build_golden`).

With ``NETCL_UPDATE_GOLDEN=1`` in the environment the same tests rewrite the files instead and
remove the stale ones, so regenerating after an intended change is one command::

    NETCL_UPDATE_GOLDEN=1 hatch run pytest packages/netcl-ops/tests/test_golden_sources.py

Examples:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "k.cl").write_text("__kernel void k() {}\\n")
    21
    >>> check_golden(folder, "k.cl", "__kernel void k() {}\\n", "regen")
    >>> try:
    ...     check_golden(folder, "k.cl", "__kernel void k(int n) {}\\n", "regen")
    ... except AssertionError as err:
    ...     print(str(err).splitlines()[5:7])
    ['-__kernel void k() {}', '+__kernel void k(int n) {}']
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._cl import cl
from ..env import env_flag
from .cache import get_program

__all__ = [
    "UPDATE_ENV",
    "GoldenProvider",
    "GoldenSource",
    "build_golden",
    "check_golden",
    "check_no_stale_golden",
    "golden_families",
    "missing_extensions",
    "register_golden",
    "render_golden",
    "updating",
]

UPDATE_ENV = "NETCL_UPDATE_GOLDEN"


@dataclass(frozen=True)
class GoldenSource:
    """One rendered OpenCL program.

    Args:
        source: the complete program text, as handed to the OpenCL compiler.
        kernels: the ``__kernel`` functions the program must define.
        requires: OpenCL extensions a device needs to build it (``cl_khr_fp64`` for float64
            arithmetic); float16 *storage* (``vload_half``/``vstore_half``) needs none.
    """

    source: str
    kernels: tuple[str, ...]
    requires: tuple[str, ...] = ()


GoldenProvider = Callable[[str], Iterable[tuple[str, GoldenSource]]]
"""Renders a family's golden programs for a device with the given extensions: ``(file name
relative to the golden folder, source)`` pairs."""

_registry: dict[str, dict[str, GoldenProvider]] = {}


def register_golden(package: str, family: str, provider: GoldenProvider) -> None:
    """Register the golden programs of kernel family ``family`` of ``package`` (``"ops"``).

    :func:`~netcl.core.kernels.family.kernel_family` registers a family given ``golden=``
    cases; a package whose kernels are made another way registers a provider itself.

    Raises:
        ValueError: ``family`` of ``package`` is registered already by another module (a
            module run twice replaces its own registration).
    """
    families = _registry.setdefault(package, {})
    old = families.get(family)
    if old is not None and getattr(old, "__module__", None) != getattr(provider, "__module__", 0):
        raise ValueError(f"register_golden: family {family!r} of {package!r} is registered "
                         "already")
    families[family] = provider


def golden_families(package: str) -> list[str]:
    """The families of ``package`` with golden programs, in registration order."""
    return list(_registry.get(package, {}))


def render_golden(package: str, extensions: str) -> dict[str, GoldenSource]:
    """Every golden program of every registered family of ``package``, for a device with
    ``extensions`` (the modules defining the families must have been imported).

    Raises:
        ValueError: two families render a file of the same name.

    Examples:
        >>> register_golden("doc", "k", lambda ext: [("k/k.cl", GoldenSource("k", ("k",)))])
        >>> list(render_golden("doc", "")), golden_families("doc")
        (['k/k.cl'], ['k'])
    """
    out: dict[str, GoldenSource] = {}
    for family, provider in _registry.get(package, {}).items():
        for name, golden in provider(extensions):
            if name in out:
                raise ValueError(f"render_golden: {package} family {family!r} renders {name!r}, "
                                 "which another family rendered already")
            out[name] = golden
    return out


def updating() -> bool:
    """Whether ``NETCL_UPDATE_GOLDEN`` asks the golden tests to rewrite their files."""
    return env_flag(UPDATE_ENV, False)


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # no newline translation: compare byte for byte


def check_golden(directory: Path, name: str, source: str, regenerate: str) -> None:
    """Compare ``source`` with the golden file ``directory / name`` (or rewrite it).

    Args:
        directory: the package's golden folder.
        name: the file's path relative to it (``elementwise/arith2-float32-vec4.cl``).
        source: the freshly rendered program text.
        regenerate: the command that rewrites the golden files, quoted in failures.

    Raises:
        AssertionError: the file is missing or differs; the message has a unified diff from
            the checked-in file to the rendered source and the command to regenerate.
    """
    path = directory / name
    if updating():
        if not path.exists() or _read(path) != source:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(source.encode("utf-8"))
        return
    if not path.exists():
        raise AssertionError(
            f"golden source {name} is missing: no file {path}.\n"
            f"If this kernel is new, write it with: {regenerate}"
        )
    golden = _read(path)
    if golden == source:
        return
    diff = "".join(difflib.unified_diff(
        golden.splitlines(keepends=True), source.splitlines(keepends=True),
        fromfile=f"golden/{name}", tofile=f"rendered/{name}",
    ))
    raise AssertionError(
        f"rendered kernel source {name} differs from the checked-in {path}\n"
        f"(- checked in, + rendered now):\n{diff}\n"
        f"If the change is intended, regenerate the golden files with: {regenerate}"
    )


def check_no_stale_golden(directory: Path, names: Iterable[str], regenerate: str) -> None:
    """Fail on ``.cl`` files under ``directory`` that no rendered source is named after.

    In update mode (:func:`updating`) they are deleted instead, with folders left empty.

    Raises:
        AssertionError: stale golden files exist (listed, with the command that removes them).
    """
    wanted = set(names)
    stale = sorted(
        p for p in directory.rglob("*.cl") if p.relative_to(directory).as_posix() not in wanted
    )
    if not stale:
        return
    if updating():
        for path in stale:
            path.unlink()
        for folder in sorted({p.parent for p in stale}, key=lambda p: -len(p.parts)):
            if folder != directory and not any(folder.iterdir()):
                folder.rmdir()
        return
    listed = "\n".join(f"  {p.relative_to(directory).as_posix()}" for p in stale)
    raise AssertionError(
        f"{len(stale)} golden file(s) in {directory} are rendered by nothing any more:\n"
        f"{listed}\nRemove them with: {regenerate}"
    )


def missing_extensions(device: Any, golden: GoldenSource) -> list[str]:
    """The extensions ``golden`` requires that the ``pyopencl.Device`` ``device`` lacks."""
    have = set(str(device.extensions).split())
    return [ext for ext in golden.requires if ext not in have]


def build_golden(context: Any, golden: GoldenSource, name: str = "golden") -> None:
    """Build ``golden`` for ``context`` and check that it defines each of its kernels.

    Raises:
        netcl.core.kernels.cache.KernelBuildError: the program does not compile (with the
            build log and the path of the saved source).
        AssertionError: a kernel named in ``golden.kernels`` is not in the program.
    """
    program = get_program(context, golden.source, "", name=golden.kernels[0])
    defined = set(str(program.get_info(cl().program_info.KERNEL_NAMES)).split(";"))
    absent = [k for k in golden.kernels if k not in defined]
    if absent:
        raise AssertionError(
            f"golden source {name} built, but defines no kernel {', '.join(absent)} "
            f"(it defines {', '.join(sorted(defined))})"
        )
