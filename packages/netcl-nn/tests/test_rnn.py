"""RNN, LSTM and GRU (and their cells) on every backend against a float64 NumPy transcription of
PyTorch's formulas: outputs, h_n and c_n, and the gradients of every weight, the input and the
initial states (by finite differences of the reference, through ``check_grad``): odd sizes
(sequence 1 and 7, hidden 1, 4 and 33), several layers, bidirectional, batch_first, hx given
and not, unbatched input; dropout between layers, autocast, the op's NumPy and OpenCL paths
beside each other, initialisation, repr and the errors. PyTorch's layers (when installed):
their state_dict loads, and outputs and gradients agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd.testing import check_grad, upload
from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, central_difference
from netcl.nn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, autocast, manual_seed
from netcl.nn import functional as F
from netcl.ops import rnn_scan, rnn_scan_backward

Array = np.ndarray[Any, Any]


# -- NumPy reference (PyTorch's formulas, float64) --------------------------------------------

def sig(x: Array) -> Array:
    return 1 / (1 + np.exp(-x))


def ref_cell(mode: str, x: Array, h: Array, c: Array, w_ih: Array, w_hh: Array,
             b_ih: Array | None, b_hh: Array | None) -> tuple[Array, Array]:
    gi = x @ w_ih.T + (0 if b_ih is None else b_ih)
    gh = h @ w_hh.T + (0 if b_hh is None else b_hh)
    if mode == "LSTM":
        i, f, g, o = np.split(gi + gh, 4, axis=-1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        return sig(o) * np.tanh(c), c
    if mode == "GRU":
        ir, iz, inn = np.split(gi, 3, axis=-1)
        hr, hz, hn = np.split(gh, 3, axis=-1)
        r, z = sig(ir + hr), sig(iz + hz)
        n = np.tanh(inn + r * hn)
        return (1 - z) * n + z * h, c
    pre = gi + gh
    return (np.maximum(pre, 0) if mode == "RNN_RELU" else np.tanh(pre)), c


def ref_rnn(mode: str, x: Array, params: list[Array | None], h0: Array | None,
            c0: Array | None, layers: int, dirs: int, batch_first: bool
            ) -> tuple[Array, Array, Array]:
    """(output, h_n, c_n) of a stacked recurrent layer; params in PyTorch's order."""
    batched = x.ndim == 3
    if not batched:
        x = x[:, None]
        h0 = None if h0 is None else h0[:, None]
        c0 = None if c0 is None else c0[:, None]
    elif batch_first:
        x = np.swapaxes(x, 0, 1)
    steps, batch = x.shape[:2]
    hidden = params[1].shape[1]  # type: ignore[union-attr]
    per = len(params) // (layers * dirs)
    h_n, c_n = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            w = params[k * per:(k + 1) * per] + [None] * (4 - per)
            h = np.zeros((batch, hidden)) if h0 is None else h0[k]
            c = np.zeros((batch, hidden)) if c0 is None else c0[k]
            ys: list[Array] = [np.empty(0)] * steps
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                h, c = ref_cell(mode, x[t], h, c, *w)  # type: ignore[arg-type]
                ys[t] = h
            outs.append(np.stack(ys))
            h_n.append(h)
            c_n.append(c)
        x = np.concatenate(outs, axis=2)
    out, hs, cs = x, np.stack(h_n), np.stack(c_n)
    if not batched:
        return out[:, 0], hs[:, 0], cs[:, 0]
    return (np.swapaxes(out, 0, 1) if batch_first else out), hs, cs


# -- cases ------------------------------------------------------------------------------------

LAYERS = {"RNN_TANH": RNN, "RNN_RELU": RNN, "LSTM": LSTM, "GRU": GRU}

# mode, steps, batch (0: unbatched), input, hidden, layers, bidirectional, batch_first, hx
CASES = [
    ("LSTM", 7, 3, 5, 4, 2, True, False, True),
    ("LSTM", 1, 2, 3, 1, 1, False, True, False),
    ("GRU", 7, 3, 5, 4, 2, True, True, True),
    ("GRU", 1, 1, 2, 1, 1, False, False, False),
    ("RNN_TANH", 7, 2, 3, 5, 2, False, False, True),
    ("RNN_RELU", 7, 3, 4, 3, 1, True, True, False),
    ("LSTM", 7, 0, 3, 4, 2, True, False, True),
    ("GRU", 7, 0, 3, 4, 1, False, True, False),
]


