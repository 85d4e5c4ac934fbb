"""``netcl tune``: tune a model's kernels ahead of time and say what was decided.

:func:`tune` runs one training step (forward, backward; and the same under AMP if asked) of a
model on scratch data with tuning forced on (``netcl.core.autotune.tuning``): every matmul
and convolution shape class the step meets without a stored winner is timed once, and the
winners are stored per device and driver, so later runs (``NETCL_AUTOTUNE=auto`` on GPUs, or
``on``) start with them. Built-in models: ``digits-cnn`` (the ``netcl train`` CNN, input
``64x1x8x8``) and ``resnet18`` (CIFAR stem, 10 classes, input ``128x3x32x32``).

The CLI's ``tune`` subcommand is :func:`add_tune_parser` and :func:`tune_command`.

Examples:
    >>> import os, tempfile
    >>> os.environ["NETCL_CACHE_DIR"] = tempfile.mkdtemp()
    >>> report = tune("digits-cnn", (4, 1, 8, 8), device="cpu")
    >>> report.rows  # the NumPy backend runs no OpenCL kernels: nothing to time
    []
    >>> print(report.table())  # doctest: +ELLIPSIS
    netcl tune: digits-cnn, input 4x1x8x8 float32, on cpu (NumPy)
    nothing tuned: ...
    >>> del os.environ["NETCL_CACHE_DIR"]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

import numpy as np

import netcl.autograd as ag
from netcl.core.autotune import DEFAULT_BUDGET_S, TuneRecord, tuning
from netcl.core.device import DeviceHandle, device, manager
from netcl.core.dtypes import canonical_dtype
from netcl.core.kernel_selector import get_kernel_selector
from netcl.core.tensor import Tensor
from netcl.nn import Module, resnet18
from netcl.nn.amp import autocast

from .trainer._digits import digits_cnn

__all__ = ["COLUMNS", "MODELS", "TuneReport", "add_tune_parser", "parse_shape", "row_line", "tune",
           "tune_command"]


@dataclass(frozen=True)
class _Model:
    build: Callable[[Any], Module]
    input_shape: tuple[int, ...]


MODELS: dict[str, _Model] = {
    "digits-cnn": _Model(lambda queue: digits_cnn(queue), (64, 1, 8, 8)),
    "resnet18": _Model(lambda queue: resnet18(num_classes=10, stem="cifar", queue=queue),
                       (128, 3, 32, 32)),
}
"""The built-in models by name: a builder (queue -> module) and the default input shape."""


@dataclass
class TuneReport:
    """What :func:`tune` decided.

    Attributes:
        model: the model's name (or its class name).
        input_shape, dtype, device: what it ran.
        rows: one :class:`netcl.core.autotune.TuneRecord` per shape class tuned.
        seconds: the whole run, tuning included.
        budget_s: the tuning budget it had.
        path: the device's winners file (``None`` on the NumPy backend).
    """

    model: str
    input_shape: tuple[int, ...]
    dtype: str
    device: str
    budget_s: float
    rows: list[TuneRecord] = field(default_factory=list)
    seconds: float = 0.0
    path: str | None = None

    def table(self) -> str:
        """The report as text: a header, one line per class (rule's pick and time, winner and
        time, speedup), and a summary line."""
        lines = [self.header()]
        if self.rows:
            lines.append(COLUMNS)
        lines += [row_line(r) for r in self.rows]
        lines.append(self.summary())
        return "\n".join(lines)

    def header(self) -> str:
        """The table's first line: model, input, device."""
        shape = "x".join(map(str, self.input_shape))
        return f"netcl tune: {self.model}, input {shape} {self.dtype}, on {self.device}"

    def summary(self) -> str:
        """The table's last line: what was tuned, or why nothing was."""
        if not self.rows:
            why = ("the NumPy backend runs no OpenCL kernels" if self.path is None else
                   "every shape class met already has a stored winner (or the budget was 0)")
            return f"nothing tuned: {why}"
        return (f"tuned {len(self.rows)} shape classes in {self.seconds:.1f} s "
                f"(budget {self.budget_s:g} s); winners in {self.path}")


