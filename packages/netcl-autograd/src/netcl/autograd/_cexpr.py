"""Evaluate the C expressions of compiler primitives with NumPy (the NumPy backend's JIT).

A primitive is defined once, by the OpenCL C expression its ``forward``/``backward`` return;
on the NumPy backend the compiler runs those same expressions through this evaluator, so a user
primitive works on every backend without a second definition.

The subset understood is what elementwise expressions use: number literals (``1.0f``, ``2``,
``1e-3``), variables, ``+ - * / %``, comparisons, ``&& || !``, ``?:``, casts to the scalar
types, the expression macros (``ADD``, ``MUL``, ``RELU``, ``SIGMOID``, ...), ``LIT(x)`` and the
OpenCL math built-ins listed in :data:`FUNCTIONS`.

Examples:
    >>> import numpy as np
    >>> f = compile_expression("RELU(x) * 2.0f + (x > 1 ? y : -y)")
    >>> f({"x": np.array([-1.0, 2.0]), "y": np.array([3.0, 4.0])}).tolist()
    [-3.0, 8.0]
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from netcl.ops import ELEMENTWISE

__all__ = ["FUNCTIONS", "compile_expression"]

Env = dict[str, Any]
Evaluator = Callable[[Env], Any]

def _erf(x: Any) -> Any:
    """netcl.ops' erf row (its NumPy function) on floats; integers become float64."""
    arr = np.asarray(x)
    return ELEMENTWISE["erf"].numpy(arr if arr.dtype.kind == "f" else arr.astype(np.float64))


def _rsqrt(x: Any) -> Any:
    return 1 / np.sqrt(x)


def _sigmoid(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def _select_max(a: Any, b: Any) -> Any:
    return np.where(a > b, a, b)


def _select_min(a: Any, b: Any) -> Any:
    return np.where(a < b, a, b)


#: OpenCL built-ins and netcl preamble macros the evaluator knows, by name.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    # netcl expression macros (netcl.core.kernels.primitives.EXPRESSION_MACROS)
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
    "NEG": np.negative, "SQR": np.square, "RELU": lambda x: np.where(x > 0, x, 0),
    "MAX": _select_max, "MIN": _select_min, "SIGMOID": _sigmoid, "LIT": lambda x: x,
    # OpenCL math built-ins
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": _rsqrt, "cbrt": np.cbrt,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "fabs": np.abs, "fmax": np.fmax, "fmin": np.fmin, "max": np.maximum, "min": np.minimum,
    "pow": np.power, "powr": np.power, "pown": np.power, "fmod": np.fmod, "hypot": np.hypot,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "sign": np.sign, "copysign": np.copysign, "isnan": np.isnan, "isinf": np.isinf,
    "erf": _erf, "mad": lambda a, b, c: a * b + c, "fma": lambda a, b, c: a * b + c,
    "clamp": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "select": lambda a, b, c: np.where(c, b, a),
}

_FLOAT_CASTS = {"float", "double", "half", "CT", "T"}
_INT_CASTS = {"int", "long", "uint", "ulong", "short", "char", "uchar", "bool", "IDX"}

_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fFlLuU]*)"
    r"|(?P<id>[A-Za-z_]\w*)|(?P<op>&&|\|\||==|!=|<=|>=|[-+*/%<>!?:(),]))"
)

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "%": np.fmod,
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal, "&&": np.logical_and, "||": np.logical_or,
}
_LEVELS = (("||",), ("&&",), ("==", "!="), ("<", "<=", ">", ">="), ("+", "-"), ("*", "/", "%"))


