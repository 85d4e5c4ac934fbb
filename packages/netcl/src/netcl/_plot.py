"""Training curves: loss and accuracy per epoch as a matplotlib figure (``netcl train --plot``).

matplotlib is the optional extra ``netcl[plot]``; it is imported only when a figure is drawn,
and a missing one raises ``ImportError`` naming the extra. The figure is built with
``matplotlib.figure.Figure`` (no pyplot), so drawing touches no global backend or window.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["add_plot_argument", "plot_history", "require_matplotlib", "write_plot"]

_EXTRA_HINT = "pip install 'netcl[plot]' (or pip install matplotlib)"


def require_matplotlib() -> Any:
    """The ``matplotlib.figure`` module, or ``ImportError`` naming the ``netcl[plot]`` extra."""
    try:
        return importlib.import_module("matplotlib.figure")
    except ImportError as err:
        raise ImportError(f"plotting training curves needs matplotlib: {_EXTRA_HINT}; import "
                          f"failed with: {err}") from err


def plot_history(history: Sequence[Any], path: str | os.PathLike[str],
                 title: str | None = None) -> Path:
    """Write loss and accuracy per epoch (train, and held-out when measured) to ``path``.

    Args:
        history: :class:`netcl.trainer.EpochMetrics` (or anything with ``epoch``,
            ``train_loss``, ``train_accuracy``, ``val_loss``, ``val_accuracy``), in order.
        path: the image file; its suffix picks the format (``.png``, ``.svg``, ``.pdf``).
        title: a title over both panels.

    Returns:
        The path written.

    Raises:
        ImportError: matplotlib is not installed.
        ValueError: ``history`` is empty.

    Examples:
        >>> from netcl.trainer import EpochMetrics
        >>> runs = [EpochMetrics(0, 0.9, 0.7, 0.8, 0.75), EpochMetrics(1, 0.5, 0.85, 0.6, 0.8)]
        >>> plot_history(runs, "curves.png")  # doctest: +SKIP
        PosixPath('curves.png')
    """
    if not history:
        raise ValueError("plot_history: no epoch to plot (the history is empty)")
    figure_module = require_matplotlib()
    epochs = [m.epoch + 1 for m in history]
    fig = figure_module.Figure(figsize=(10, 4), layout="constrained")
    loss_ax, acc_ax = fig.subplots(1, 2)
    for ax, key, label in ((loss_ax, "loss", "loss"), (acc_ax, "accuracy", "accuracy")):
        ax.plot(epochs, [getattr(m, f"train_{key}") for m in history], marker="o",
                label="train")
        held_out = [(e, getattr(m, f"val_{key}")) for e, m in zip(epochs, history)
                    if getattr(m, f"val_{key}") is not None]
        if held_out:
            ax.plot(*zip(*held_out), marker="s", label="held-out")
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    out = Path(path)
    if out.parent != Path():
        out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out


def add_plot_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--plot FILE`` to a ``netcl train`` parser."""
    parser.add_argument("--plot", metavar="CURVES.png", default=None,
                        help="write loss and accuracy per epoch to this image (needs "
                             "matplotlib: pip install 'netcl[plot]')")


def write_plot(path: str | os.PathLike[str] | None, history: Sequence[Any],
               out: Any = None) -> None:
    """What ``--plot`` does after training: write the figure and say where (nothing when
    ``path`` is None). Call :func:`require_matplotlib` before training to fail fast."""
    if path is None:
        return
    written = plot_history(history, path, title="netcl train: digits CNN")
    if out is not None:
        print(f"training curves written to {written}", file=out)
