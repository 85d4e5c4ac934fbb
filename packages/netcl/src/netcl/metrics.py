"""netcl.metrics: classification metrics and running averages, computed on the device.

Each metric is an accumulator: ``update(...)`` runs device ops only (no host read, no sync),
``compute()`` reads the final value back once, ``value()`` gives it as a device
:class:`~netcl.core.Tensor` instead, and ``reset()`` starts over. The functions
(:func:`accuracy`, :func:`confusion_matrix`, :func:`precision`, :func:`recall`,
:func:`f1_score`) are one ``update`` and ``value`` of the matching class, so they return device
tensors (as ``torchmetrics.functional`` does).

Predictions are either scores ``(N, C)`` (logits or probabilities; the class is their argmax)
or integer class indices ``(N,)``; targets are integer class indices ``(N,)``. Tensors may live
on any device (the metric's state goes where its first input is); NumPy arrays are uploaded to
the active device.

# NOTE [ Labels out of range without a sync ]
On an OpenCL device, a label outside ``[0, num_classes)`` cannot raise in ``update`` without a
host read per batch. Instead each metric with ``num_classes`` also counts, on the device, the
rows whose labels are in range; ``compute()`` compares that count with the rows it was given
and raises ``ValueError`` when some were not (``value()`` does not check).

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> from netcl import metrics
    >>> q = manager.default("cpu").queue
    >>> logits = Tensor.from_host(q, np.array([[2., 1, 0], [0, 3, 1], [1, 0, 2], [0, 1, 0]]))
    >>> target = Tensor.from_host(q, np.array([0, 1, 1, 2]))
    >>> float(metrics.accuracy(logits, target).to_host())
    0.5
    >>> f1 = metrics.F1Score(num_classes=3, average="macro")
    >>> f1.update(logits, target)
    >>> f1.compute()  # per class 1, 0.5 and 0
    0.5
    >>> metrics.confusion_matrix(logits, target, num_classes=3).to_host().tolist()
    [[1, 0, 0], [0, 1, 1], [0, 1, 0]]
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

import netcl.ops as ops
from netcl.core.device import get_active_device
from netcl.core.tensor import Tensor

__all__ = [
    "Accuracy",
    "ConfusionMatrix",
    "F1Score",
    "Mean",
    "Metric",
    "Precision",
    "Recall",
    "RunningMean",
    "accuracy",
    "confusion_matrix",
    "f1_score",
    "precision",
    "recall",
]

_AVERAGES = ("micro", "macro", "weighted", "none", "binary")
_INTEGER = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _tensor(x: Any, what: str, queue: Any = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return Tensor.from_host(queue if queue is not None else get_active_device().queue, x)
    raise TypeError(f"{what} must be a netcl Tensor or a NumPy array, got {type(x).__name__}")


def _check_count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _inputs(op: str, input: Any, target: Any) -> tuple[Tensor, Tensor]:
    """(predictions or scores, int64 targets), their shapes checked."""
    x = _tensor(input, f"{op}: input")
    t = _tensor(target, f"{op}: target", x.queue)
    if t.ndim != 1 or str(t.dtype) not in _INTEGER:
        raise TypeError(f"{op}: target must be 1-D integer class indices, got shape {t.shape} "
                        f"dtype {t.dtype}")
    if x.ndim not in (1, 2) or (x.ndim == 1 and str(x.dtype) not in _INTEGER):
        raise ValueError(f"{op}: input must be scores (N, C) or integer class indices (N,), "
                         f"got shape {x.shape} dtype {x.dtype}")
    if x.shape[0] != t.shape[0]:
        raise ValueError(f"{op}: input and target must have the same number of rows, got "
                         f"input {x.shape} and target {t.shape}")
    if str(t.dtype) != "int64":
        t = ops.cast(t, "int64")
    return x, t


def _predicted(x: Tensor) -> Tensor:
    """Class indices (int64): the argmax of scores, or the indices themselves."""
    if x.ndim == 2:
        return ops.argmax(x, axis=1)
    return x if str(x.dtype) == "int64" else ops.cast(x, "int64")


def _in_range(labels: Tensor, num_classes: int) -> Tensor:
    """How many of ``labels`` lie in ``[0, num_classes)``: an int64 device scalar."""
    ok = ops.mul(ops.ge(labels, 0), ops.lt(labels, num_classes))
    return ops.sum(ops.cast(ok, "int32"))


def _accumulate(total: Tensor | None, value: Tensor) -> Tensor:
    return value if total is None else ops.add(total, value)


class Metric(ABC):
    """Base class: ``update`` on the device, ``compute`` reads back once, ``reset``."""

    @abstractmethod
    def update(self, *args: Any, **kwargs: Any) -> None:
        """Add a batch (device work only)."""

    @abstractmethod
    def value(self) -> Tensor:
        """The metric as a device tensor (no host read)."""

    @abstractmethod
    def reset(self) -> None:
        """Forget every batch."""

    def compute(self) -> Any:
        """The metric read back: a float (or a NumPy array for per-class values)."""
        out = self.value().to_host()
        return float(out) if out.ndim == 0 else np.asarray(out, dtype=np.float64)

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                             if not k.startswith("_"))
        return f"{type(self).__name__}({settings})"


class _Counted(Metric):
    """A metric over rows of (input, target): keeps the row count and the in-range check."""

    def __init__(self, num_classes: int | None) -> None:
        self.num_classes = (None if num_classes is None
                            else _check_count(f"{type(self).__name__}: num_classes",
                                              num_classes, 1))
        self._seen = 0
        self._valid: Tensor | None = None

    def reset(self) -> None:
        self._seen = 0
        self._valid = None
        self._clear()

    @abstractmethod
    def _clear(self) -> None:
        """Drop the subclass's accumulators (``reset`` does the counts)."""

    def _count(self, rows: int, *labels: Tensor) -> None:
        self._seen += rows
        if self.num_classes is not None:
            for lab in labels:
                self._valid = _accumulate(self._valid, _in_range(lab, self.num_classes))

    def _empty(self) -> ValueError:
        return ValueError(f"{type(self).__name__}: compute() before any update()")

    def compute(self) -> Any:
        if self._seen == 0:
            raise self._empty()
        out = self.value()
        if self._valid is not None:
            valid, result = _read(self._valid, out)
            expected = self._seen * self._labels_per_row()
            if int(valid) != expected:
                raise ValueError(f"{type(self).__name__}: {expected - int(valid)} labels were "
                                 f"outside [0, {self.num_classes}) (num_classes="
                                 f"{self.num_classes})")
        else:
            result = out.to_host()
        return float(result) if np.ndim(result) == 0 else np.asarray(result)

    def _labels_per_row(self) -> int:
        return 1