def case_id(case: tuple[Any, ...]) -> str:
    mode, steps, batch, inp, hidden, layers, bi, bf, hx = case
    return (f"{mode}-T{steps}-B{batch or 'none'}-I{inp}-H{hidden}-L{layers}"
            f"{'-bi' if bi else ''}{'-bf' if bf else ''}{'-hx' if hx else ''}")


def make_layer(dev: DeviceHandle, mode: str, inp: int, hidden: int, layers: int, bi: bool,
               bf: bool, dtype: str = "float32") -> Any:
    kw = {"nonlinearity": "relu"} if mode == "RNN_RELU" else {}
    return LAYERS[mode](inp, hidden, num_layers=layers, bidirectional=bi, batch_first=bf,
                        device=dev.queue, dtype=dtype, rng=np.random.default_rng(1), **kw)


def inputs(mode: str, steps: int, batch: int, inp: int, hidden: int, layers: int, bi: bool,
           bf: bool, hx: bool, seed: int = 0) -> tuple[Array, Array | None, Array | None]:
    rng = np.random.default_rng(seed)
    n = layers * (2 if bi else 1)
    state: tuple[int, ...]
    if batch == 0:
        x, state = rng.normal(size=(steps, inp)), (n, hidden)
    else:
        x = rng.normal(size=(batch, steps, inp) if bf else (steps, batch, inp))
        state = (n, batch, hidden)
    h0 = rng.normal(size=state) if hx else None
    c0 = rng.normal(size=state) if hx and mode == "LSTM" else None
    return x, h0, c0


def joined(layer: Any, n_params: int) -> Callable[..., Tensor]:
    """The layer as one function of (x, *params, h0, c0) returning its outputs flattened and
    joined (check_grad checks one output)."""

    def run(x: Tensor, *rest: Any) -> Tensor:
        params, (h0, c0) = rest[:n_params], rest[n_params:]
        for (name, _), p in zip(layer.named_parameters(), params):
            object.__setattr__(layer, name, p)
        hx = None if h0 is None else ((h0, c0) if layer.mode == "LSTM" else h0)
        out, state = layer(x, hx)
        parts = [out, *(state if isinstance(state, tuple) else (state,))]
        return F.concat([F.reshape(t, (t.size,)) for t in parts])

    return run


def ref_joined(mode: str, layers: int, dirs: int, bf: bool, n_params: int
               ) -> Callable[..., Array]:
    def ref(x: Array, *rest: Any) -> Array:
        params, (h0, c0) = list(rest[:n_params]), rest[n_params:]
        out, h, c = ref_rnn(mode, x, params, h0, c0, layers, dirs, bf)
        parts = [out, h, *([c] if mode == "LSTM" else [])]
        return np.concatenate([p.ravel() for p in parts])

    return ref


def check_directional(dev: DeviceHandle, fn: Callable[..., Tensor],
                      ref: Callable[..., Array], args: tuple[Any, ...], scale: float = 4.0,
                      directions: int = 2) -> None:
    """``check_grad`` for functions with many inputs: the output against ``ref`` element by
    element, and each input's gradient against central differences of ``ref`` in
    ``directions`` random directions (``<grad, d>`` against ``(f(x + eps d) - f(x - eps d)) /
    2 eps`` weighted by the cotangent; CONVENTIONS 7): two reference calls per direction
    instead of two per element."""
    rng = np.random.default_rng(11)
    rounded = [a.astype(np.float32).astype(np.float64) if isinstance(a, np.ndarray) else a
               for a in args]
    dev_args = [upload(dev.queue, a, "float32") if isinstance(a, np.ndarray) else a
                for a in args]
    for t in dev_args:
        if isinstance(t, Tensor):
            t.requires_grad = True
    with ag.Tape() as tape:
        out = fn(*dev_args)
    want = ref(*rounded)
    assert out.shape == want.shape and out.dtype == "float32"
    assert_close(out.to_host(), want, "float32", scale, err_msg="forward")
    v = np.asarray(rng.standard_normal(want.shape))
    tape.backward(out, grad=upload(dev.queue, v, "float32"))
    for i, t in enumerate(dev_args):
        if not isinstance(t, Tensor):
            continue
        got = np.zeros(t.shape) if t.grad is None else t.grad.to_host().astype(np.float64)
        for _ in range(directions):
            d = rng.standard_normal(t.shape)
            fd = float((v * central_difference(ref, rounded, {i: d})).sum())
            assert_close(np.float64((got * d).sum()), np.float64(fd), "float32", scale,
                         grad=True, err_msg=f"gradient of argument {i} in a random direction")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_layer_matches_reference(dev: DeviceHandle, case: tuple[Any, ...]) -> None:
    mode, _, _, inp, hidden, layers, bi, bf, _ = case
    layer = make_layer(dev, mode, inp, hidden, layers, bi, bf)
    params = [p.to_host().astype(np.float64) for p in layer.parameters()]
    x, h0, c0 = inputs(*case)
    check_directional(dev, joined(layer, len(params)),
                      ref_joined(mode, layers, 2 if bi else 1, bf, len(params)),
                      (x, *params, h0, c0))


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_hidden_33(dev: DeviceHandle, mode: str) -> None:
    """A hidden size past every tile (33), batch_first, hx given."""
    case = (mode, 7, 3, 5, 33, 1, False, True, True)
    layer = make_layer(dev, mode, 5, 33, 1, False, True)
    params = [p.to_host().astype(np.float64) for p in layer.parameters()]
    x, h0, c0 = inputs(*case)
    n = len(params)
    check_directional(dev, joined(layer, n), ref_joined(mode, 1, 1, True, n),
                      (x, *params, h0, c0))


