"""What a kernel's source says about its launch: the parameter list and its work-group use.

:class:`~netcl.core.kernels.primitives.KernelSpec` reads these once, when it is built, so that
``run`` can convert Python numbers to the declared scalar types, check Tensor dtypes against
the declared element types, and refuse to guess the local size of a kernel whose result
depends on it.

# NOTE [ Reading a kernel's signature ]
# No preprocessor runs here: comments and string literals are dropped, preprocessor lines are
# read only for object-like ``#define NAME type`` aliases (``typedef`` and ``-D NAME=type``
# build options count too), and the parameter list is the one after ``__kernel ... void
# <name>(``. A type that cannot be resolved that way (a struct, a macro with two definitions,
# a pasted name) is left unknown, and ``run`` then skips the checks that need it rather than
# guess: a wrong guess here would be a silent reinterpretation, the very bug this prevents.

Examples:
    >>> src = "#define T float\\n__kernel void k(__global const T* x, const int n) {}"
    >>> [(p.name, p.kind, str(p.dtype)) for p in parse_signature(src, "k", type_aliases(src))]
    [('x', 'buffer', 'float32'), ('n', 'scalar', 'int32')]
    >>> work_group_features("__kernel void k(__global float* x) { barrier(CLK_LOCAL_MEM_FENCE); }")
    ('barrier',)
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["KernelParam", "parse_signature", "read_only", "type_aliases", "work_group_features"]

_SCALARS: dict[str, np.dtype[Any]] = {
    name: np.dtype(dt) for name, dt in (
        ("char", np.int8), ("uchar", np.uint8), ("short", np.int16), ("ushort", np.uint16),
        ("int", np.int32), ("uint", np.uint32), ("long", np.int64), ("ulong", np.uint64),
        ("half", np.float16), ("float", np.float32), ("double", np.float64),
    )
}
_VECTOR = re.compile(r"^(char|uchar|short|ushort|int|uint|long|ulong|half|float|double)"
                     r"(2|3|4|8|16)$")
_OPAQUE = re.compile(r"^(image\w*_t|sampler_t|queue_t|clk_event_t|event_t|pipe|reserve_id_t)$")
_ADDRESS_SPACES = {
    "__global": "global", "global": "global", "__constant": "constant", "constant": "constant",
    "__local": "local", "local": "local", "__private": "private", "private": "private",
    "__generic": "generic", "generic": "generic",
}
_QUALIFIERS = {
    "const", "volatile", "restrict", "__restrict", "__restrict__", "read_only", "__read_only",
    "write_only", "__write_only", "read_write", "__read_write",
}
_UNSIGNED = {"char": "uchar", "short": "ushort", "int": "uint", "long": "ulong"}

_WORK_GROUP = re.compile(
    r"\b(__local|local|barrier|work_group_barrier|get_local_id|get_local_size|"
    r"get_local_linear_id|get_enqueued_local_size|get_group_id|get_num_groups|work_group_\w+|"
    r"sub_group_\w+|get_sub_group_\w+|get_num_sub_groups|get_max_sub_group_size|"
    r"reqd_work_group_size)\b"
)
_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)(?!\()\s+(.+?)\s*$")
_TYPEDEF = re.compile(r"\btypedef\s+([A-Za-z_][\w\s]*?)\s+([A-Za-z_]\w*)\s*;")
_TYPE_WORDS = re.compile(r"^[A-Za-z_]\w*(\s+[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class KernelParam:
    """One parameter of a kernel, as its source declares it.

    Args:
        index: its position (0-based).
        name: the parameter's name.
        declaration: the declaration as written, whitespace collapsed (``__global float* x``).
        kind: ``"buffer"`` (a ``__global``/``__constant`` pointer), ``"local"`` (a ``__local``
            pointer), ``"scalar"`` (passed by value), ``"opaque"`` (vectors by value, images,
            samplers: passed through unchecked) or ``"unknown"`` (a type that could not be
            resolved).
        type_name: the type as written, without qualifiers (``float``, ``T``, ``float4``).
        dtype: the element type of a buffer or the type of a scalar; ``None`` when unknown
            (``void*``, an unresolved alias).
    """

    index: int
    name: str
    declaration: str
    kind: str
    type_name: str
    dtype: np.dtype[Any] | None


def _clean(source: str) -> str:
    """``source`` without comments or string literals, continuation lines joined."""

    def blank(match: re.Match[str]) -> str:
        text = match.group(0)
        return '""' if text.startswith('"') else " " + "\n" * text.count("\n")

    return _COMMENT_OR_STRING.sub(blank, source).replace("\\\n", " ")


def _code_lines(clean: str) -> str:
    """``clean`` with every preprocessor line blanked."""
    return "\n".join("" if line.lstrip().startswith("#") else line
                     for line in clean.split("\n"))


def type_aliases(source: str, extra_flags: Iterable[str] = ()) -> dict[str, tuple[str, ...]]:
    """Every object-like ``#define``, ``typedef`` and ``-D`` whose value is a list of words.

    A name defined more than once maps to all its values (``#ifdef`` branches); resolution
    then treats it as unknown unless they agree.

    Examples:
        >>> type_aliases("#define IDX long\\ntypedef unsigned int u32;", ["-D T=half"])
        {'IDX': ('long',), 'u32': ('unsigned int',), 'T': ('half',)}
    """
    found: dict[str, list[str]] = {}
    clean = _clean(source)
    for line in clean.split("\n"):
        match = _DEFINE.match(line)
        if match and _TYPE_WORDS.match(match.group(2)):
            found.setdefault(match.group(1), []).append(" ".join(match.group(2).split()))
    for match in _TYPEDEF.finditer(_code_lines(clean)):
        found.setdefault(match.group(2), []).append(" ".join(match.group(1).split()))
    words: list[str] = []
    for flag in extra_flags:
        try:
            words += shlex.split(flag)
        except ValueError:
            continue
    for i, word in enumerate(words):
        define = word[2:] if word.startswith("-D") else ""
        if word == "-D" and i + 1 < len(words):
            define = words[i + 1]
        name, _, value = define.partition("=")
        if name.isidentifier() and _TYPE_WORDS.match(value or "1"):
            found.setdefault(name, []).append(" ".join((value or "1").split()))
    return {name: tuple(values) for name, values in found.items()}


def _canonical(words: list[str], aliases: Mapping[str, tuple[str, ...]], depth: int = 0) -> str:
    """The OpenCL spelling of a type given as ``words``, aliases followed; ``""`` if unknown."""
    words = [w for w in words if w not in _QUALIFIERS and w not in _ADDRESS_SPACES]
    if len(words) == 1 and words[0] in aliases and depth < 8:
        values = set(aliases[words[0]])
        if len(values) != 1:
            return ""
        return _canonical(values.pop().split(), aliases, depth + 1)
    if words[:1] == ["signed"]:
        words = words[1:] or ["int"]
    if words[:1] == ["unsigned"]:
        rest = words[1:] or ["int"]
        if len(rest) == 2 and rest[1] == "int" and rest[0] in ("short", "long"):
            rest = rest[:1]
        return _UNSIGNED.get(rest[0], "") if len(rest) == 1 else ""
    if len(words) == 2 and words[1] == "int" and words[0] in ("short", "long"):
        words = words[:1]
    return words[0] if len(words) == 1 else ""


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [" ".join(p.split()) for p in parts]


def _drop_attributes(text: str) -> str:
    """``text`` without ``__attribute__((...))`` groups (balanced parentheses)."""
    while (at := text.find("__attribute__")) >= 0:
        i = text.find("(", at)
        if i < 0:
            return text[:at]
        depth, j = 0, i
        while j < len(text):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                break
            j += 1
        text = text[:at] + " " + text[j + 1:]
    return text


def _param(index: int, text: str, aliases: Mapping[str, tuple[str, ...]]) -> KernelParam:
    tokens = re.findall(r"[A-Za-z_]\w*|\*|\[", _drop_attributes(text))
    if tokens and tokens[-1] not in ("*", "["):
        name, rest = tokens[-1], tokens[:-1]
    else:
        name, rest = f"arg{index}", tokens
    pointers = rest.count("*")
    space = next((_ADDRESS_SPACES[t] for t in rest if t in _ADDRESS_SPACES), "")
    words = [t for t in rest if t not in ("*", "[")]
    type_name = " ".join(w for w in words if w not in _QUALIFIERS and w not in _ADDRESS_SPACES)
    canonical = _canonical(words, aliases)
    vector = _VECTOR.match(canonical)
    if "[" in tokens:
        return KernelParam(index, name, text, "opaque", type_name, None)
    if pointers:
        kind = "local" if space == "local" else "buffer"
        element = vector.group(1) if vector else canonical
        return KernelParam(index, name, text, kind, type_name, _SCALARS.get(element))
    dtype = _SCALARS.get(canonical)
    if dtype is not None:
        return KernelParam(index, name, text, "scalar", type_name, dtype)
    if vector or _OPAQUE.match(canonical):
        return KernelParam(index, name, text, "opaque", type_name, None)
    return KernelParam(index, name, text, "unknown", type_name, None)


def parse_signature(
    source: str,
    kernel: str,
    aliases: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[KernelParam, ...] | None:
    """The parameters of ``__kernel void <kernel>(...)`` in ``source``; ``None`` if not found.

    Args:
        source: the program's OpenCL C source.
        kernel: the kernel function's name.
        aliases: :func:`type_aliases` of the source (and build options) to resolve types with.

    Examples:
        >>> src = "__kernel __attribute__((reqd_work_group_size(16, 16, 1))) void mm(" \\
        ...       "__global const float* restrict a, __local float* tile, unsigned n, float4 v)"
        >>> [(p.name, p.kind, p.type_name, str(p.dtype)) for p in parse_signature(src, "mm")]
        ... # doctest: +NORMALIZE_WHITESPACE
        [('a', 'buffer', 'float', 'float32'), ('tile', 'local', 'float', 'float32'),
         ('n', 'scalar', 'unsigned', 'uint32'), ('v', 'opaque', 'float4', 'None')]
        >>> parse_signature("#define K(n) __kernel void n(int x)\\nK(k) {}", "k") is None
        True
    """
    code = _code_lines(_clean(source))
    for match in re.finditer(rf"\b{re.escape(kernel)}\s*\(", code):
        start = max(code.rfind(c, 0, match.start()) for c in ";{}") + 1
        prefix = code[start:match.start()]
        if not (re.search(r"\b(__kernel|kernel)\b", prefix) and re.search(r"\bvoid\b", prefix)):
            continue
        depth, end = 1, match.end()
        while end < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            end += 1
        if depth:
            return None
        parts = _split_top_level(code[match.end():end - 1])
        if parts in ([""], ["void"]):
            return ()
        return tuple(_param(i, p, aliases or {}) for i, p in enumerate(parts))
    return None


def work_group_features(source: str) -> tuple[str, ...]:
    """The work-group built-ins and qualifiers ``source`` uses (``__local``, ``barrier``,
    ``get_local_id``, ``reqd_work_group_size``, ...), sorted; comments and strings ignored.

    A kernel that uses any of them may compute something different for a different local
    size, so ``run`` never picks (or autotunes) a local size for it.

    Examples:
        >>> work_group_features("// barrier()\\n__kernel void k(__global int* x) { x[0] = 1; }")
        ()
    """
    return tuple(sorted(set(_WORK_GROUP.findall(_clean(source)))))


def read_only(param: KernelParam) -> bool:
    """Whether a buffer parameter's kernel only reads through it: a pointer to ``const`` data
    or into ``__constant`` memory (``float* const p`` is a constant pointer to writable data).

    Examples:
        >>> src = ("__kernel void k(__global const float* a, __constant float* b, "
        ...        "__global float* const c, __global float* d) {}")
        >>> [read_only(p) for p in parse_signature(src, "k")]
        [True, True, False, False]
    """
    if param.kind != "buffer":
        return False
    words = param.declaration.replace("*", " * ").split()
    if "__constant" in words or "constant" in words:
        return True
    star = len(words) - 1 - words[::-1].index("*") if "*" in words else len(words)
    return "const" in words[:star]
