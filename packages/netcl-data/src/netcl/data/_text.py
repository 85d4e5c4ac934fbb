"""Character-level text data: a vocabulary, a dataset of (context, next characters) windows,
and a corpus that ships with every CPython (nothing to download).

# NOTE [ The built-in corpus ]
# ``pydoc_data.topics`` holds the text of ``help()``'s topics (the language reference's
# statements, operators, data model...): about 465,000 characters of English prose with code
# examples on CPython 3.11 (103 distinct characters), installed with the standard library on
# every platform (Debian-style ``python3-minimal`` splits excepted), read in 0.04 s, and fixed
# for a given Python version, so a split and its figures repeat. The license texts are too
# short (~14 KB) and the modules' docstrings depend on which packages are installed. The topics
# are joined in sorted key order, so the text does not depend on dict order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from ._datasets import _check_batch_indices, _check_index

__all__ = ["CharDataset", "CharVocab", "python_help_text", "split_text"]

TokenArray = npt.NDArray[np.int32]


def python_help_text() -> str:
    """The text of every ``help()`` topic of this Python (``pydoc_data.topics``), joined in
    sorted topic order (NOTE [ The built-in corpus ]).

    Raises:
        RuntimeError: this Python ships without ``pydoc_data`` (some distributions split it
            off); the message says what to install or to give a text file instead.

    Examples:
        >>> text = python_help_text()
        >>> len(text) > 100_000, "assert" in text
        (True, True)
    """
    try:  # imported here: 0.04 s that only this corpus needs
        from pydoc_data.topics import topics
    except ImportError as err:
        raise RuntimeError(
            "python_help_text: this Python has no pydoc_data module (the text of help() "
            "topics); install your distribution's full standard library (e.g. Debian's "
            "libpython3-stdlib) or train on a text file of your own") from err
    return "\n".join(topics[key] for key in sorted(topics))


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """``(train, validation)``: the first ``1 - val_fraction`` of ``text`` and the rest (the
    last part is held out, so the split needs no seed and windows never straddle it).

    Raises:
        ValueError: ``val_fraction`` outside ``[0, 1)``.

    Examples:
        >>> split_text("abcdefghij", 0.2)
        ('abcdefgh', 'ij')
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"split_text: val_fraction must be in [0, 1), got {val_fraction!r}")
    cut = len(text) - round(len(text) * val_fraction)
    return text[:cut], text[cut:]


class CharVocab:
    """The sorted distinct characters of a text, each mapped to its index.

    Args:
        text: the characters the vocabulary holds (any iterable of one-character strings).

    Raises:
        ValueError: the text is empty.

    Examples:
        >>> vocab = CharVocab("hello")
        >>> vocab.chars, len(vocab)
        ('ehlo', 4)
        >>> vocab.encode("hole").tolist()
        [1, 3, 2, 0]
        >>> vocab.decode([2, 0, 2, 2])
        'lell'
    """

    def __init__(self, text: Iterable[str]) -> None:
        chars = "".join(sorted(set(text)))
        if not chars:
            raise ValueError("CharVocab: the text is empty; a vocabulary needs a character")
        self.chars = chars
        self._index = {c: i for i, c in enumerate(chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def __contains__(self, char: object) -> bool:
        return char in self._index

    def encode(self, text: str) -> TokenArray:
        """``text`` as an int32 array of indices.

        Raises:
            ValueError: a character the vocabulary lacks (named, with its position).
        """
        try:
            return np.fromiter((self._index[c] for c in text), np.int32, len(text))
        except KeyError:
            pos = next(i for i, c in enumerate(text) if c not in self._index)
            raise ValueError(f"CharVocab.encode: character {text[pos]!r} at position {pos} "
                             f"is not in the vocabulary of {len(self)} characters") from None

    def decode(self, tokens: Iterable[int] | npt.NDArray[Any]) -> str:
        """The characters at ``tokens``.

        Raises:
            IndexError: a token outside ``[0, len(vocab))``.
        """
        out = []
        for t in np.asarray(tokens).reshape(-1).tolist():
            if not 0 <= t < len(self.chars):
                raise IndexError(f"CharVocab.decode: token {t} is out of range for a "
                                 f"vocabulary of {len(self.chars)} characters")
            out.append(self.chars[t])
        return "".join(out)


class CharDataset:
    """Windows of a token sequence: item ``i`` is ``(x, y)`` with
    ``x = tokens[s : s + context]`` and ``y = tokens[s + 1 : s + context + 1]`` (the next
    character at every position), ``s = i * stride``.

    With the default ``stride = context`` the windows tile the text without overlap (an epoch
    sees each character once as a target); ``stride=1`` gives every window. Batches are
    gathered in one fancy index (``get_batch``), which :class:`~netcl.data.DataLoader` uses.

    Args:
        tokens: a 1-D integer array (e.g. :meth:`CharVocab.encode`).
        context: the window length.
        stride: how far each window starts after the previous one.

    Raises:
        TypeError: ``tokens`` is not a 1-D integer array.
        ValueError: ``context`` or ``stride`` below 1, or fewer than ``context + 1`` tokens.

    Examples:
        >>> ds = CharDataset(np.arange(10), context=4)
        >>> len(ds)
        2
        >>> x, y = ds[1]
        >>> x.tolist(), y.tolist()
        ([4, 5, 6, 7], [5, 6, 7, 8])
        >>> xb, yb = ds.get_batch(np.array([1, 0]))
        >>> xb.shape, yb[1].tolist()
        ((2, 4), [1, 2, 3, 4])
    """

    def __init__(self, tokens: npt.NDArray[Any], context: int, stride: int | None = None
                 ) -> None:
        arr = np.asarray(tokens)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise TypeError(f"CharDataset: tokens must be a 1-D integer array, got shape "
                            f"{arr.shape} dtype {arr.dtype}")
        stride = context if stride is None else stride
        for name, value in (("context", context), ("stride", stride)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"CharDataset: {name} must be an integer >= 1, got {value!r}")
        if len(arr) < context + 1:
            raise ValueError(f"CharDataset: a window of context {context} needs "
                             f"{context + 1} tokens, got {len(arr)}")
        self.tokens = np.ascontiguousarray(arr)
        self.context, self.stride = context, stride
        self._offsets = np.arange(context + 1)

    def __len__(self) -> int:
        return (len(self.tokens) - self.context - 1) // self.stride + 1

    def __getitem__(self, index: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        s = _check_index("CharDataset", index, len(self)) * self.stride
        window = self.tokens[s:s + self.context + 1]
        return window[:-1], window[1:]

    def get_batch(self, indices: npt.ArrayLike) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """``(x, y)`` of shape ``(len(indices), context)`` each, in one gather."""
        idx = _check_batch_indices("CharDataset.get_batch", indices, len(self))
        windows = self.tokens[idx[:, None] * self.stride + self._offsets]
        return windows[:, :-1], windows[:, 1:]