def test_elementwise_gradients(dev: DeviceHandle) -> None:
    """Every gradient element by element (check_grad) on one small two-layer bidirectional
    LSTM with batch_first and hx."""
    case = ("LSTM", 3, 2, 2, 2, 2, True, True, True)
    layer = make_layer(dev, "LSTM", 2, 2, 2, True, True)
    params = [p.to_host().astype(np.float64) for p in layer.parameters()]
    x, h0, c0 = inputs(*case)
    n = len(params)
    check_grad(dev, joined(layer, n), ref_joined("LSTM", 2, 2, True, n), (x, *params, h0, c0),
               scale=4.0)


@pytest.mark.parametrize("mode", ["RNN_TANH", "LSTM", "GRU"])
def test_cells_match_reference(dev: DeviceHandle, mode: str) -> None:
    cls = {"RNN_TANH": RNNCell, "LSTM": LSTMCell, "GRU": GRUCell}[mode]
    cell = cls(3, 5, device=dev.queue, rng=np.random.default_rng(2))
    params = [p.to_host().astype(np.float64) for p in cell.parameters()]
    rng = np.random.default_rng(3)
    x, h, c = rng.normal(size=(4, 3)), rng.normal(size=(4, 5)), rng.normal(size=(4, 5))

    def run(x: Tensor, *rest: Tensor) -> Tensor:
        for (name, _), p in zip(cell.named_parameters(), rest[:4]):
            object.__setattr__(cell, name, p)
        if mode == "LSTM":
            h1, c1 = cell(x, (rest[4], rest[5]))
            return F.concat([h1, c1], axis=1)
        return cell(x, rest[4])  # type: ignore[no-any-return]

    def ref(x: Array, *rest: Array) -> Array:
        h1, c1 = ref_cell(mode, x, rest[4], rest[5] if mode == "LSTM" else rest[4], *rest[:4])
        return np.concatenate([h1, c1], axis=1) if mode == "LSTM" else h1

    args = (x, *params, h, *([c] if mode == "LSTM" else []))
    check_grad(dev, run, ref, args, scale=4.0)
    # unbatched and hx=None
    out = cls(3, 5, device=dev.queue)(Tensor.from_host(dev.queue, x[0]))
    assert (out[0] if mode == "LSTM" else out).shape == (5,)


def test_scan_paths_agree(dev: DeviceHandle) -> None:
    """netcl.ops.rnn_scan on this device against its NumPy path, both directions, every mode:
    the states and every gradient."""
    handle = manager.default("cpu")
    assert handle is not None
    cpu = handle.queue
    rng = np.random.default_rng(4)
    for mode, gates in (("rnn_tanh", 1), ("rnn_relu", 1), ("lstm", 4), ("gru", 3)):
        for reverse in (False, True):
            arrays = [rng.normal(size=s) for s in ((5, 3, gates * 7), (gates * 7, 7),
                                                   (gates * 7,), (3, 7), (3, 7))]
            got = []
            for q in (dev.queue, cpu):
                xp, w, b, h0, c0 = (Tensor.from_host(q, a) for a in arrays)
                saved = rnn_scan(mode, xp, w, b, h0, c0 if mode == "lstm" else None, reverse)
                g = Tensor.from_host(q, np.linspace(-1, 1, saved[0].size).reshape(
                    saved[0].shape))
                grads = rnn_scan_backward(mode, g, w, True, saved, reverse)
                got.append([saved[0].to_host()] + [t.to_host() for t in grads if t is not None])
            for a, b_ in zip(*got):
                np.testing.assert_allclose(a, b_, rtol=1e-4, atol=1e-5, err_msg=mode)