def _read(*tensors: Tensor) -> list[np.ndarray[Any, Any]]:
    return [np.asarray(t.to_host()) for t in tensors]


class Accuracy(_Counted):
    """Fraction of rows whose prediction is the target (``top_k``: among the ``k`` highest
    scores).

    Args:
        top_k: count a row as correct when fewer than ``top_k`` classes score strictly higher
            than its target class (so a tie with the target counts as correct); needs scores.
        num_classes: when given, ``compute()`` checks every target lies in
            ``[0, num_classes)`` (NOTE [ Labels out of range without a sync ]).

    Raises:
        TypeError: target is not integer, or ``top_k`` > 1 with class indices as input.
        ValueError: shapes do not match, or ``top_k`` exceeds the number of classes.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> acc = Accuracy(top_k=2)
        >>> acc.update(Tensor.from_host(q, np.array([[0.1, 0.5, 0.4], [0.8, 0.15, 0.05]])),
        ...            Tensor.from_host(q, np.array([2, 2])))
        >>> acc.compute()
        0.5
    """

    def __init__(self, top_k: int = 1, num_classes: int | None = None) -> None:
        super().__init__(num_classes)
        self.top_k = _check_count("Accuracy: top_k", top_k, 1)
        self._correct: Tensor | None = None

    def _clear(self) -> None:
        self._correct = None

    def update(self, input: Any, target: Any) -> None:
        """Count the correct rows of one batch (device ops only)."""
        x, t = _inputs("Accuracy", input, target)
        self._correct = _accumulate(self._correct, _hits(x, t, self.top_k))
        self._count(t.shape[0], t)

    def value(self) -> Tensor:
        if self._correct is None:
            raise self._empty()
        return ops.div(self._correct, float(self._seen))


def _hits(x: Tensor, t: Tensor, top_k: int) -> Tensor:
    if top_k == 1:
        return ops.sum(ops.cast(ops.eq(_predicted(x), t), "int32"))
    if x.ndim != 2:
        raise TypeError(f"Accuracy: top_k={top_k} needs scores (N, C), got class indices of "
                        f"shape {x.shape}")
    if top_k > x.shape[1]:
        raise ValueError(f"Accuracy: top_k={top_k} exceeds the {x.shape[1]} classes")
    # a target outside the classes would read past the row: clamp it (it is counted invalid)
    safe = ops.clamp(t, 0, x.shape[1] - 1)
    own = ops.gather(x, 1, ops.reshape(safe, (t.shape[0], 1)))
    higher = ops.sum(ops.cast(ops.gt(x, own), "int32"), axis=1)
    return ops.sum(ops.cast(ops.lt(higher, top_k), "int32"))


