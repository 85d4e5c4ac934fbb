"""``rnn_scan`` / ``rnn_scan_backward``: the recurrence of an RNN, LSTM or GRU layer over a
whole sequence, forward and backward (the layers of :mod:`netcl.nn` differentiate through
these two).

# NOTE [ The recurrent scans ]
# A recurrent layer spends its time in the recurrence: the input projection ``x @ W_ih^T +
# b_ih`` of every time step is one GEMM before the scan (the caller's), and what is left is,
# per time step, ``h_prev @ W_hh^T`` and the gate math. So a scan is, per step, one GEMM
# written straight into a reused (B, G*H) buffer and ONE fused gate kernel that reads the
# step's rows of the projection, adds ``b_hh``, applies the gates and writes the new state
# into its row of the state buffer (no per-step allocation, view or host round trip: a
# captured step replays the same launches). The backward walks the steps in the opposite
# order with one fused kernel (the gates' derivatives, written into the step's rows of the
# projection's gradient) and one GEMM (``dgates @ W_hh``: the gradient reaching the previous
# state) per step, and computes ``dW_hh`` as ONE GEMM over all steps afterwards
# (``dgates^T @ h_prev`` of the whole sequence: the states are kept in one buffer whose rows
# ``h_prev`` of consecutive steps are consecutive) and ``db_hh`` as one column sum.
#
# Buffers (T steps, batch B, hidden H, G gates: RNN 1, LSTM 4 (i, f, g, o), GRU 3 (r, z, n)):
#   states (T + 1 [+ 1 for LSTM], B, H): the initial state and the state after each time
#     step. A forward scan keeps h0 in row 0 and h(t) in row t + 1; a reverse scan (the
#     second direction of a bidirectional layer, which runs t = T-1 .. 0) keeps h(t) in row t
#     and h0 in row T; either way the outputs are T consecutive rows in time order
#     (:func:`scan_rows`). An LSTM's last row is c_n, so that the one tensor the caller
#     differentiates carries every output: the gradient of row T + 1 is that of c_n.
#   cells (T + 1, B, H), LSTM only: the cell states, rows as for h.
#   gates (T, B, 4H), LSTM and GRU: what the backward needs of step t: LSTM the activated
#     gates i, f, g, o; GRU r, z, n and ``W_hn h + b_hn`` (the term r multiplies).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.tensor import Tensor, narrow_view, reshape

from ._common import check_tensor, empty, same_device
from ._elementwise_dispatch import host, np_results
from ._matmul import matmul
from ._matmul_launch import operand, run_gemm, select_gemm
from ._reduce import sum as reduce_sum
from ._rnn_scan_kernels import rnn_scan_family

__all__ = ["GATES", "rnn_scan", "rnn_scan_backward", "scan_rows"]

#: Gates per cell: the rows of ``W_hh`` are ``GATES[mode] * hidden_size``.
GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}

Saved = tuple[Tensor, Tensor | None, Tensor | None]


def scan_rows(steps: int, reverse: bool) -> tuple[int, int]:
    """``(first output row, row of h_n)`` of a scan's states (NOTE [ The recurrent scans ]).

    Examples:
        >>> scan_rows(5, False), scan_rows(5, True)
        ((1, 5), (0, 0))
    """
    return (0, 0) if reverse else (1, steps)


def _check(mode: str, xproj: Tensor, w_hh: Tensor, b_hh: Tensor | None, h0: Tensor,
           c0: Tensor | None) -> tuple[int, int, int, int]:
    op = "rnn_scan"
    if mode not in GATES:
        raise ValueError(f"{op}: mode must be one of {sorted(GATES)}, got {mode!r}")
    for name, t in (("xproj", xproj), ("w_hh", w_hh), ("h0", h0)):
        check_tensor(op, t, name)
    others = [t for t in (b_hh, c0) if t is not None]
    same_device(op, xproj, w_hh, h0, *others)
    dtypes = {t.dtype for t in (xproj, w_hh, h0, *others)}
    if len(dtypes) != 1 or xproj.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: every tensor must share one float dtype, got xproj "
                        f"{xproj.dtype}, w_hh {w_hh.dtype}, h0 {h0.dtype}"
                        + "".join(f", {t.dtype}" for t in others))
    gates = GATES[mode]
    if w_hh.ndim != 2 or w_hh.shape[0] != gates * w_hh.shape[1] or w_hh.shape[1] < 1:
        raise ValueError(f"{op}: {mode} needs w_hh of shape ({gates} * hidden, hidden), got "
                         f"{w_hh.shape}")
    hidden = w_hh.shape[1]
    if xproj.ndim != 3 or xproj.shape[2] != gates * hidden or xproj.shape[0] < 1:
        raise ValueError(f"{op}: xproj must be (steps >= 1, batch, {gates * hidden}) for w_hh "
                         f"{w_hh.shape}, got {xproj.shape}")
    steps, batch = xproj.shape[0], xproj.shape[1]
    if b_hh is not None and b_hh.shape != (gates * hidden,):
        raise ValueError(f"{op}: b_hh must have shape ({gates * hidden},), got {b_hh.shape}")
    if h0.shape != (batch, hidden):
        raise ValueError(f"{op}: h0 must have shape ({batch}, {hidden}), got {h0.shape}")
    if (mode == "lstm") != (c0 is not None):
        raise ValueError(f"{op}: c0 is required for lstm and only for lstm (mode {mode!r})")
    if c0 is not None and c0.shape != (batch, hidden):
        raise ValueError(f"{op}: c0 must have shape ({batch}, {hidden}), got {c0.shape}")
    return steps, batch, hidden, gates


def rnn_scan(mode: str, xproj: Tensor, w_hh: Tensor, b_hh: Tensor | None, h0: Tensor,
             c0: Tensor | None = None, reverse: bool = False) -> Saved:
    """Run a recurrent cell over a sequence whose input projection is already computed.

    Args:
        mode: ``"rnn_tanh"``, ``"rnn_relu"``, ``"lstm"`` or ``"gru"`` (PyTorch's formulas).
        xproj: ``(T, B, G * H)``: ``x @ W_ih^T + b_ih`` of every time step.
        w_hh: ``(G * H, H)``, PyTorch's ``weight_hh`` layout (gates stacked in its order).
        b_hh: ``(G * H,)`` or ``None``.
        h0: ``(B, H)``; c0: ``(B, H)`` for ``"lstm"`` (and only then).
        reverse: run ``t = T - 1 .. 0`` (the second direction of a bidirectional layer).

    Returns:
        ``(states, gates, cells)`` as NOTE [ The recurrent scans ] lays them out: the outputs
        are ``states[first:first + T]`` with ``first, last = scan_rows(T, reverse)``, ``h_n``
        is ``states[last]``, an LSTM's ``c_n`` is ``states[T + 1]``; ``gates`` and ``cells``
        (``None`` where the mode has none) are what :func:`rnn_scan_backward` needs.

    Raises:
        TypeError: non-Tensors, or dtypes that differ or are not float.
        ValueError: an unknown mode, shapes that do not fit together, c0 given or missing.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((3, 1, 1)))
        >>> w, h0 = Tensor.from_host(q, np.zeros((1, 1))), Tensor.from_host(q, np.zeros((1, 1)))
        >>> states, _, _ = rnn_scan("rnn_relu", x, w, None, h0)
        >>> states.to_host().ravel().tolist()  # h0, then one state per step
        [0.0, 1.0, 1.0, 1.0]
    """
    steps, batch, hidden, gates = _check(mode, xproj, w_hh, b_hh, h0, c0)
    if xproj.array is not None:
        return _np_forward(mode, xproj, w_hh, b_hh, h0, c0, reverse)
    return _cl_forward(mode, xproj, w_hh, b_hh, h0, c0, reverse, steps, batch, hidden, gates)


def rnn_scan_backward(mode: str, dstates: Tensor, w_hh: Tensor, has_bias: bool,
                      saved: Saved, reverse: bool = False
                      ) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor | None]:
    """The gradients of :func:`rnn_scan`'s inputs given that of its ``states``.

    Args:
        mode, w_hh, reverse: as given to :func:`rnn_scan`.
        dstates: the gradient of ``states`` (the row holding h0 is ignored).
        has_bias: whether the scan had a ``b_hh`` (its gradient is computed only then).
        saved: what :func:`rnn_scan` returned.

    Returns:
        ``(dxproj, dw_hh, db_hh, dh0, dc0)``; ``db_hh`` is ``None`` without a bias, ``dc0``
        outside ``"lstm"``.

    Raises:
        ValueError: ``dstates`` does not have the shape of the saved states.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((3, 1, 1)))
        >>> w, h0 = Tensor.from_host(q, np.ones((1, 1))), Tensor.from_host(q, np.zeros((1, 1)))
        >>> saved = rnn_scan("rnn_relu", x, w, None, h0)  # h = 1, 2, 3
        >>> g = Tensor.from_host(q, np.array([0.0, 0.0, 0.0, 1.0]).reshape(4, 1, 1))
        >>> dx, dw, _, dh0, _ = rnn_scan_backward("rnn_relu", g, w, False, saved)
        >>> dx.to_host().ravel().tolist(), dw.to_host().item(), dh0.to_host().item()
        ([1.0, 1.0, 1.0], 3.0, 1.0)
    """
    states = saved[0]
    if not isinstance(dstates, Tensor) or dstates.shape != states.shape:
        shape = getattr(dstates, "shape", type(dstates).__name__)
        raise ValueError(f"rnn_scan_backward: dstates must have the states' shape "
                         f"{states.shape}, got {shape}")
    if dstates.dtype != states.dtype:
        raise TypeError(f"rnn_scan_backward: dstates must be {states.dtype}, got "
                        f"{dstates.dtype}")
    if states.array is not None:
        return _np_backward(mode, dstates, w_hh, has_bias, saved, reverse)
    return _cl_backward(mode, dstates, w_hh, has_bias, saved, reverse)


# -- OpenCL ----------------------------------------------------------------------------------


def _rows(reverse: bool, t: int) -> tuple[int, int]:
    """(row of the state before time step t, row of the state after it)."""
    return (t + 1, t) if reverse else (t, t + 1)


def _copy(queue: Any, fam: Any, n: int, dst: Tensor, doff: int, a: Tensor | None, aoff: int,
          b: Tensor | None = None, boff: int = 0) -> None:
    """``dst[doff:doff+n] = a[aoff:] + b[boff:]`` (a missing operand is zero)."""
    fill = dst if a is None else a
    fam.launch(queue, n, dst.buffer, np.int32(dst.offset + doff), fill.buffer,
               np.int32(fill.offset + aoff), (fill if b is None else b).buffer,
               np.int32((fill if b is None else b).offset + boff), np.int32(a is not None),
               np.int32(b is not None), np.int32(n), kernel="rnn_copy")


def _cl_forward(mode: str, xp: Tensor, w: Tensor, b: Tensor | None, h0: Tensor,
                c0: Tensor | None, reverse: bool, steps: int, batch: int, hidden: int,
                gates: int) -> Saved:
    q, dt = xp.queue, xp.dtype
    for operand_ in (xp, w, h0, *(x for x in (b, c0) if x is not None)):
        operand_.wait()
    fam = rnn_scan_family(xp.context, dt)
    lstm = mode == "lstm"
    bh, gh = batch * hidden, gates * hidden
    states = empty(q, (steps + 1 + lstm, batch, hidden), dt)
    saved_gates = empty(q, (steps, batch, 4 * hidden), dt) if mode in ("lstm", "gru") else None
    cells = empty(q, (steps + 1, batch, hidden), dt) if lstm else None
    hh = empty(q, (batch, gh), dt)
    start = steps if reverse else 0
    _copy(q, fam, bh, states, start * bh, h0, 0)
    if cells is not None:
        _copy(q, fam, bh, cells, start * bh, c0, 0)
    config = select_gemm(q.device, batch, gh, hidden, dt)
    bias = xp if b is None else b
    common = (bias.buffer, np.int32(bias.offset), np.int32(b is not None))
    sizes = (np.int32(batch), np.int32(hidden))
    w_op, hh_op = operand(w, hidden), operand(hh, gh)
    kernel = {"lstm": "lstm_step", "gru": "gru_step"}.get(mode, "rnn_step")
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        prev, out = _rows(reverse, t)
        run_gemm(q, config, dt, operand(states, hidden, offset=prev * bh), w_op, hh_op, batch,
                 gh, hidden, trans_b=True)
        head = (xp.buffer, np.int32(xp.offset + t * batch * gh), hh.buffer, np.int32(hh.offset),
                *common)
        h_out = (states.buffer, np.int32(states.offset + out * bh))
        if cells is not None and saved_gates is not None:
            fam.launch(q, bh, *head, cells.buffer, np.int32(cells.offset + prev * bh),
                       cells.buffer, np.int32(cells.offset + out * bh), *h_out,
                       saved_gates.buffer, np.int32(saved_gates.offset + t * 4 * bh), *sizes,
                       kernel=kernel)
        elif saved_gates is not None:
            fam.launch(q, bh, *head, states.buffer, np.int32(states.offset + prev * bh),
                       *h_out, saved_gates.buffer, np.int32(saved_gates.offset + t * 4 * bh),
                       *sizes, kernel=kernel)
        else:
            fam.launch(q, bh, *head, *h_out, *sizes, np.int32(mode == "rnn_relu"),
                       kernel=kernel)
    if cells is not None:
        _copy(q, fam, bh, states, (steps + 1) * bh, cells, (0 if reverse else steps) * bh)
    return states, saved_gates, cells


def _cl_backward(mode: str, dstates: Tensor, w: Tensor, has_bias: bool, saved: Saved,
                 reverse: bool) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor | None]:
    states, gates_buf, cells = saved
    q, dt = states.queue, states.dtype
    dstates.wait()
    w.wait()
    steps, batch, hidden = states.shape[0] - 1 - (mode == "lstm"), states.shape[1], w.shape[1]
    gh = w.shape[0]
    bh = batch * hidden
    fam = rnn_scan_family(states.context, dt)
    dx = empty(q, (steps, batch, gh), dt)
    dhh = empty(q, (steps, batch, gh), dt) if mode == "gru" else dx
    rec, dh0 = empty(q, (batch, hidden), dt), empty(q, (batch, hidden), dt)
    carry = empty(q, (batch, hidden), dt) if mode in ("lstm", "gru") else None
    config = select_gemm(q.device, batch, hidden, gh, dt)
    w_op = operand(w, hidden)
    sizes = (np.int32(batch), np.int32(hidden))
    for s in range(steps):
        t = s if reverse else steps - 1 - s
        prev, out = _rows(reverse, t)
        first, last = s == 0, s == steps - 1
        head = (dstates.buffer, np.int32(dstates.offset + out * bh), np.int32(1), rec.buffer,
                np.int32(rec.offset), np.int32(not first))
        dx_at = (dx.buffer, np.int32(dx.offset + t * batch * gh))
        if mode == "lstm" and carry is not None and cells is not None and gates_buf is not None:
            dc_in = (dstates.buffer, np.int32(dstates.offset + (steps + 1) * bh)) if first \
                else (carry.buffer, np.int32(carry.offset))
            fam.launch(q, bh, *head, *dc_in, carry.buffer, np.int32(carry.offset),
                       gates_buf.buffer, np.int32(gates_buf.offset + t * 4 * bh),
                       cells.buffer, np.int32(cells.offset + prev * bh), cells.buffer,
                       np.int32(cells.offset + out * bh), *dx_at, *sizes,
                       kernel="lstm_step_back")
        elif mode == "gru" and carry is not None and gates_buf is not None:
            fam.launch(q, bh, *head, carry.buffer, np.int32(carry.offset), np.int32(not first),
                       gates_buf.buffer, np.int32(gates_buf.offset + t * 4 * bh),
                       states.buffer, np.int32(states.offset + prev * bh), *dx_at,
                       dhh.buffer, np.int32(dhh.offset + t * batch * gh), *sizes,
                       kernel="gru_step_back")
        else:
            fam.launch(q, bh, *head, states.buffer, np.int32(states.offset + out * bh), *dx_at,
                       *sizes, np.int32(mode == "rnn_relu"), kernel="rnn_step_back")
        run_gemm(q, config, dt, operand(dhh, gh, offset=t * batch * gh), w_op,
                 operand(dh0 if last else rec, hidden), batch, hidden, gh)
    dc0 = None
    if mode == "gru" and carry is not None:
        _copy(q, fam, bh, dh0, 0, dh0, 0, carry, 0)
    elif carry is not None:
        dc0 = carry
    return (dx, *_weight_grads(dhh, states, has_bias, reverse, steps, batch, hidden), dh0, dc0)


def _weight_grads(dhh: Tensor, states: Tensor, has_bias: bool, reverse: bool, steps: int,
                  batch: int, hidden: int) -> tuple[Tensor, Tensor | None]:
    """``dW_hh = dgates^T @ h_prev`` over every step at once, and ``db_hh``."""
    rows = steps * batch
    flat = reshape(dhh, (rows, dhh.shape[2]))
    h_prev = narrow_view(states, (1 if reverse else 0) * batch * hidden, (rows, hidden))
    dw = matmul(flat, h_prev, transpose_a=True)
    return dw, (reduce_sum(flat, axis=0) if has_bias else None)


# -- NumPy -----------------------------------------------------------------------------------


def _sig(x: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-x))


def _compute_type(dtype: Any) -> Any:
    return np.float64 if dtype == np.float64 else np.float32


def _np_scan(mode: str, reverse: bool, xp: Any, w: Any, b: Any, h0: Any, c0: Any
             ) -> tuple[Any, ...]:
    ct = _compute_type(xp.dtype)
    xp, w, h0 = xp.astype(ct, copy=False), w.astype(ct, copy=False), h0.astype(ct, copy=False)
    steps, batch, _ = xp.shape
    hidden = w.shape[1]
    lstm = mode == "lstm"
    states = np.empty((steps + 1 + lstm, batch, hidden), ct)
    gates = np.empty((steps, batch, 4 * hidden), ct)
    cells = np.empty((steps + 1, batch, hidden), ct)
    start = steps if reverse else 0
    states[start] = h0
    if lstm:
        cells[start] = c0
    wt = w.T
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        prev, out = _rows(reverse, t)
        if mode == "lstm":
            _np_lstm_step(xp[t], states[prev] @ wt, b, cells[prev], cells[out], states[out],
                          gates[t], hidden)
            continue
        hh = states[prev] @ wt
        if b is not None:
            hh += b
        if mode == "gru":
            x3, h3 = xp[t], hh
            r = _sig(x3[:, :hidden] + h3[:, :hidden])
            z = _sig(x3[:, hidden:2 * hidden] + h3[:, hidden:2 * hidden])
            hn = h3[:, 2 * hidden:]
            n = np.tanh(x3[:, 2 * hidden:] + r * hn)
            states[out] = (1 - z) * n + z * states[prev]
            gates[t] = np.concatenate([r, z, n, hn], axis=1)
        else:
            pre = xp[t] + hh
            states[out] = np.maximum(pre, 0) if mode == "rnn_relu" else np.tanh(pre)
    if lstm:
        states[steps + 1] = cells[0 if reverse else steps]
    return states, gates, cells


def _np_lstm_step(xp: Any, hh: Any, b: Any, c_prev: Any, c_out: Any, h_out: Any, gates: Any,
                  hidden: int) -> None:
    """One LSTM step into ``gates`` (i, f, g, o), ``c_out`` and ``h_out``, in place: one
    exponential pass over the four gates (``tanh(x) = 2 sigmoid(2x) - 1`` for g)."""
    np.add(xp, hh, out=gates)
    if b is not None:
        gates += b
    g = gates[:, 2 * hidden:3 * hidden]
    g *= 2
    np.negative(gates, out=gates)
    np.exp(gates, out=gates)
    gates += 1
    np.reciprocal(gates, out=gates)
    g *= 2
    g -= 1
    np.multiply(gates[:, hidden:2 * hidden], c_prev, out=c_out)
    c_out += gates[:, :hidden] * g
    np.tanh(c_out, out=h_out)
    h_out *= gates[:, 3 * hidden:]


def _np_forward(mode: str, xp: Tensor, w: Tensor, b: Tensor | None, h0: Tensor,
                c0: Tensor | None, reverse: bool) -> Saved:
    dt = xp.dtype
    # a module-level function with plain arguments: a NumPy capture compares them trace to trace
    states, gates, cells = np_results(
        xp, (dt, dt, dt), _np_scan, mode, reverse, host(xp), host(w),
        None if b is None else host(b), host(h0), None if c0 is None else host(c0))
    return (states, gates if mode in ("lstm", "gru") else None,
            cells if mode == "lstm" else None)


def _np_scan_back(mode: str, reverse: bool, has_bias: bool, dstates: Any, w: Any, states: Any,
                  gates: Any, cells: Any) -> tuple[Any, ...]:
    ct = _compute_type(states.dtype)
    dstates, w, states = (a.astype(ct, copy=False) for a in (dstates, w, states))
    gates = None if gates is None else gates.astype(ct, copy=False)
    cells = None if cells is None else cells.astype(ct, copy=False)
    steps: int = dstates.shape[0] - 1 - (mode == "lstm")
    batch: int = dstates.shape[1]
    hidden: int = dstates.shape[2]
    gh: int = w.shape[0]
    dx = np.empty((steps, batch, gh), ct)
    dhh = np.empty((steps, batch, gh), ct) if mode == "gru" else dx
    rec = np.zeros((batch, hidden), ct)
    carry = dstates[steps + 1].copy() if mode == "lstm" else np.zeros((batch, hidden), ct)
    for s in range(steps):
        t = s if reverse else steps - 1 - s
        prev, out = _rows(reverse, t)
        dh = dstates[out] + rec
        h = hidden
        if mode == "lstm":
            gi, gf, gg, go = (gates[t][:, k * h:(k + 1) * h] for k in range(4))
            tc = np.tanh(cells[out])
            dc = carry + dh * go * (1 - tc * tc)
            carry = dc * gf
            dx[t] = np.concatenate([dc * gg * gi * (1 - gi), dc * cells[prev] * gf * (1 - gf),
                                    dc * gi * (1 - gg * gg), dh * tc * go * (1 - go)], axis=1)
        elif mode == "gru":
            dh = dh + carry
            r, z, n, hn = (gates[t][:, k * h:(k + 1) * h] for k in range(4))
            dn = dh * (1 - z) * (1 - n * n)
            dr = dn * hn * r * (1 - r)
            dz = dh * (states[prev] - n) * z * (1 - z)
            carry = dh * z
            dx[t] = np.concatenate([dr, dz, dn], axis=1)
            dhh[t] = np.concatenate([dr, dz, dn * r], axis=1)
        else:
            y = states[out]
            dx[t] = dh * (y > 0) if mode == "rnn_relu" else dh * (1 - y * y)
        rec = dhh[t] @ w
    dh0 = rec + carry if mode == "gru" else rec
    flat = dhh.reshape(steps * batch, gh)
    first = 1 if reverse else 0
    dw = flat.T @ states[first:first + steps].reshape(steps * batch, hidden)
    db = flat.sum(axis=0) if has_bias else np.zeros(gh, ct)
    return dx, dw, db, dh0, carry


def _np_backward(mode: str, dstates: Tensor, w: Tensor, has_bias: bool, saved: Saved,
                 reverse: bool) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor | None]:
    states, gates, cells = saved
    dt = states.dtype
    dx, dw, db, dh0, dc0 = np_results(
        states, (dt,) * 5, _np_scan_back, mode, reverse, has_bias, host(dstates), host(w),
        host(states), None if gates is None else host(gates),
        None if cells is None else host(cells))
    return dx, dw, db if has_bias else None, dh0, dc0 if mode == "lstm" else None