def test_dropout_between_layers(dev: DeviceHandle) -> None:
    layer = LSTM(3, 4, num_layers=2, dropout=0.5, device=dev.queue)
    x = Tensor.from_host(dev.queue, np.random.default_rng(5).normal(size=(6, 2, 3)))
    manual_seed(0)
    a = layer(x)[0].to_host()
    manual_seed(1)
    b = layer(x)[0].to_host()
    assert not np.allclose(a, b)  # training: two masks
    layer.eval()
    np.testing.assert_array_equal(layer(x)[0].to_host(), layer(x)[0].to_host())
    single = LSTM(3, 4, num_layers=2, device=dev.queue)
    single.load_state_dict(layer.state_dict())
    np.testing.assert_allclose(layer(x)[0].to_host(), single(x)[0].to_host(), rtol=1e-6)


def test_autocast_float16(dev: DeviceHandle) -> None:
    layer = GRU(5, 6, num_layers=2, device=dev.queue, rng=np.random.default_rng(6))
    x = Tensor.from_host(dev.queue, np.random.default_rng(7).normal(size=(7, 3, 5)))
    want = layer(x)[0].to_host()
    with autocast():
        out, h_n = layer(x)
    assert out.dtype == "float16" and h_n.dtype == "float16"
    np.testing.assert_allclose(out.to_host().astype(np.float32), want, atol=2e-2)
    F.sum(F.cast(out, "float32")).backward()
    for p in layer.parameters():
        assert p.grad is not None and p.grad.dtype == "float32"
        assert np.isfinite(p.grad.to_host()).all()


def test_init_and_repr() -> None:
    layer = LSTM(3, 16, num_layers=2, bidirectional=True)
    names = [n for n, _ in layer.named_parameters()]
    assert names[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                         "weight_ih_l0_reverse"]
    assert getattr(layer, "weight_ih_l1").shape == (64, 32)
    for p in layer.parameters():
        values = p.to_host()
        assert np.abs(values).max() <= 0.25 and values.std() > 0.05  # U(-1/4, 1/4)
    assert repr(layer) == "LSTM(3, 16, num_layers=2, bidirectional=True)"
    assert repr(RNN(2, 3, nonlinearity="relu", bias=False, batch_first=True)) == (
        "RNN(2, 3, bias=False, batch_first=True)")  # PyTorch's reprs
    assert repr(RNNCell(2, 3, nonlinearity="relu", bias=False)) == (
        "RNNCell(2, 3, bias=False, nonlinearity=relu)")
    assert len(list(GRU(2, 3, bias=False).parameters())) == 2
    assert repr(GRUCell(2, 3)) == "GRUCell(2, 3)"


def test_errors() -> None:
    with pytest.raises(ValueError, match="LSTM: proj_size must be smaller than hidden_size"):
        LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError,
                       match="RNNBase: proj_size is only supported by LSTM, got mode 'GRU'"):
        RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match="LSTM: proj_size must be an int >= 0, got -1"):
        LSTM(3, 4, proj_size=-1)
    proj = LSTM(3, 4, proj_size=2)
    xs = Tensor.from_host(getattr(proj, "weight_ih_l0").queue, np.ones((5, 2, 3)))
    with pytest.raises(ValueError, match=r"LSTM: expected h_0 of shape \(1, 2, 2\)"):
        proj(xs, (Tensor.from_host(xs.queue, np.zeros((1, 2, 4))),
                  Tensor.from_host(xs.queue, np.zeros((1, 2, 4)))))
    with pytest.raises(ValueError, match="RNN: nonlinearity must be 'tanh' or 'relu'"):
        RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="GRU: hidden_size must be a positive int, got 0"):
        GRU(3, 0)
    with pytest.raises(ValueError, match="LSTM: dropout must be a number in"):
        LSTM(3, 4, num_layers=2, dropout=1.5)
    with pytest.warns(UserWarning, match="between layers"):
        GRU(3, 4, dropout=0.2)
    layer = LSTM(3, 4, num_layers=2)
    x = Tensor.from_host(getattr(layer, "weight_ih_l0").queue, np.ones((5, 2, 3)))
    with pytest.raises(ValueError, match=r"LSTM: input.size\(-1\) must equal input_size=3"):
        layer(Tensor.from_host(x.queue, np.ones((5, 2, 4))))
    with pytest.raises(ValueError, match="LSTM: expected input of 2 dims"):
        layer(Tensor.from_host(x.queue, np.ones(3)))
    h = Tensor.from_host(x.queue, np.zeros((2, 2, 4)))
    with pytest.raises(TypeError, match=r"LSTM: hx must be a tuple \(h_0, c_0\)"):
        layer(x, h)
    with pytest.raises(ValueError, match=r"LSTM: expected c_0 of shape \(2, 2, 4\)"):
        layer(x, (h, Tensor.from_host(x.queue, np.zeros((1, 2, 4)))))
    with pytest.raises(TypeError, match="GRU: hx must be a Tensor h_0"):
        GRU(3, 4)(x, (h, h))
    with pytest.raises(ValueError, match=r"RNN: expected h_0 of shape \(1, 4\) for unbatched"):
        RNN(3, 4)(Tensor.from_host(x.queue, np.ones((5, 3))), h)
    with pytest.raises(ValueError, match=r"LSTMCell: expected input \(batch, 3\)"):
        LSTMCell(3, 4)(Tensor.from_host(x.queue, np.ones((2, 5))))