class ConfusionMatrix(_Counted):
    """``C x C`` counts: row = target class, column = predicted class (scikit-learn's layout).

    Built per batch as ``one_hot(target)^T @ one_hot(pred)`` (a matmul, exact in float32 for
    batches under 2**24 rows) and accumulated in int64 on the device.

    Args:
        num_classes: the number of classes ``C``.
        normalize: ``None`` (counts), ``"true"`` (rows sum to 1), ``"pred"`` (columns) or
            ``"all"``, as ``sklearn.metrics.confusion_matrix``; a zero sum gives 0.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> cm = ConfusionMatrix(3)
        >>> pred, target = np.array([0, 2, 2]), np.array([0, 1, 2])
        >>> cm.update(Tensor.from_host(q, pred), Tensor.from_host(q, target))
        >>> cm.compute().tolist()
        [[1, 0, 0], [0, 0, 1], [0, 0, 1]]
    """

    def __init__(self, num_classes: int, normalize: str | None = None) -> None:
        super().__init__(_check_count("ConfusionMatrix: num_classes", num_classes, 1))
        if normalize not in (None, "true", "pred", "all"):
            raise ValueError("ConfusionMatrix: normalize must be None, 'true', 'pred' or "
                             f"'all', got {normalize!r}")
        self.normalize = normalize
        self._matrix: Tensor | None = None

    def _clear(self) -> None:
        self._matrix = None

    def update(self, input: Any, target: Any) -> None:
        """Add one batch's counts (device ops only)."""
        x, t = _inputs("ConfusionMatrix", input, target)
        p = _predicted(x)
        self._matrix = _accumulate(self._matrix, _counts(p, t, self._classes()))
        self._count(t.shape[0], t, p)

    def _classes(self) -> int:
        return int(self.num_classes or 0)

    def _labels_per_row(self) -> int:
        return 2

    def value(self) -> Tensor:
        if self._matrix is None:
            raise self._empty()
        m = self._matrix
        if self.normalize is None:
            return m
        axis = {"true": 1, "pred": 0, "all": None}[self.normalize]
        total = ops.sum(m, axis=axis, keepdims=axis is not None)
        return ops.div(m, ops.maximum(total, 1))


def _counts(p: Tensor, t: Tensor, classes: int) -> Tensor:
    """This batch's confusion matrix (int64); labels out of range give zero rows."""
    if p.shape[0] == 0:
        return ops.zeros(t.queue, (classes, classes), "int64")
    return ops.cast(ops.matmul(_one_hot(t, classes), _one_hot(p, classes), transpose_a=True),
                    "int64")


def _one_hot(labels: Tensor, classes: int) -> Tensor:
    # NumPy's one_hot raises on a label out of range; OpenCL's writes a zero row. Mask such
    # labels to -1 -> 0 rows on both, and let compute() report them.
    ok = ops.mul(ops.ge(labels, 0), ops.lt(labels, classes))
    safe = ops.where(ok, labels, 0)
    return ops.mul(ops.one_hot(safe, classes, dtype="float32"),
                   ops.reshape(ops.cast(ok, "float32"), (labels.shape[0], 1)))


