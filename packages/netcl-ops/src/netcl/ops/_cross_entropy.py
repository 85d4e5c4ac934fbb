"""``softmax_cross_entropy``: log-softmax, the label gather and the loss reduction fused
(NOTE [ Several rows per work-group ] in netcl.ops._softmax_rows): two launches on OpenCL
where ``log_softmax`` + ``nll_gather`` + ``sum`` (+ the count of kept rows) took four or more.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netcl.core.kernels.primitives import launch_values
from netcl.core.recording import check_flag
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty, same_device
from ._dtype_policy import require_float
from ._elementwise_binary import cast, div, ne
from ._launch import device_buffer, index_defs
from ._reduce import sum as _sum
from ._softmax import (
    _check_labels,
    _most_lanes,
    log_softmax,
    nll_gather,
    softmax_family,
)
from ._softmax_rows import VPL4, mrow_plan
from ._split_sync import partials, ptx_fence, tickets

__all__ = ["REDUCTIONS", "softmax_cross_entropy"]

REDUCTIONS = ("mean", "sum", "none")
_SUM_MODES = {"none": 0, "sum": 1, "mean": 2}  # xent_sum's ``mode``


def softmax_cross_entropy(logits: Tensor, labels: Tensor, ignore_index: int = -100,
                          reduction: str = "mean", keep_logp: bool = False,
                          fused: bool | None = None, merge: bool = True
                          ) -> tuple[Tensor, Tensor | None]:
    """Cross entropy of (N, C) ``logits`` against (N,) class ``labels``, and the
    log-probabilities if ``keep_logp`` (a backward's input), as ``(loss, logp or None)``.

    The loss per row is ``-log_softmax(logits)[i, labels[i]]``, 0 where ``labels[i] ==
    ignore_index``; ``reduction`` ``"mean"`` divides their sum by the number of rows not
    ignored (NaN when there are none, as PyTorch), ``"sum"`` sums them, ``"none"`` returns
    them, (N,). The values are those of ``log_softmax`` + :func:`nll_gather` + ``sum``; on
    OpenCL one row kernel (``xent_row``) and one work-group summing (``xent_sum``) compute
    them in one launch (the last work-group merges the groups' partials), or ``merge=False``
    in two (``xent_row``, then one work-group of ``xent_sum``); ``fused=False`` forces that
    composition instead (benchmarks; rows longer than the row kernel holds take it too).

    Raises:
        TypeError: integer ``logits`` or float labels.
        ValueError: shapes other than (N, C) and (N,), an unknown ``reduction``, or a label
            outside ``[0, C)`` that is not ``ignore_index`` (on every backend).

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.log(np.array([[0.5, 0.5], [0.25, 0.75]])))
        >>> y = Tensor.from_host(q, np.array([1, 0]))
        >>> loss, _ = softmax_cross_entropy(x, y)
        >>> round(float(loss.to_host()), 4)  # (log 2 + log 4) / 2
        1.0397
    """
    op = "softmax_cross_entropy"
    logits = check_tensor(op, logits, "logits")
    labels = check_tensor(op, labels, "labels")
    require_float(op, logits)
    if labels.dtype not in ("int32", "int64"):
        raise TypeError(f"{op}: labels must be int32 or int64, got {labels.dtype}")
    if logits.ndim != 2 or labels.shape != logits.shape[:1]:
        raise ValueError(f"{op}: expected logits (N, C) and labels (N,), got {logits.shape} "
                         f"and {labels.shape}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    same_device(op, logits, labels)
    N, C = logits.shape
    if logits.array is None and N and C and fused is not False:
        kernels = softmax_family(logits.queue.context, "nll_k", logits.dtype,
                                 index_defs(logits.offset + logits.size,
                                            labels.offset + N)[1] is np.int64,
                                 0, labels.dtype, ptx_fence(logits.queue.device)).kernels
        most = _most_lanes(kernels["xent_row"], logits.queue.device)
        if 4 * VPL4 * most >= C:
            return _fused(logits, labels, ignore_index, reduction, keep_logp, kernels, most,
                          merge)
    logp = log_softmax(logits, axis=1)
    per_row = nll_gather(logp, labels, ignore_index)
    if reduction == "none":
        loss = per_row
    elif reduction == "sum":
        loss = _sum(per_row)
    else:
        loss = div(_sum(per_row), _sum(cast(ne(labels, ignore_index), logits.dtype)))
    return loss, (logp if keep_logp else None)


def _fused(logits: Tensor, labels: Tensor, ignore_index: int, reduction: str, keep_logp: bool,
           kernels: dict[str, Any], most: int, merge: bool) -> tuple[Tensor, Tensor | None]:
    """``xent_row`` merging (``merge``), or ``xent_row`` then ``xent_sum`` (NOTE [ Several rows
    per work-group ])."""
    q = logits.queue
    N, C = logits.shape
    _, idx = index_defs(logits.offset + logits.size, labels.offset + N)
    W, per, vec = mrow_plan(C, logits.offset, most)
    rows = empty(q, (N,), logits.dtype)
    logp = empty(q, (N, C), logits.dtype) if keep_logp else None
    loss = rows if reduction == "none" else empty(q, (), logits.dtype)
    bad = empty(q, (1,), "int32")  # written whole by the merge or xent_sum
    groups = -(-N // per)
    mode = _SUM_MODES[reduction]
    scratch = [None, None, None, None]
    if merge:
        acc = 8 if logits.dtype == "float64" else 4
        scratch = [partials(q, 3 * acc * groups), tickets(q, 1), device_buffer(loss),
                   device_buffer(bad)]
    launch_values(q, kernels["xent_row"], (groups * W * per,), (W * per,),
                  [device_buffer(rows), None if logp is None else device_buffer(logp),
                   device_buffer(logits), idx(logits.offset), device_buffer(labels),
                   idx(labels.offset), np.int64(ignore_index), np.int32(keep_logp), idx(C),
                   idx(N), np.int32(W), np.int32(vec), np.int32(merge), np.int32(mode),
                   *scratch])
    if merge:
        check_flag(bad, lambda: _check_labels(labels.to_host().astype(np.int64), C,
                                              ignore_index, "softmax_cross_entropy"))
        return loss, logp
    # one work-group of the most lanes: few loads in a row per lane (N = 4096: 4)
    lanes = _most_lanes(kernels["xent_sum"], q.device)
    launch_values(q, kernels["xent_sum"], (lanes,), (lanes,),
                  [device_buffer(loss), device_buffer(rows), device_buffer(labels),
                   idx(labels.offset), idx(N), idx(C), np.int64(ignore_index),
                   np.int32(mode), device_buffer(bad)])
    # NOTE [ Out-of-range labels ] in netcl.ops._softmax
    check_flag(bad, lambda: _check_labels(labels.to_host().astype(np.int64), C, ignore_index,
                                          "softmax_cross_entropy"))
    return loss, logp
