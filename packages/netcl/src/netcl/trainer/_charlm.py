"""The second main job: a small GPT that learns to write Python's ``help()`` text, one
character at a time (``netcl train --task charlm``).

Nothing is downloaded: the corpus is the text of every ``help()`` topic, which ships with
CPython as ``pydoc_data.topics`` (:func:`netcl.data.python_help_text`; about 465,000
characters and 103 distinct ones on Python 3.11, fixed for a Python version), or a UTF-8
text file of your own. The last 10% is held out for validation (no seed needed, and no
window straddles the cut); the vocabulary is every character of the whole text. Training
windows tile the text without overlap, so an epoch sees each character once as a target.

Each epoch reports the mean cross entropy (nats per character) and its perplexity on both
parts; the unigram baseline is the entropy of the training text's character frequencies
(``-sum p log p``: what a model that ignores the context can reach). After training the
model writes ``sample_chars`` characters from a prompt, sampled at ``temperature`` with a
seeded generator (the same text for the same weights and seed).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import netcl.autograd as ag
from netcl.core.device import DeviceHandle, device
from netcl.core.tensor import Tensor
from netcl.data import CharDataset, CharVocab, DataLoader, python_help_text, split_text
from netcl.nn import Module
from netcl.optim import AdamW, CosineAnnealingLR

from ._charlm_model import GPT
from ._loggers import CSVLogger, MetricsLogger, TensorBoardLogger
from ._trainer import EpochMetrics, Trainer

__all__ = ["CharLMConfig", "CharLMData", "CharLMResult", "charlm_data", "load_corpus",
           "sample_text", "train_charlm", "unigram_entropy"]


@dataclass
class CharLMConfig:
    """Options of ``netcl train --task charlm`` (the shared ones as :class:`DigitsConfig`)."""

    device: str | DeviceHandle = "auto"
    epochs: int = 4
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    workers: int = 0
    checkpoint_dir: str | os.PathLike[str] | None = None
    resume: bool = False
    progress: bool = True
    stop_after: int | None = None
    amp: bool = False
    capture: bool = True
    on_epoch_end: Callable[[EpochMetrics], None] | None = None
    csv_log: str | os.PathLike[str] | None = None
    tensorboard_dir: str | os.PathLike[str] | None = None
    log_every: int | None = None
    # the model
    context: int = 64
    layers: int = 2
    width: int = 64
    heads: int = 4
    dropout: float = 0.0
    # the data: a UTF-8 text file instead of Python's help() text; train on the first
    # train_chars characters of the training part only (quick runs)
    corpus: str | os.PathLike[str] | None = None
    train_chars: int | None = None
    val_fraction: float = 0.1
    # the sample written after training
    sample_chars: int = 200
    prompt: str = "The "
    temperature: float = 0.8


@dataclass
class CharLMData:
    """The corpus split for training: the vocabulary (every character of the whole text)
    and the training and validation texts."""

    vocab: CharVocab
    train_text: str
    val_text: str


@dataclass
class CharLMResult:
    """What :func:`train_charlm` returns."""

    trainer: Trainer
    history: list[EpochMetrics]
    device: DeviceHandle
    vocab: CharVocab
    unigram: float  # nats per character: the entropy of the training text's characters
    sample: str  # the prompt and what the model wrote after it


def load_corpus(path: str | os.PathLike[str] | None = None) -> str:
    """The text in ``path`` (UTF-8), or Python's ``help()`` text when ``path`` is None.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not UTF-8 text.
    """
    if path is None:
        return python_help_text()
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"charlm: corpus {os.fspath(path)!r} is not UTF-8 text: {err}") from None


def unigram_entropy(text: str) -> float:
    """``-sum p log p`` (nats) of the character frequencies of ``text``.

    Examples:
        >>> round(unigram_entropy("abab"), 4) == round(math.log(2), 4)
        True
    """
    _, counts = np.unique(np.frombuffer(text.encode("utf-32-le"), np.uint32),
                          return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def _token_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross entropy of ``(B, T, V)`` logits against ``(B, T)`` next characters."""
    rows = ag.ops.reshape(logits, (-1, logits.shape[-1]))
    return ag.cross_entropy(rows, ag.ops.reshape(targets, (-1,)))