class _Scores(_Counted):
    """Precision, recall and F1 from per-class true positives, predicted and true counts,
    accumulated on the device (three int64 vectors of ``num_classes``)."""

    _name = ""

    def __init__(self, num_classes: int, average: str | None = "macro",
                 zero_division: float = 0.0) -> None:
        name = type(self).__name__
        super().__init__(_check_count(f"{name}: num_classes", num_classes, 1))
        if average is not None and average not in _AVERAGES:
            raise ValueError(f"{name}: average must be one of {_AVERAGES} or None, got "
                             f"{average!r}")
        if average == "binary" and num_classes != 2:
            raise ValueError(f"{name}: average='binary' needs num_classes=2, got {num_classes}")
        if isinstance(zero_division, bool) or not isinstance(zero_division, numbers.Real):
            raise TypeError(f"{name}: zero_division must be a number, got "
                            f"{type(zero_division).__name__}")
        self.average: str = "none" if average is None else average
        self.zero_division: float = float(zero_division)
        self._stats: tuple[Tensor, Tensor, Tensor] | None = None

    def _clear(self) -> None:
        self._stats = None

    def _labels_per_row(self) -> int:
        return 2

    def update(self, input: Any, target: Any) -> None:
        """Add one batch's per-class counts (device ops only)."""
        x, t = _inputs(type(self).__name__, input, target)
        p = _predicted(x)
        classes = int(self.num_classes or 0)
        oh_t, oh_p = _one_hot(t, classes), _one_hot(p, classes)
        batch = tuple(ops.cast(ops.sum(v, axis=0), "int64")
                      for v in (ops.mul(oh_t, oh_p), oh_p, oh_t))
        self._stats = batch if self._stats is None else tuple(  # type: ignore[assignment]
            ops.add(a, b) for a, b in zip(self._stats, batch))
        self._count(t.shape[0], t, p)

    def _ratio(self, tp: Tensor, pred: Tensor, true: Tensor) -> Tensor:
        """The score from (true positives, predicted, true) counts, elementwise."""
        if self._name == "precision":
            num, den = tp, pred
        elif self._name == "recall":
            num, den = tp, true
        else:
            num, den = ops.mul(tp, 2), ops.add(pred, true)
        return ops.where(ops.gt(den, 0), ops.div(num, ops.maximum(den, 1)),
                         self.zero_division)

    def value(self) -> Tensor:
        if self._stats is None:
            raise self._empty()
        tp, pred, true = self._stats
        if self.average == "micro":
            return self._ratio(*(ops.sum(v) for v in self._stats))
        per_class = self._ratio(tp, pred, true)
        if self.average == "none":
            return per_class
        if self.average == "binary":
            return ops.getitem(per_class, 1)
        if self.average == "macro":
            return ops.mean(per_class)
        support = ops.cast(true, "float32")  # weighted: by each class's true count
        return ops.div(ops.sum(ops.mul(per_class, support)),
                       ops.maximum(ops.sum(support), 1.0))


_SCORES_DOC = """{title}

    ``{formula}`` per class, where the counts come from the rows given so far; a class whose
    denominator is 0 scores ``zero_division``. Averages follow ``sklearn.metrics.{sk}`` with
    ``labels=range(num_classes)``: ``"macro"`` (unweighted mean over all classes),
    ``"weighted"`` (by each class's true count), ``"micro"`` (from the summed counts; for
    single-label data it equals the accuracy), ``"binary"`` (class 1 of 2) and ``"none"`` or
    ``None`` (per class, ``compute()`` gives an array).

    Args:
        num_classes: the number of classes ``C``.
        average: see above.
        zero_division: the score of a class whose denominator is 0.

    Raises:
        TypeError: target is not integer.
        ValueError: shapes do not match, a bad ``average``; ``compute()``: no update yet, or
            labels out of range (NOTE [ Labels out of range without a sync ]).
"""


class Precision(_Scores):
    _name = "precision"


class Recall(_Scores):
    _name = "recall"


class F1Score(_Scores):
    _name = "f1"


Precision.__doc__ = _SCORES_DOC.format(title="Precision: true positives over predicted.",
                                       formula="tp / (tp + fp)", sk="precision_score")
Recall.__doc__ = _SCORES_DOC.format(title="Recall: true positives over true.",
                                    formula="tp / (tp + fn)", sk="recall_score")
F1Score.__doc__ = _SCORES_DOC.format(title="F1: the harmonic mean of precision and recall.",
                                     formula="2 tp / (2 tp + fp + fn)", sk="f1_score")