def test_scan_errors() -> None:
    q = getattr(LSTM(1, 1), "weight_hh_l0").queue

    def t(*shape: int) -> Tensor:
        return Tensor.from_host(q, np.zeros(shape))

    with pytest.raises(ValueError, match="rnn_scan: mode must be one of"):
        rnn_scan("lstmx", t(2, 1, 4), t(4, 1), None, t(1, 1))
    with pytest.raises(ValueError, match=r"rnn_scan: xproj must be \(steps >= 1, batch, 12\)"):
        rnn_scan("gru", t(2, 1, 4), t(12, 4), None, t(1, 4))
    with pytest.raises(ValueError, match="c0 is required for lstm"):
        rnn_scan("lstm", t(2, 1, 4), t(4, 1), None, t(1, 1))
    with pytest.raises(TypeError, match="one float dtype"):
        rnn_scan("rnn_tanh", t(2, 1, 1), Tensor.from_host(q, np.zeros((1, 1)), dtype="float64"),
                 None, t(1, 1))


# -- PyTorch ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_matches_torch(dev: DeviceHandle, mode: str) -> None:
    torch = pytest.importorskip("torch")
    tcls = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "RNN_TANH": torch.nn.RNN}[mode]
    torch.manual_seed(0)
    ref = tcls(5, 7, num_layers=2, bidirectional=True, batch_first=True).double()
    layer = make_layer(dev, mode, 5, 7, 2, True, True)
    layer.load_state_dict(ref.state_dict())  # torch tensors load as they are
    rng = np.random.default_rng(8)
    x, h0, c0 = rng.normal(size=(3, 6, 5)), rng.normal(size=(4, 3, 7)), rng.normal(size=(4, 3, 7))
    xt, h0t, c0t = (torch.tensor(a, requires_grad=True) for a in (x, h0, c0))
    lstm = mode == "LSTM"
    out_t, state_t = ref(xt, (h0t, c0t) if lstm else h0t)
    states_t = state_t if lstm else (state_t,)
    (sum((t * t).sum() for t in (out_t, *states_t))).backward()
    xn, h0n, c0n = (Tensor.from_host(dev.queue, a, dtype="float32") for a in (x, h0, c0))
    for t in (xn, h0n, c0n):
        t.requires_grad = True
    out, state = layer(xn, (h0n, c0n) if lstm else h0n)
    states = state if lstm else (state,)
    loss = F.sum(F.mul(out, out))
    for s in states:
        loss = F.add(loss, F.sum(F.mul(s, s)))
    loss.backward()
    tol = 1e-4
    np.testing.assert_allclose(out.to_host(), out_t.detach().numpy(), rtol=tol, atol=tol)
    for s, st in zip(states, states_t):
        np.testing.assert_allclose(s.to_host(), st.detach().numpy(), rtol=tol, atol=tol)
    pairs = [(xn, xt), (h0n, h0t)] + ([(c0n, c0t)] if lstm else [])
    for a, b in pairs:
        assert a.grad is not None
        np.testing.assert_allclose(a.grad.to_host(), b.grad.numpy(), rtol=tol, atol=tol)
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(getattr(layer, name).grad.to_host(), p.grad.numpy(),
                                   err_msg=name, rtol=tol, atol=tol)


