"""The one kernel header: pragmas, the ``NETCL_`` macros and the ``T``/``CT``/``LD``/``ST`` types.

Every generated OpenCL program starts with text from here: :func:`kernel_header` for a
program written against the dtype macros (the ops' kernel families, the autograd JIT's fused
kernels), :data:`PRIMITIVE_PREAMBLE` and :func:`pragmas_for` for a
:class:`~netcl.core.kernels.primitives.KernelSpec`.

The macros of a dtype header:

- ``T``: the storage type (``half`` for float16);
- ``CT``: the compute type (``float`` for float16 and float32, ``double`` for float64, ``T``
  for integers), so float16 works on devices without ``cl_khr_fp16``;
- ``LD(p, i)`` / ``ST(p, i, v)``: load element ``i`` of ``p`` as ``CT`` / store ``v``
  (``vload_half``/``vstore_half`` for float16);
- optionally ``IDX`` (the index type: ``int``, or ``long`` for ``wide`` programs) and
  ``LIT(x)`` (``x`` as a literal of ``CT``).

Examples:
    >>> print(kernel_header("cl_khr_fp64", "float64", preamble=""), end="")
    #pragma OPENCL EXTENSION cl_khr_fp64 : enable
    #define T double
    #define CT double
    #define LD(p, i) ((CT)(p)[(i)])
    #define ST(p, i, v) ((p)[(i)] = (T)(v))
"""

from __future__ import annotations

from typing import Any

from ..dtypes import FLOAT_DTYPES, c_type, canonical_dtype

__all__ = [
    "EXPRESSION_MACROS",
    "FP16_PRAGMA",
    "FP64_PRAGMA",
    "PRIMITIVE_PREAMBLE",
    "compute_type",
    "extensions_of",
    "index_macro",
    "kernel_header",
    "literal_macro",
    "pragmas_for",
]

PRIMITIVE_PREAMBLE = """\
#ifndef NETCL_PRIMITIVES
#define NETCL_PRIMITIVES
#define NETCL_LOAD(p, i) ((p)[(i)])
#define NETCL_STORE(p, i, v) ((p)[(i)] = (v))
#define NETCL_LOAD_HALF(p, i) vload_half((i), (p))
#define NETCL_STORE_HALF(p, i, v) vstore_half((v), (i), (p))
#define NETCL_ADD(a, b) ((a) + (b))
#define NETCL_SUB(a, b) ((a) - (b))
#define NETCL_MUL(a, b) ((a) * (b))
#define NETCL_DIV(a, b) ((a) / (b))
#define NETCL_NEG(a) (-(a))
#define NETCL_SQR(a) ((a) * (a))
#define NETCL_RELU(x) ((x) > 0 ? (x) : 0)
#define NETCL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define NETCL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NETCL_SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#endif
"""
"""The ``NETCL_``-prefixed macros every netcl program may use (a kernel's own ``RELU`` or
``MAX`` cannot collide with them)."""

#: The short names of the expression language (``MUL(ADD(v0, v1), 2.0f)``) that
#: ``PrimitiveBuilder`` expressions and the autograd JIT's primitives are written in.
#: Only sources netcl generates around such an expression include them; a hand-written
#: kernel sees the ``NETCL_`` names alone, so its own ``RELU`` or ``MAX`` cannot collide.
EXPRESSION_MACROS = """\
#ifndef NETCL_EXPRESSION_MACROS
#define NETCL_EXPRESSION_MACROS
#define ADD(a, b) NETCL_ADD(a, b)
#define SUB(a, b) NETCL_SUB(a, b)
#define MUL(a, b) NETCL_MUL(a, b)
#define DIV(a, b) NETCL_DIV(a, b)
#define NEG(a) NETCL_NEG(a)
#define SQR(a) NETCL_SQR(a)
#define RELU(x) NETCL_RELU(x)
#define MAX(a, b) NETCL_MAX(a, b)
#define MIN(a, b) NETCL_MIN(a, b)
#define SIGMOID(x) NETCL_SIGMOID(x)
#endif
"""

FP16_PRAGMA = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
FP64_PRAGMA = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"


def extensions_of(target: Any) -> str:
    """The extension string of ``target``: a string itself, a device, or a context (its first
    device); ``""`` for ``None`` (no pragma is wanted).

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> extensions_of(NS(devices=[NS(extensions="cl_khr_fp16")])), extensions_of(None)
        ('cl_khr_fp16', '')
    """
    if target is None:
        return ""
    if isinstance(target, str):
        return target
    devices = getattr(target, "devices", None)
    device = devices[0] if devices else target
    return str(device.extensions)