class Mean(Metric):
    """The (weighted) mean of everything given to :meth:`update`.

    Tensor values are summed on the device in float32 with Kahan compensation (so a long run
    of small losses keeps its digits); Python numbers are summed on the host.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> m = Mean()
        >>> m.update(Tensor.from_host(q, np.array([1.0, 2.0, 3.0])))
        >>> m.update(10.0, weight=3)
        >>> m.compute()
        6.0
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._sum: Tensor | None = None
        self._carry: Tensor | None = None
        self._host_sum = 0.0
        self._weight = 0.0

    def update(self, value: Any, weight: float = 1.0) -> None:
        """Add ``value`` (a Tensor of any shape: each element counts, a NumPy array, or a
        number) with ``weight`` per element."""
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or weight < 0:
            raise ValueError(f"Mean: weight must be a number >= 0, got {weight!r}")
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            self._host_sum += float(value) * float(weight)
            self._weight += float(weight)
            return
        v = _tensor(value, "Mean: value")
        if v.dtype != "float32":
            v = ops.cast(v, "float32")
        term = ops.sum(v) if weight == 1 else ops.mul(ops.sum(v), float(weight))
        self._weight += float(weight) * v.size
        if self._sum is None or self._carry is None:
            self._sum, self._carry = term, ops.zeros(v.queue, (), "float32")
            return
        y = ops.sub(term, self._carry)  # Kahan: the carry holds what the last add lost
        total = ops.add(self._sum, y)
        self._carry = ops.sub(ops.sub(total, self._sum), y)
        self._sum = total

    def value(self) -> Tensor:
        if self._weight == 0:
            raise ValueError("Mean: compute() before any update() with a weight > 0")
        if self._sum is None:
            q = get_active_device().queue
            return Tensor.from_host(q, np.float32(self._host_sum / self._weight))
        return ops.div(ops.add(self._sum, self._host_sum), self._weight)


class RunningMean(Metric):
    """An exponential moving average: ``avg = momentum * avg + (1 - momentum) * value``,
    corrected for its zero start (divided by ``1 - momentum ** n`` after ``n`` updates, as
    Adam's moments), so the first value is returned as it is.

    Args:
        momentum: weight of the past, in ``[0, 1)``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> r = RunningMean(momentum=0.5)
        >>> for v in (4.0, 2.0):
        ...     r.update(Tensor.from_host(q, np.float32(v)))
        >>> round(r.compute(), 6)  # (0.5 * 0.5 * 4 + 0.5 * 2) / (1 - 0.25)
        2.666667
    """

    def __init__(self, momentum: float = 0.9) -> None:
        if isinstance(momentum, bool) or not isinstance(momentum, numbers.Real) \
                or not 0.0 <= momentum < 1.0:
            raise ValueError(f"RunningMean: momentum must be in [0, 1), got {momentum!r}")
        self.momentum: float = float(momentum)
        self.reset()

    def reset(self) -> None:
        self._avg: Tensor | float = 0.0
        self._n = 0

    def update(self, value: Any) -> None:
        """Fold in ``value`` (a Tensor or array: its mean, or a number)."""
        m = self.momentum
        self._n += 1
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            new = float(value) * (1.0 - m)
            self._avg = (ops.add(ops.mul(self._avg, m), new) if isinstance(self._avg, Tensor)
                         else self._avg * m + new)
            return
        v = _tensor(value, "RunningMean: value")
        mean = ops.mean(v if v.dtype == "float32" else ops.cast(v, "float32"))
        new_t = ops.mul(mean, 1.0 - m)
        self._avg = ops.add(new_t, ops.mul(self._avg, m) if isinstance(self._avg, Tensor)
                            else self._avg * m)

    def value(self) -> Tensor:
        if self._n == 0:
            raise ValueError("RunningMean: compute() before any update()")
        debias = 1.0 - self.momentum ** self._n
        if isinstance(self._avg, Tensor):
            return ops.div(self._avg, debias)
        return Tensor.from_host(get_active_device().queue, np.float32(self._avg / debias))


def accuracy(input: Any, target: Any, top_k: int = 1) -> Tensor:
    """Fraction of correct rows as a float32 device scalar (see :class:`Accuracy`)."""
    m = Accuracy(top_k=top_k)
    m.update(input, target)
    return m.value()


def confusion_matrix(input: Any, target: Any, num_classes: int,
                     normalize: str | None = None) -> Tensor:
    """The ``(C, C)`` confusion matrix as a device tensor (see :class:`ConfusionMatrix`)."""
    m = ConfusionMatrix(num_classes, normalize=normalize)
    m.update(input, target)
    return m.value()


def precision(input: Any, target: Any, num_classes: int, average: str | None = "macro",
              zero_division: float = 0.0) -> Tensor:
    """Precision as a device tensor (see :class:`Precision`)."""
    m = Precision(num_classes, average=average, zero_division=zero_division)
    m.update(input, target)
    return m.value()


def recall(input: Any, target: Any, num_classes: int, average: str | None = "macro",
           zero_division: float = 0.0) -> Tensor:
    """Recall as a device tensor (see :class:`Recall`)."""
    m = Recall(num_classes, average=average, zero_division=zero_division)
    m.update(input, target)
    return m.value()


def f1_score(input: Any, target: Any, num_classes: int, average: str | None = "macro",
             zero_division: float = 0.0) -> Tensor:
    """F1 score as a device tensor (see :class:`F1Score`)."""
    m = F1Score(num_classes, average=average, zero_division=zero_division)
    m.update(input, target)
    return m.value()