def _divide(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return int(a / b)  # C integer division truncates toward zero
    return np.divide(a, b)


class _Parser:
    """Recursive descent over C's expression precedence levels, building closures."""

    def __init__(self, source: str, functions: dict[str, Callable[..., Any]]) -> None:
        self.source = source
        self.functions = functions
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        stripped = source.rstrip()
        while pos < len(stripped):
            m = _TOKEN.match(stripped, pos)
            if m is None or m.end() == pos:
                self.fail(f"cannot read {stripped[pos:pos + 12]!r}")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.pos = 0

    def fail(self, why: str) -> NoReturn:
        raise ValueError(f"C expression {self.source!r}: {why}")

    def peek(self) -> str:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            self.fail("ends early")
        tok = self.tokens[self.pos]
        if expected is not None and tok[1] != expected:
            self.fail(f"expected {expected!r}, found {tok[1]!r}")
        self.pos += 1
        return tok

    def parse(self) -> Evaluator:
        ev = self.ternary()
        if self.pos != len(self.tokens):
            self.fail(f"unexpected {self.peek()!r}")
        return ev

    def ternary(self) -> Evaluator:
        cond = self.binary(0)
        if self.peek() != "?":
            return cond
        self.take("?")
        yes = self.ternary()
        self.take(":")
        no = self.ternary()
        return lambda env: np.where(cond(env), yes(env), no(env))

    def binary(self, level: int) -> Evaluator:
        if level == len(_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in _LEVELS[level] and self.tokens[self.pos][0] == "op":
            op = self.take()[1]
            right = self.binary(level + 1)
            fn = _divide if op == "/" else _BINARY[op]
            left = _apply2(fn, left, right)
        return left

    def unary(self) -> Evaluator:
        tok = self.peek()
        if tok in ("-", "+", "!"):
            self.take()
            inner = self.unary()
            if tok == "-":
                return lambda env: np.negative(inner(env))
            if tok == "!":
                return lambda env: np.logical_not(inner(env))
            return inner
        if tok == "(" and self.pos + 2 < len(self.tokens) and self.tokens[self.pos + 2][1] == ")":
            name = self.tokens[self.pos + 1][1]
            if name in _FLOAT_CASTS or name in _INT_CASTS:
                self.pos += 3
                inner = self.unary()
                if name in _FLOAT_CASTS:
                    return lambda env: np.asarray(inner(env)).astype(env["__ct__"])
                return lambda env: np.trunc(inner(env)).astype(np.int64)
        return self.primary()

    def primary(self) -> Evaluator:
        kind, text = self.take()
        if kind == "num":
            literal = text.rstrip("fFlLuU")
            number: float = int(literal) if literal.isdigit() else float(literal)
            return lambda env: number
        if kind == "id":
            if self.peek() == "(":
                return self.call(text)
            name = text
            return lambda env: _lookup(env, name, self.source)
        if text == "(":
            inner = self.ternary()
            self.take(")")
            return inner
        self.fail(f"unexpected {text!r}")

    def call(self, name: str) -> Evaluator:
        fn = self.functions.get(name)
        if fn is None:
            self.fail(
                f"the NumPy backend does not know the function {name!r} (give it to "
                f"register_primitive as numpy_functions={{{name!r}: ...}}); known: "
                f"{', '.join(sorted(self.functions))}"
            )
        self.take("(")
        args: list[Evaluator] = []
        if self.peek() != ")":
            args.append(self.ternary())
            while self.peek() == ",":
                self.take(",")
                args.append(self.ternary())
        self.take(")")
        func = fn
        return lambda env: func(*(a(env) for a in args))


def _apply2(fn: Callable[[Any, Any], Any], left: Evaluator, right: Evaluator) -> Evaluator:
    return lambda env: fn(left(env), right(env))


def _lookup(env: Env, name: str, source: str) -> Any:
    try:
        return env[name]
    except KeyError:
        raise ValueError(
            f"C expression {source!r}: unknown variable {name!r}; the expression may only use "
            f"its arguments ({', '.join(k for k in env if not k.startswith('__'))})"
        ) from None


@functools.lru_cache(maxsize=4096)
def compile_expression(
    source: str, functions: tuple[tuple[str, Callable[..., Any]], ...] = ()
) -> Evaluator:
    """A function of ``{name: array}`` that evaluates C expression ``source`` with NumPy.

    ``env["__ct__"]`` (default float32) is the type casts like ``(float)`` and ``(CT)`` give;
    ``functions`` adds NumPy versions of C functions or macros the expression calls.

    Raises:
        ValueError: the expression uses syntax or a function the evaluator does not know.
    """
    ev = _Parser(source, {**FUNCTIONS, **dict(functions)}).parse()

    def run(env: Env) -> Any:
        env.setdefault("__ct__", np.float32)
        with np.errstate(all="ignore"):
            return ev(env)

    return run