def sample_text(model: Module, vocab: CharVocab, prompt: str, length: int,
                temperature: float = 0.8, seed: int = 0) -> str:
    """``prompt`` and ``length`` characters the model writes after it, each drawn from the
    softmax of the last position's logits divided by ``temperature`` (NumPy generator
    ``seed``), with the model in eval mode (restored after).

    Raises:
        ValueError: an empty prompt, a prompt character the vocabulary lacks, or a
            ``temperature`` that is not positive.

    Examples:
        >>> from netcl.core import manager
        >>> q = manager.default("cpu").queue
        >>> vocab = CharVocab("abc ")
        >>> model = GPT(len(vocab), context=8, layers=1, width=8, heads=2, queue=q)
        >>> text = sample_text(model, vocab, "ab", 12, seed=1)
        >>> len(text), text == sample_text(model, vocab, "ab", 12, seed=1)
        (14, True)
    """
    if not prompt:
        raise ValueError("sample_text: the prompt is empty; give at least one character")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"sample_text: temperature must be a positive number, got "
                         f"{temperature!r}")
    tokens = vocab.encode(prompt).tolist()
    context = int(getattr(model, "context", len(tokens) + length))
    queue = next(iter(model.parameters())).queue  # the model's device
    rng = np.random.default_rng(seed)
    was_training = model.training
    model.eval()
    try:
        with ag.no_grad():
            for _ in range(length):
                window = np.asarray(tokens[-context:], np.int32)[None]
                logits = model(Tensor.from_host(queue, window))
                last = np.asarray(logits.to_host(), np.float64)[0, -1] / temperature
                p = np.exp(last - last.max())
                tokens.append(int(rng.choice(len(p), p=p / p.sum())))
    finally:
        model.train(was_training)
    return vocab.decode(tokens)


def charlm_data(cfg: CharLMConfig) -> CharLMData:
    """Load and split the corpus of ``cfg``, checking it fits the options.

    Raises:
        OSError: the corpus file cannot be read.
        ValueError: the corpus is not UTF-8, the prompt has characters it lacks, or a part
            is too short for one window of ``context`` characters.

    Examples:
        >>> data = charlm_data(CharLMConfig(context=16))
        >>> round(len(data.val_text) / (len(data.train_text) + len(data.val_text)), 3)
        0.1
    """
    text = load_corpus(cfg.corpus)
    vocab = CharVocab(text)
    missing = sorted({c for c in cfg.prompt if c not in vocab})
    if missing:
        raise ValueError(f"charlm: the prompt has characters the corpus lacks: {missing}")
    train_text, val_text = split_text(text, cfg.val_fraction)
    if cfg.train_chars is not None:
        train_text = train_text[:cfg.train_chars]
    for part, name in ((train_text, "training"), (val_text, "validation")):
        if len(part) < cfg.context + 1:
            raise ValueError(f"charlm: the {name} text has {len(part)} characters, fewer than "
                             f"a window of --context {cfg.context} needs ({cfg.context + 1})")
    return CharLMData(vocab, train_text, val_text)


def train_charlm(cfg: CharLMConfig, data: CharLMData | None = None) -> CharLMResult:
    """Train the character GPT on ``data`` (default: :func:`charlm_data` of ``cfg``);
    returns the trainer, its history, the device, the vocabulary, the unigram baseline and
    the sample.
    """
    data = charlm_data(cfg) if data is None else data
    vocab = data.vocab
    loggers: list[MetricsLogger] = []
    if cfg.tensorboard_dir is not None:  # first: a missing tensorboardX fails before training
        loggers.append(TensorBoardLogger(cfg.tensorboard_dir))
    if cfg.csv_log is not None:
        loggers.append(CSVLogger(cfg.csv_log, append=cfg.resume))
    try:
        with device(cfg.device) as dev:
            trainer, history = _train(cfg, loggers, vocab, data.train_text, data.val_text)
            sample = sample_text(trainer.model, vocab, cfg.prompt, cfg.sample_chars,
                                 cfg.temperature, cfg.seed)
    finally:
        for logger in loggers:
            logger.close()
    return CharLMResult(trainer, history, dev, vocab, unigram_entropy(data.train_text), sample)


def _train(cfg: CharLMConfig, loggers: list[MetricsLogger], vocab: CharVocab, train_text: str,
           val_text: str) -> tuple[Trainer, list[EpochMetrics]]:
    train_set = CharDataset(vocab.encode(train_text), cfg.context)
    val_set = CharDataset(vocab.encode(val_text), cfg.context)
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True,
                              seed=cfg.seed, num_workers=cfg.workers)
    val_loader = DataLoader(val_set, batch_size=max(cfg.batch_size, 64))
    model = GPT(len(vocab), cfg.context, cfg.layers, cfg.width, cfg.heads, cfg.dropout,
                seed=cfg.seed)
    optimizer = AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    scheduler = CosineAnnealingLR(optimizer, T_max=cfg.epochs)
    trainer = Trainer(model, optimizer, _token_loss, train_loader, val_loader,
                      epochs=cfg.epochs, scheduler=scheduler,
                      checkpoint_dir=cfg.checkpoint_dir, resume=cfg.resume,
                      progress=cfg.progress, amp=cfg.amp, on_epoch_end=cfg.on_epoch_end,
                      capture=cfg.capture, loggers=loggers, log_every=cfg.log_every,
                      input_dtype=None, class_axis=-1, perplexity=True)
    if cfg.on_epoch_end is not None:
        for restored in trainer.history:
            cfg.on_epoch_end(restored)
    return trainer, trainer.fit(stop_after=cfg.stop_after)