def pragmas_for(extensions: str, source: str) -> str:
    """The fp16/fp64 pragmas a device with ``extensions`` needs for ``source`` (by whether the
    source mentions ``half``/``double``); the order :meth:`KernelSpec.device_source` uses.

    Examples:
        >>> pragmas_for("cl_khr_fp64 cl_khr_fp16", "double x;") == FP64_PRAGMA
        True
    """
    out = ""
    if "double" in source and "cl_khr_fp64" in extensions:
        out += FP64_PRAGMA
    if "half" in source and "cl_khr_fp16" in extensions:
        out += FP16_PRAGMA
    return out


def compute_type(dtype: str) -> str:
    """The C type arithmetic on ``dtype`` runs in (``CT``): float for float16.

    Examples:
        >>> compute_type("float16"), compute_type("float64"), compute_type("int32")
        ('float', 'double', 'int')
    """
    dtype = canonical_dtype(dtype)
    return "float" if dtype == "float16" else c_type(dtype)


def index_macro(wide: bool) -> str:
    """``#define IDX``: ``long`` for programs indexing past 2**31 - 1, else ``int``."""
    return f"#define IDX {'long' if wide else 'int'}\n"


def literal_macro(compute: str) -> str:
    """``#define LIT(x)``: ``x`` as a literal of ``compute``'s CT (``LIT(0.5)``).

    Float literals need the ``f`` suffix on devices without fp64; double ones keep every digit.

    Examples:
        >>> literal_macro("float32"), literal_macro("int32")
        ('#define LIT(x) (x##f)\\n', '#define LIT(x) ((CT)(x))\\n')
    """
    if compute == "float64":
        return "#define LIT(x) (x)\n"
    if compute in FLOAT_DTYPES:
        return "#define LIT(x) (x##f)\n"
    return "#define LIT(x) ((CT)(x))\n"


def _access(dtype: str, cast: bool) -> str:
    if dtype == "float16":
        return ("#define LD(p, i) vload_half((i), (p))\n"
                "#define ST(p, i, v) vstore_half((v), (i), (p))\n")
    if cast:
        return "#define LD(p, i) ((CT)(p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (T)(v))\n"
    return "#define LD(p, i) ((p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (v))\n"


def kernel_header(
    target: Any,
    dtype: str,
    *,
    preamble: str = PRIMITIVE_PREAMBLE,
    defines: str = "",
    wide: bool | None = None,
    literal: bool = False,
    cast: bool = True,
) -> str:
    """The header of a program written against the dtype macros, for ``dtype``.

    Args:
        target: a context, device or extension string: the fp16/fp64 pragma of ``dtype`` is
            added where its device has the extension; ``None`` adds no pragma (the caller's
            build adds them, as ``KernelSpec.device_source`` does).
        dtype: the tensor dtype ``T`` stores.
        preamble: the macros placed after the pragma (:data:`PRIMITIVE_PREAMBLE`; the fused
            kernels use :data:`EXPRESSION_MACROS`).
        defines: more ``#define`` lines, placed after ``CT`` (the optimizers' state type ``S``).
        wide: ``None``: no ``IDX``; else ``#define IDX`` (``long`` when True).
        literal: add ``#define LIT(x)`` for ``dtype``.
        cast: whether ``LD``/``ST`` of non-half types cast to ``CT``/``T`` (the fused kernels,
            whose ``CT`` is always ``T`` there, are written without the casts).

    Examples:
        >>> h = kernel_header("cl_khr_fp16", "float16")
        >>> h.startswith("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\\n#ifndef NETCL_PRIM")
        True
        >>> print(kernel_header(None, "float32", preamble="", wide=False, literal=True), end="")
        #define T float
        #define CT float
        #define IDX int
        #define LIT(x) (x##f)
        #define LD(p, i) ((CT)(p)[(i)])
        #define ST(p, i, v) ((p)[(i)] = (T)(v))
    """
    dtype = canonical_dtype(dtype)
    pragma = ""
    if dtype in ("float16", "float64") and target is not None:
        ext = "cl_khr_fp16" if dtype == "float16" else "cl_khr_fp64"
        if ext in extensions_of(target):
            pragma = FP16_PRAGMA if dtype == "float16" else FP64_PRAGMA
    head = f"{pragma}{preamble}#define T {c_type(dtype)}\n#define CT {compute_type(dtype)}\n"
    head += defines
    if wide is not None:
        head += index_macro(wide)
    if literal:
        head += literal_macro(dtype)
    return head + _access(dtype, cast)