# -- LSTM with projections (proj_size) --------------------------------------------------------

def ref_lstm_proj(x: Array, params: list[Array], h0: Array | None, c0: Array | None,
                  layers: int, dirs: int, bias: bool, hidden: int, proj: int) -> Array:
    """PyTorch's LSTM with projections step by step in float64 (x (T, B, I)): output, h_n
    and c_n flattened and joined."""
    steps, batch = x.shape[:2]
    per = 5 if bias else 3
    h_n, c_n = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            w = params[k * per:(k + 1) * per]
            w_ih, w_hh, w_hr = w[0], w[1], w[-1]
            b = (w[2] + w[3]) if bias else 0.0
            h = np.zeros((batch, proj)) if h0 is None else h0[k]
            c = np.zeros((batch, hidden)) if c0 is None else c0[k]
            ys: list[Array] = [np.empty(0)] * steps
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                i, f, g, o = np.split(x[t] @ w_ih.T + h @ w_hh.T + b, 4, axis=-1)
                c = sig(f) * c + sig(i) * np.tanh(g)
                h = (sig(o) * np.tanh(c)) @ w_hr.T
                ys[t] = h
            outs.append(np.stack(ys))
            h_n.append(h)
            c_n.append(c)
        x = np.concatenate(outs, axis=2)
    return np.concatenate([x.ravel(), np.stack(h_n).ravel(), np.stack(c_n).ravel()])


# steps, batch, input, hidden, proj, layers, bidirectional, bias, hx
PROJ_CASES = [(7, 3, 5, 6, 3, 2, True, True, True), (1, 2, 3, 4, 1, 1, False, False, False),
              (5, 1, 2, 33, 7, 1, True, True, False)]


@pytest.mark.parametrize("case", PROJ_CASES, ids=lambda c: "-".join(map(str, c)))
def test_lstm_projections(dev: DeviceHandle, case: tuple[Any, ...]) -> None:
    steps, batch, inp, hidden, proj, layers, bi, bias, hx = case
    layer = LSTM(inp, hidden, num_layers=layers, bidirectional=bi, bias=bias,
                 proj_size=proj, device=dev.queue, rng=np.random.default_rng(2))
    names = [n for n, _ in layer.named_parameters()]
    assert names[:(5 if bias else 3)] == (
        ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
        if bias else ["weight_ih_l0", "weight_hh_l0", "weight_hr_l0"])  # PyTorch's order
    assert getattr(layer, "weight_hh_l0").shape == (4 * hidden, proj)
    params = [p.to_host().astype(np.float64) for p in layer.parameters()]
    dirs = 2 if bi else 1
    rng = np.random.default_rng(3)
    x = rng.normal(size=(steps, batch, inp))
    h0 = rng.normal(size=(layers * dirs, batch, proj)) if hx else None
    c0 = rng.normal(size=(layers * dirs, batch, hidden)) if hx else None

    def ref(x: Array, *rest: Any) -> Array:
        return ref_lstm_proj(x, list(rest[:len(params)]), rest[-2], rest[-1], layers, dirs,
                             bias, hidden, proj)

    check_directional(dev, joined(layer, len(params)), ref, (x, *params, h0, c0))
    assert repr(layer).startswith(f"LSTM({inp}, {hidden}, proj_size={proj}")


def test_lstm_projections_match_torch(dev: DeviceHandle) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = torch.nn.LSTM(5, 7, num_layers=2, bidirectional=True, batch_first=True,
                        proj_size=3).double()
    layer = LSTM(5, 7, num_layers=2, bidirectional=True, batch_first=True, proj_size=3,
                 device=dev.queue)
    layer.load_state_dict(ref.state_dict())
    rng = np.random.default_rng(8)
    x, h0, c0 = rng.normal(size=(3, 6, 5)), rng.normal(size=(4, 3, 3)), rng.normal(size=(4, 3, 7))
    out_t, (h_t, c_t) = ref(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    out, (h, c) = layer(*(Tensor.from_host(dev.queue, a, dtype="float32") for a in (x,)),
                        tuple(Tensor.from_host(dev.queue, a, dtype="float32") for a in (h0, c0)))
    for got, want in ((out, out_t), (h, h_t), (c, c_t)):
        np.testing.assert_allclose(got.to_host(), want.detach().numpy(), rtol=1e-4, atol=1e-4)
