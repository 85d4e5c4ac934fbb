"""Character-level text data: the corpus, the split, the vocabulary and the windows."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import netcl.data._text as text_module
from netcl.data import CharDataset, CharVocab, DataLoader, python_help_text, split_text


def test_docstring_examples() -> None:
    result = doctest.testmod(text_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_corpus_is_deterministic_and_large() -> None:
    text = python_help_text()
    assert text == python_help_text()
    assert len(text) > 200_000
    vocab = CharVocab(text)
    assert 60 <= len(vocab) <= 200 and "\n" in vocab and " " in vocab


def test_split_keeps_every_character_and_holds_out_the_end() -> None:
    text = "".join(chr(97 + i % 26) for i in range(1003))
    train, val = split_text(text, 0.1)
    assert train + val == text and len(val) == 100
    assert split_text(text, 0.0) == (text, "")
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="val_fraction"):
            split_text(text, bad)


def test_vocab_round_trip_and_errors() -> None:
    text = "the quick brown fox\njumps"
    vocab = CharVocab(text)
    assert list(vocab.chars) == sorted(set(text))
    tokens = vocab.encode(text)
    assert tokens.dtype == np.int32 and vocab.decode(tokens) == text
    with pytest.raises(ValueError, match="'Z' at position 3"):
        vocab.encode("theZ")
    with pytest.raises(IndexError, match="token 99"):
        vocab.decode([0, 99])
    with pytest.raises(ValueError, match="empty"):
        CharVocab("")


@pytest.mark.parametrize(("n", "context", "stride"), [(101, 7, None), (33, 5, 1), (9, 8, 3)])
def test_windows_match_slices(n: int, context: int, stride: int | None) -> None:
    tokens = (np.arange(n) * 7 % 13).astype(np.int32)
    ds = CharDataset(tokens, context, stride)
    step = context if stride is None else stride
    assert len(ds) == (n - context - 1) // step + 1
    idx = np.arange(len(ds))[::-1].copy()
    xb, yb = ds.get_batch(idx)
    assert xb.shape == yb.shape == (len(ds), context)
    for row, i in enumerate(idx):
        x, y = ds[int(i)]
        s = int(i) * step
        np.testing.assert_array_equal(x, tokens[s:s + context])
        np.testing.assert_array_equal(y, tokens[s + 1:s + context + 1])
        np.testing.assert_array_equal(xb[row], x)
        np.testing.assert_array_equal(yb[row], y)
    # the last window ends inside the sequence
    assert (len(ds) - 1) * step + context + 1 <= n


def test_loader_batches_windows() -> None:
    ds = CharDataset(np.arange(50, dtype=np.int32), 4)
    batches = list(DataLoader(ds, batch_size=5, shuffle=True, seed=3))
    xs = np.concatenate([x for x, _ in batches])
    ys = np.concatenate([y for _, y in batches])
    assert xs.shape == (12, 4) and sorted(xs[:, 0].tolist()) == list(range(0, 48, 4))
    np.testing.assert_array_equal(ys, xs + 1)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="1-D integer"):
        CharDataset(np.zeros(10), 3)
    with pytest.raises(TypeError, match="1-D integer"):
        CharDataset(np.zeros((2, 10), np.int32), 3)
    with pytest.raises(ValueError, match="context must be an integer >= 1, got 0"):
        CharDataset(np.arange(10), 0)
    with pytest.raises(ValueError, match="stride"):
        CharDataset(np.arange(10), 3, stride=0)
    with pytest.raises(ValueError, match="needs 11 tokens, got 10"):
        CharDataset(np.arange(10), 10)
    ds = CharDataset(np.arange(10), 3)
    with pytest.raises(IndexError, match="out of range"):
        ds[3]
    with pytest.raises(IndexError, match="out of range"):
        ds.get_batch(np.array([0, 5]))