COLUMNS = (f"{'family':<8} {'shape class':<48} {'rule pick':<24} {'ms':>8}  {'winner':<40} "
           f"{'ms':>8} {'gain':>6}")
"""The table's column heads."""


def row_line(r: TuneRecord) -> str:
    """One tuned class as a line of the table."""
    gain = f"{r.rule_s / r.winner_s:.2f}x" if r.rule_s and r.winner_s else "-"
    return (f"{r.family:<8} {_class_text(r.shape_class):<48} {r.rule:<24} {_ms(r.rule_s):>8}  "
            f"{(r.winner or '(rule)'):<40} {_ms(r.winner_s):>8} {gain:>6}"
            + ("" if r.complete else "  (budget ran out: not stored)"))


def _ms(seconds: float | None) -> str:
    return "failed" if seconds is None else f"{seconds * 1e3:.3f}"


def _class_text(key: tuple[Any, ...]) -> str:
    return " ".join("x".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in key)


def parse_shape(text: str) -> tuple[int, ...]:
    """An input shape written ``64x1x8x8`` or ``64,1,8,8``.

    Raises:
        ValueError: not positive integers.

    Examples:
        >>> parse_shape("64x1x8x8"), parse_shape("2,3,32,32")
        ((64, 1, 8, 8), (2, 3, 32, 32))
    """
    parts = text.replace(",", "x").split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"an input shape is positive integers like 64x1x8x8, got {text!r}"
                         ) from None
    if not shape or min(shape) < 1:
        raise ValueError(f"an input shape is positive integers like 64x1x8x8, got {text!r}")
    return shape


def _step(model: Module, x: Tensor, amp: bool, rng: np.random.Generator) -> None:
    """One forward and backward of ``model`` on ``x`` against random labels."""
    with ag.Tape() as tape:
        with autocast(enabled=amp):
            logits = model(x)
        if logits.dtype != "float32":
            logits = ag.ops.cast(logits, "float32")
        classes = int(logits.shape[-1])
        labels = Tensor.from_host(x.queue, rng.integers(0, classes, logits.shape[0]))
        loss = ag.cross_entropy(logits, labels)
    tape.backward(loss)
    loss.to_host()  # waits for the step


def tune(model_or_name: str | Module, input_shape: Sequence[int] | None = None,
         device: str | DeviceHandle = "auto", dtype: str = "float32",
         budget_s: float = DEFAULT_BUDGET_S, amp: bool = False,
         out: TextIO | None = None) -> TuneReport:
    """Tune the kernels one training step of a model meets; return what was decided.

    Args:
        model_or_name: a name in :data:`MODELS` or a :class:`netcl.nn.Module` (on ``device``).
        input_shape: the batch's shape (default: the built-in model's).
        device: where to tune (a selector as ``netcl train --device``, or a handle).
        dtype: the input's (and a built-in model's parameters') dtype.
        budget_s: seconds of timing allowed (builds included); past it the rule decides.
        amp: also run the step under AMP (float16 matmuls and convolutions).
        out: where to print the report's table as it is made (header first, each class as
            it is tuned, flushed), if anywhere.

    Raises:
        ValueError: an unknown model name, a missing ``input_shape`` for a module, a bad
            dtype or a negative budget.
        RuntimeError: the device selector names no device.
    """
    dtype = canonical_dtype(dtype, op="tune")
    if isinstance(model_or_name, str):
        spec = MODELS.get(model_or_name)
        if spec is None:
            raise ValueError(f"tune: unknown model {model_or_name!r}; built-in: "
                             f"{', '.join(MODELS)}")
        shape = tuple(input_shape or spec.input_shape)
        name = model_or_name
    else:
        if input_shape is None:
            raise ValueError("tune: a module needs its input_shape")
        shape, name, spec = tuple(input_shape), type(model_or_name).__name__, None
    start = time.perf_counter()
    with _device(device) as dev:
        model = spec.build(dev.queue) if spec is not None else cast(Module, model_or_name)
        if spec is not None and dtype != "float32":
            model = model.to(dtype=dtype)
        rng = np.random.default_rng(0)
        x = Tensor.from_host(dev.queue, rng.standard_normal(shape).astype(dtype))
        selector = get_kernel_selector(dev.cl_device)
        selector.clear_cache()  # decisions made before in this process would skip tuning
        model.train()
        path = None if dev.cl_device is None else str(selector.tuned_path())
        report = TuneReport(name, shape, dtype, str(dev), budget_s, path=path)
        printed: list[TuneRecord] = []

        def show(record: TuneRecord) -> None:
            if out is not None:
                print(*([COLUMNS] if not printed else []), row_line(record), sep="\n",
                      file=out, flush=True)
            printed.append(record)

        if out is not None:
            print(report.header(), file=out, flush=True)
        with tuning("on", budget_s, on_record=show) as log:
            _step(model, x, False, rng)
            if amp:
                _step(model, x, True, rng)
    report.rows = list(log)
    report.seconds = time.perf_counter() - start
    if out is not None:
        print(report.summary(), file=out, flush=True)
    return report


