"""``netcl train --task charlm``: the options of the character language model, its epoch
line and its report (the CLI itself is :mod:`netcl.cli`)."""

from __future__ import annotations

import argparse
from typing import Any

from ._argtypes import int_at_least, positive_float, probability
from ._charlm import CharLMConfig, CharLMResult
from ._trainer import _perplexity as _ppl

__all__ = ["CHARLM_OPTIONS", "TASK_DEFAULTS", "add_charlm_arguments", "charlm_config",
           "charlm_epoch_line", "charlm_report"]

# --epochs, --batch-size and --lr when not given, per task
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "digits": {"epochs": 10, "batch_size": 64, "lr": 1e-2},
    "charlm": {"epochs": 4, "batch_size": 32, "lr": 3e-3},
}
# argparse destinations of the charlm-only options (None when not given)
CHARLM_OPTIONS = ("context", "layers", "width", "heads", "dropout", "corpus", "train_chars",
                  "sample_chars", "prompt", "temperature")


def add_charlm_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--task charlm`` options (defaults: :class:`CharLMConfig`'s)."""
    d = CharLMConfig()
    group = parser.add_argument_group("--task charlm (character language model)")
    group.add_argument("--context", type=int_at_least(1), default=None,
                       help=f"characters per training window (default {d.context})")
    group.add_argument("--layers", type=int_at_least(1), default=None,
                       help=f"transformer blocks (default {d.layers})")
    group.add_argument("--width", type=int_at_least(1), default=None,
                       help=f"model width (default {d.width})")
    group.add_argument("--heads", type=int_at_least(1), default=None,
                       help=f"attention heads; must divide --width (default {d.heads})")
    group.add_argument("--dropout", type=probability, default=None,
                       help=f"dropout probability (default {d.dropout})")
    group.add_argument("--corpus", metavar="TEXT_FILE", default=None,
                       help="train on this UTF-8 text file (default: the text of Python's "
                       "help() topics, pydoc_data, shipped with CPython)")
    group.add_argument("--train-chars", type=int_at_least(1), default=None, metavar="N",
                       help="train on the first N characters of the training text only")
    group.add_argument("--sample-chars", type=int_at_least(0), default=None, metavar="N",
                       help=f"characters to write after training (default {d.sample_chars})")
    group.add_argument("--prompt", default=None,
                       help=f"what the sample starts from (default {d.prompt!r})")
    group.add_argument("--temperature", type=positive_float, default=None,
                       help=f"sampling temperature (default {d.temperature})")


def charlm_config(args: argparse.Namespace, **shared: Any) -> CharLMConfig:
    """The :class:`CharLMConfig` of the parsed options (``shared``: the options every task
    has, as :class:`CharLMConfig` fields).

    Raises:
        ValueError: ``--heads`` does not divide ``--width``, or the prompt is empty.
    """
    cfg = CharLMConfig(**shared)
    for name in CHARLM_OPTIONS:
        value = getattr(args, name)
        if value is not None:
            setattr(cfg, name, value)
    if cfg.width % cfg.heads:
        raise ValueError(f"--heads {cfg.heads} must divide --width {cfg.width}")
    if not cfg.prompt:
        raise ValueError("--prompt must not be empty")
    return cfg


def charlm_epoch_line(m: Any) -> str:
    """The line ``netcl train --task charlm`` prints for one epoch.

    Examples:
        >>> from netcl.trainer import EpochMetrics
        >>> m = EpochMetrics(0, 2.0, 0.4, val_loss=1.5, val_accuracy=0.5, seconds=3.25)
        >>> charlm_epoch_line(m)
        'epoch  1  loss 2.0000 (ppl 7.39)  val loss 1.5000 (ppl 4.48)  val acc 0.5000  (3.2 s)'
    """
    val = "" if m.val_loss is None else (
        f"  val loss {m.val_loss:.4f} (ppl {_ppl(m.val_loss):.2f})"
        f"  val acc {m.val_accuracy:.4f}")
    return (f"epoch {m.epoch + 1:2d}  loss {m.train_loss:.4f} (ppl {_ppl(m.train_loss):.2f})"
            f"{val}  ({m.seconds:.1f} s)")


def charlm_report(result: CharLMResult) -> list[str]:
    """The lines printed after training: the baseline, the final validation loss and the
    sample."""
    final = result.history[-1] if result.history else None
    lines = [f"unigram baseline: {result.unigram:.4f} nats/char "
             f"(ppl {_ppl(result.unigram):.2f})"]
    if final is not None and final.val_loss is not None:
        gap = result.unigram - final.val_loss
        lines.append(f"validation loss: {final.val_loss:.4f} nats/char "
                     f"(ppl {_ppl(final.val_loss):.2f}), {abs(gap):.4f} "
                     f"{'below' if gap >= 0 else 'above'} the baseline")
    lines += ["sample:", result.sample]
    return lines