def _device(selector: str | DeviceHandle) -> Any:
    """``netcl.core.device.device(selector)``, raising RuntimeError where it names nothing."""
    if isinstance(selector, str) and manager.default(selector) is None:
        raise RuntimeError(f"tune: device {selector!r} matches no device")
    return device(selector)


def add_tune_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``tune`` subcommand to ``netcl``'s subparsers; returns its parser."""
    tp: argparse.ArgumentParser = subparsers.add_parser(
        "tune", help="time kernel candidates for a model ahead of time and store the winners",
        description="Run one training step of a model with autotuning on (NETCL_AUTOTUNE=on): "
        "every matmul and convolution shape class it meets is timed once and the fastest "
        "config is stored for this device and driver; later runs use it.")
    tp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                    help="on an error, print the full traceback too (or set NETCL_DEBUG=1)")
    tp.add_argument("model", choices=sorted(MODELS), help="the model to tune for")
    tp.add_argument("--device", default="auto",
                    help="auto (default), cpu (NumPy), gpu, cl, cl:P:D or a device-name fragment")
    tp.add_argument("--input-shape", type=_shape_arg, default=None, metavar="NxCxHxW",
                    help="the batch's shape (default: the model's)")
    tp.add_argument("--dtype", default="float32", choices=("float32", "float16", "float64"))
    tp.add_argument("--budget", type=_budget_arg, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                    help=f"tuning time allowed, builds included (default {DEFAULT_BUDGET_S:g})")
    tp.add_argument("--amp", action="store_true", help="also tune the AMP (float16) step")
    return tp


def _shape_arg(text: str) -> tuple[int, ...]:
    try:
        return parse_shape(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _budget_arg(text: str) -> float:
    value = float(text)
    if not value >= 0.0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def tune_command(args: argparse.Namespace, out: Any = None,
                 select_device: Callable[[str], DeviceHandle] | None = None) -> int:
    """Run ``netcl tune`` for parsed ``args``, printing the report's table as it is made;
    returns 0.

    ``select_device`` turns ``--device`` into a handle (the CLI's, which reports a bad
    selector as a usage error); without it the selector string goes to :func:`tune`.
    """
    out = out if out is not None else sys.stdout
    dev: str | DeviceHandle = args.device if select_device is None else select_device(
        args.device)
    tune(args.model, args.input_shape, device=dev, dtype=args.dtype, budget_s=args.budget,
         amp=args.amp, out=out)
    return 0

