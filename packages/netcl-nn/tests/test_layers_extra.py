"""The layers PyTorch users reach for beyond the basic set: values and gradients against NumPy
float64 transcriptions of PyTorch's formulas on every backend (``check_grad``: finite
differences of the reference), the transcriptions against PyTorch when it is installed,
kinks on purpose, reprs, ``device=``/``dtype=``, and argument errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import (
    ELU,
    AdaptiveMaxPool2d,
    BatchNorm2d,
    Conv1d,
    Conv2d,
    ConvTranspose2d,
    Dropout,
    Dropout2d,
    Embedding,
    GroupNorm,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LayerNorm,
    Linear,
    LogSoftmax,
    MaxPool2d,
    Mish,
    PReLU,
    ReLU,
    Softmax,
    Softplus,
    Unflatten,
    Upsample,
    manual_seed,
)
from netcl.nn import functional as F

Array = np.ndarray[Any, Any]
_R = np.random.default_rng(0)


# -- NumPy references ---------------------------------------------------------------------------

def ref_conv1d(x: Array, w: Array, b: Array | None = None, stride: int = 1,
               padding: int | str = 0, dilation: int = 1, groups: int = 1) -> Any:
    k = w.shape[2]
    if padding == "same":
        total = dilation * (k - 1)
        x = np.pad(x, ((0, 0), (0, 0), (total // 2, total - total // 2)))
    elif padding != "valid":
        x = np.pad(x, ((0, 0), (0, 0), (int(padding), int(padding))))
    length = (x.shape[2] - dilation * (k - 1) - 1) // stride + 1
    cg, kg = w.shape[1], w.shape[0] // groups
    out = np.zeros((x.shape[0], w.shape[0], length))
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for j in range(k):
            cols = xs[:, :, j * dilation:j * dilation + (length - 1) * stride + 1:stride]
            out[:, g * kg:(g + 1) * kg] += np.einsum("ncl,kc->nkl", cols,
                                                     w[g * kg:(g + 1) * kg, :, j])
    return out if b is None else out + b.reshape(1, -1, 1)


def ref_conv2d_same(x: Array, w: Array) -> Any:
    kh, kw = w.shape[2:]
    x = np.pad(x, ((0, 0), (0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2)))
    h, wd = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    out = np.zeros((x.shape[0], w.shape[0], h, wd))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,kc->nkhw", x[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out


def ref_group_norm(x: Array, groups: int, w: Array | None = None, b: Array | None = None,
                   eps: float = 1e-5) -> Any:
    g = x.reshape(x.shape[0], groups, -1)
    y = ((g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps))
    y = y.reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.reshape(shape)
    return y if b is None else y + b.reshape(shape)


def _src(dst: int, size_in: int, size_out: int, mode: str, align: bool | None,
         scale: float | None) -> float:
    if align:
        return dst * ((size_in - 1) / (size_out - 1) if size_out > 1 else 0.0)
    s = 1 / scale if scale is not None else size_in / size_out
    if mode == "nearest":
        return float(min(math.floor(dst * s), size_in - 1))
    return max((dst + 0.5) * s - 0.5, 0.0)


def ref_interpolate(x: Array, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                    align_corners: bool | None = None) -> Any:
    spatial = x.ndim - 2
    out = x
    for k in range(spatial):
        axis = 2 + k
        n_in = x.shape[axis]
        if size is not None:
            n_out, scale = (size if isinstance(size, int) else size[k]), None
        else:
            scale = scale_factor if not isinstance(scale_factor, tuple) else scale_factor[k]
            n_out = math.floor(n_in * scale)
        pieces = []
        for d in range(n_out):
            src = _src(d, n_in, n_out, mode, align_corners, scale)
            lo = min(math.floor(src), n_in - 1)
            hi = lo + 1 if lo < n_in - 1 else lo
            lam = src - lo
            a, b = np.take(out, lo, axis=axis), np.take(out, hi, axis=axis)
            pieces.append(a if mode == "nearest" else (1 - lam) * a + lam * b)
        out = np.stack(pieces, axis=axis)
    return out


def ref_adaptive_max(x: Array, output_size: Any) -> Any:
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = x.shape[2:]
    out = np.zeros((*x.shape[:2], oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, he = (i * h) // oh, -(-((i + 1) * h) // oh)
            ws, we = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, hs:he, ws:we].max(axis=(2, 3))
    return out


def ref_elu(x: Array, alpha: float = 1.0) -> Any:
    return np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1))


def ref_hardswish(x: Array) -> Any:
    return x * np.clip(x + 3, 0, 6) / 6


def ref_prelu(x: Array, w: Array) -> Any:
    shape = (1, -1) + (1,) * (x.ndim - 2) if w.size > 1 else (1,) * x.ndim
    return np.where(x > 0, x, w.reshape(shape) * x)


def ref_softmax(x: Array, dim: int) -> Any:
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


# -- values and gradients -----------------------------------------------------------------------

# positive-away-from-the-kinks inputs: finite differences must not cross 0 (or +-3)
_ACT = _R.uniform(0.1, 2.5, (3, 5, 7)) * _R.choice([-1.0, 1.0], (3, 5, 7))

CASES: dict[str, tuple[Any, Any, tuple[Any, ...], dict[str, Any], dict[str, Any]]] = {
    # name: (netcl fn, reference, args, kwargs, check_grad options)
    "conv1d": (F.conv1d, ref_conv1d, (_R.standard_normal((2, 3, 11)),
                                       _R.standard_normal((4, 3, 3)), _R.standard_normal(4)),
               {"stride": 2, "padding": 1}, {"scale": 4}),
    "conv1d_same_even_kernel": (F.conv1d, ref_conv1d, (_R.standard_normal((1, 4, 9)),
                                                       _R.standard_normal((2, 2, 4))),
                                {"padding": "same", "dilation": 2, "groups": 2}, {"scale": 4}),
    "conv2d_same": (lambda x, w: F.conv2d(x, w, padding="same"),  # type: ignore[arg-type]
                    ref_conv2d_same,
                    (_R.standard_normal((1, 2, 5, 6)), _R.standard_normal((3, 2, 2, 3))), {},
                    {"scale": 4}),
    "group_norm": (F.group_norm, ref_group_norm, (_R.standard_normal((3, 6, 5)), 3,
                                                  _R.standard_normal(6), _R.standard_normal(6)),
                   {}, {"scale": 8}),
    "group_norm_4d_no_affine": (F.group_norm, ref_group_norm,
                                (_R.standard_normal((2, 4, 3, 3)), 2), {"eps": 1e-3},
                                {"scale": 8}),
    "nearest_4d_size": (F.interpolate, ref_interpolate, (_R.standard_normal((1, 2, 3, 5)),),
                        {"size": (7, 4)}, {}),
    "nearest_3d_scale": (F.interpolate, ref_interpolate, (_R.standard_normal((2, 3, 5)),),
                         {"scale_factor": 2.5}, {}),
    "nearest_4d_whole_factors": (F.interpolate, ref_interpolate,
                                 (_R.standard_normal((2, 3, 3, 5)),), {"scale_factor": (2, 3)},
                                 {}),
    "nearest_4d_whole_size": (F.interpolate, ref_interpolate,
                              (_R.standard_normal((1, 2, 3, 4)),), {"size": (6, 4)}, {}),
    "bilinear": (F.interpolate, ref_interpolate, (_R.standard_normal((1, 2, 4, 3)),),
                 {"size": (7, 5), "mode": "bilinear"}, {}),
    "bilinear_scale_down": (F.interpolate, ref_interpolate, (_R.standard_normal((1, 1, 7, 6)),),
                            {"scale_factor": 0.5, "mode": "bilinear"}, {}),
    "bilinear_align": (F.interpolate, ref_interpolate, (_R.standard_normal((2, 1, 3, 4)),),
                       {"scale_factor": 2, "mode": "bilinear", "align_corners": True}, {}),
    "linear_align": (F.interpolate, ref_interpolate, (_R.standard_normal((1, 2, 5)),),
                     {"size": 9, "mode": "linear", "align_corners": True}, {}),
    "adaptive_max_odd": (F.adaptive_max_pool2d, ref_adaptive_max,
                         (_R.standard_normal((2, 3, 7, 5)),), {"output_size": (3, 4)}, {}),
    "adaptive_max_divides": (F.adaptive_max_pool2d, ref_adaptive_max,
                             (_R.standard_normal((1, 2, 6, 4)),), {"output_size": 2}, {}),
    "elu": (F.elu, ref_elu, (_ACT,), {"alpha": 0.7}, {"elementwise": True}),
    "hardswish": (F.hardswish, ref_hardswish, (_ACT * 2,), {}, {"elementwise": True}),
    "softplus_beta": (F.softplus, lambda x, beta, threshold: np.where(
        beta * x > threshold, x, np.logaddexp(0, beta * x) / beta), (_ACT * 4, 2.0, 5.0), {},
        {"elementwise": True, "wrt": [0]}),
    "mish": (F.mish, lambda x: x * np.tanh(np.logaddexp(0, x)), (_ACT,), {},
             {"elementwise": True}),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6, (_ACT * 2,), {},
                    {"elementwise": True}),
    "hardtanh": (F.hardtanh, lambda x, lo, hi: np.clip(x, lo, hi), (_ACT, -0.5, 1.2), {},
                 {"elementwise": True, "wrt": [0]}),
    "prelu_channels": (F.prelu, ref_prelu, (_ACT, _R.uniform(0.1, 0.5, 5)), {}, {}),
    "prelu_shared": (F.prelu, ref_prelu, (_ACT, np.array([0.3])), {}, {}),
    "softmax_dim": (lambda x: F.softmax(x, dim=1), lambda x: ref_softmax(x, 1),
                    (_R.standard_normal((3, 5, 2)),), {}, {}),
    "log_softmax_dim0": (lambda x: F.log_softmax(x, dim=0),
                         lambda x: np.log(ref_softmax(x, 0)), (_R.standard_normal((4, 3)),), {},
                         {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_gradient(dev: DeviceHandle, name: str) -> None:
    fn, ref, args, kwargs, options = CASES[name]
    check_grad(dev, fn, ref, args, kwargs, **options)


def test_kinks_follow_pytorch(dev: DeviceHandle) -> None:
    """elu'(0) = alpha, hardswish'(-3) = -1/2 and '(3) = 3/2, prelu'(0) = the slope."""
    x = Tensor.from_host(dev.queue, np.array([0.0, -3.0, 3.0, 50.0], np.float32))
    x.requires_grad = True
    w = Tensor.from_host(dev.queue, np.array([0.25], np.float32))
    for fn, want in ((lambda t: F.elu(t, 0.5), [0.5, 0.5 * np.exp(-3.0), 1.0, 1.0]),
                     (F.hardswish, [0.5, -0.5, 1.5, 1.0]),
                     (lambda t: F.prelu(t, w), [0.25, 0.25, 1.0, 1.0])):
        x.grad = None
        with ag.Tape() as tape:
            y = ag.ops.sum(fn(x))
        tape.backward(y)
        assert x.grad is not None
        np.testing.assert_allclose(x.grad.to_host(), want, rtol=1e-6)
        assert np.isfinite(x.grad.to_host()).all()


def test_dropout2d_masks_whole_channels(dev: DeviceHandle) -> None:
    manual_seed(3)
    x = Tensor.from_host(dev.queue, np.ones((4, 9, 3, 5), np.float32))
    x.requires_grad = True
    layer = Dropout2d(0.4)
    with ag.Tape() as tape:
        y = layer(x)
        total = ag.ops.sum(y)
    tape.backward(total)
    out = y.to_host().reshape(36, 15)
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.6)}
    assert (out == out[:, :1]).all()  # one value per channel
    assert 0 < (out[:, 0] == 0).sum() < 36
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.to_host(), y.to_host())  # the same mask and scale
    layer.eval()
    assert layer(x) is x


def test_conv_transpose2d_layer_inverts_the_shape_of_conv2d(dev: DeviceHandle) -> None:
    q = dev.queue
    down = Conv2d(3, 4, 3, stride=2, padding=1, device=q)
    up = ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1, device=q)
    x = Tensor.from_host(q, _R.standard_normal((2, 3, 8, 6)).astype(np.float32))
    assert up(down(x)).shape == x.shape
    assert up.weight.shape == (4, 3, 3, 3)
    bound = 1 / math.sqrt(3 * 9)  # PyTorch's fan_in: weight dim 1 times the kernel
    assert up.bias is not None and np.abs(up.bias.to_host()).max() <= bound


# -- layer settings, placement, reprs -----------------------------------------------------------

def test_reprs_show_the_settings() -> None:
    q = "cpu"
    assert repr(Dropout()) == "Dropout(p=0.5)"
    assert repr(Conv2d(1, 8, 3, device=q)) == "Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1))"
    assert repr(Conv2d(2, 4, (3, 1), stride=2, padding=1, groups=2, bias=False, device=q)) == (
        "Conv2d(2, 4, kernel_size=(3, 1), stride=(2, 2), padding=(1, 1), groups=2, bias=False)")
    assert repr(Linear(3, 2, device=q)) == "Linear(in_features=3, out_features=2, bias=True)"
    assert repr(BatchNorm2d(3, device=q)) == (
        "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)")
    assert repr(LayerNorm(4, device=q)) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True)"
    assert repr(MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, ceil_mode=False)"
    assert repr(ReLU()) == "ReLU()" and repr(ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(Softmax(dim=1)) == "Softmax(dim=1)" and repr(LogSoftmax(0)) == "LogSoftmax(dim=0)"
    assert repr(ELU()) == "ELU(alpha=1.0)" and repr(Hardswish()) == "Hardswish()"
    assert repr(GroupNorm(2, 4, device=q)) == "GroupNorm(2, 4, eps=1e-05, affine=True)"
    assert repr(Dropout2d(0.2)) == "Dropout2d(p=0.2)"
    assert repr(Upsample(size=(4, 5))) == "Upsample(size=(4, 5), mode='nearest')"
    assert repr(AdaptiveMaxPool2d((2, 3))) == "AdaptiveMaxPool2d(output_size=(2, 3))"
    assert repr(Conv1d(2, 3, 5, stride=2, device=q)) == (
        "Conv1d(2, 3, kernel_size=(5,), stride=(2,))")
    assert repr(Softplus(2.0)) == "Softplus(beta=2.0, threshold=20.0)"
    assert repr(Hardtanh()) == "Hardtanh(min_val=-1.0, max_val=1.0)"
    assert repr(Unflatten(1, (2, 3))) == "Unflatten(dim=1, unflattened_size=(2, 3))"
    assert repr(Mish()) == "Mish()" and repr(Hardsigmoid()) == "Hardsigmoid()"


def test_device_and_dtype_keywords(dev: DeviceHandle) -> None:
    layers: list[Any] = [
        Linear(3, 2, device=dev, dtype="float64"), Conv2d(2, 3, 3, device=dev.queue),
        BatchNorm2d(3, device=dev), LayerNorm(3, device=dev), Conv1d(2, 3, 3, device=dev),
        ConvTranspose2d(2, 3, 3, device=dev), GroupNorm(1, 2, device=dev), PReLU(device=dev)]
    for layer in layers:
        for p in layer.parameters():
            assert p.queue is dev.queue
        for b in layer.buffers():
            assert b.queue is dev.queue
    assert layers[0].weight.dtype == "float64" and layers[1].weight.dtype == "float32"
    with pytest.raises(TypeError, match="give device= or queue="):
        Linear(2, 2, queue=dev.queue, device=dev)
    with pytest.raises(TypeError, match="dtype must be one of"):
        Linear(2, 2, device=dev, dtype="int32")


def test_module_to_string_device_and_dtype() -> None:
    net = Linear(3, 2, device="cpu").to("float64")
    assert net.weight.dtype == "float64"
    assert net.to("cpu").weight.queue is net.weight.queue
    with pytest.raises(ValueError, match="unknown device selector"):
        Linear(2, 2, device="no-such-device-xyz")


def test_bad_layer_arguments() -> None:
    with pytest.raises(ValueError, match="groups=2 must divide"):
        Conv1d(3, 4, 3, groups=2, device="cpu")
    with pytest.raises(ValueError, match="padding='same' needs stride 1"):
        Conv2d(1, 1, 3, stride=2, padding="same", device="cpu")
    with pytest.raises(ValueError, match="padding must be 'same', 'valid'"):
        Conv1d(1, 1, 3, padding="full", device="cpu")
    with pytest.raises(ValueError, match="num_groups=4 must divide"):
        GroupNorm(4, 6, device="cpu")
    with pytest.raises(ValueError, match="output_padding"):
        ConvTranspose2d(2, 2, 3, stride=2, output_padding=2, device="cpu")
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        Upsample()
    with pytest.raises(ValueError, match="return_indices"):
        AdaptiveMaxPool2d(2, return_indices=True)
    with pytest.raises(ValueError, match="p must be in"):
        Dropout2d(1.5)
    with pytest.raises(ValueError, match="num_parameters"):
        PReLU(0)


def test_functional_errors(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.zeros((1, 2, 3, 3), np.float32))
    with pytest.raises(ValueError, match="mode must be"):
        F.interpolate(x, size=2, mode="linear")
    with pytest.raises(ValueError, match="align_corners only applies"):
        F.interpolate(x, size=2, align_corners=True)
    with pytest.raises(ValueError, match="must be 3-D"):
        F.conv1d(x, x)
    with pytest.raises(ValueError, match="weight must have 1 or 2"):
        F.prelu(x, Tensor.from_host(dev.queue, np.ones(3, np.float32)))
    with pytest.raises(TypeError, match="both dim=1 and axis=0"):
        F.softmax(x, dim=1, axis=0)
    with pytest.raises(ValueError, match="input must be"):
        F.dropout2d(Tensor.from_host(dev.queue, np.zeros((2, 3), np.float32)))


@pytest.mark.filterwarnings("ignore:Using padding=.same.")
def test_references_match_torch() -> None:
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional

    def t(a: Array) -> Any:
        return torch.from_numpy(np.ascontiguousarray(a))

    for name, (_, ref, args, kwargs, _opts) in CASES.items():
        if name.startswith(("softmax", "log_softmax", "conv2d_same")):
            continue
        torch_fn = {"conv1d": tf.conv1d, "group": tf.group_norm, "nearest": tf.interpolate,
                    "bilinear": tf.interpolate, "linear": tf.interpolate,
                    "adaptive": tf.adaptive_max_pool2d, "elu": tf.elu,
                    "hardswish": tf.hardswish, "prelu": tf.prelu, "softplus": tf.softplus,
                    "mish": tf.mish, "hardsigmoid": tf.hardsigmoid,
                    "hardtanh": tf.hardtanh}[name.split("_")[0]]
        targs = [t(a) if isinstance(a, np.ndarray) else a for a in args]
        if name.startswith(("nearest", "bilinear", "linear")) and "mode" not in kwargs:
            kwargs = {**kwargs, "mode": "nearest"}
        want = torch_fn(*targs, **kwargs).numpy()
        np.testing.assert_allclose(ref(*args, **kwargs), want, atol=1e-12, err_msg=name)
    x, w = _R.standard_normal((1, 2, 5, 6)), _R.standard_normal((3, 2, 2, 3))
    np.testing.assert_allclose(ref_conv2d_same(x, w), tf.conv2d(t(x), t(w), padding="same"),
                               atol=1e-12)


def test_batchnorm_counts_batches_and_loads_torch_state(dev: DeviceHandle) -> None:
    bn = BatchNorm2d(3, device=dev)
    x = Tensor.from_host(dev.queue, _R.standard_normal((4, 3, 5, 5)).astype(np.float32))
    bn(x)
    bn(x)
    bn.eval()
    bn(x)  # eval forwards do not count
    state = bn.state_dict()
    assert state["num_batches_tracked"].shape == () and state["num_batches_tracked"].dtype == (
        "int64")
    assert int(state["num_batches_tracked"].to_host()) == 2
    fresh = BatchNorm2d(3, device=dev)
    fresh.load_state_dict({k: v.to_host() for k, v in state.items()})
    assert int(fresh.num_batches_tracked.to_host()) == 2
    torch = pytest.importorskip("torch")
    tb = torch.nn.BatchNorm2d(3)
    for _ in range(3):
        tb(torch.randn(4, 3, 5, 5))
    fresh.load_state_dict({k: v.numpy() for k, v in tb.state_dict().items()})
    assert int(fresh.state_dict()["num_batches_tracked"].to_host()) == 3
    np.testing.assert_allclose(fresh.running_var.to_host(), tb.running_var.numpy(), rtol=1e-6)
    back = tb.load_state_dict({k: torch.from_numpy(np.asarray(v.to_host()))
                               for k, v in bn.state_dict().items()})
    assert not back.missing_keys and not back.unexpected_keys
    assert int(tb.num_batches_tracked) == 2


def ref_normalize(x: Array, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Any:
    norm = (np.abs(x) ** p).sum(axis=dim, keepdims=True) ** (1 / p)
    return x / np.maximum(norm, eps)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_normalize(dev: DeviceHandle, p: float) -> None:
    check_grad(dev, F.normalize, ref_normalize, (_R.standard_normal((3, 5, 2)),),
               {"p": p, "dim": 1}, scale=4)


def test_functional_argument_orders_follow_torch(dev: DeviceHandle) -> None:
    """Positional calls mean what they mean in PyTorch: avg_pool2d's ceil_mode comes before
    count_include_pad, pad's third argument is the mode, batch_norm defaults to eval."""
    x = Tensor.from_host(dev.queue, np.arange(1.0, 26.0, dtype=np.float32).reshape(1, 1, 5, 5))
    assert F.avg_pool2d(x, 2, 2, 0, True).shape == (1, 1, 3, 3)  # ceil_mode=True (floor: 2)
    corner = F.avg_pool2d(x, 2, 2, 1, False, False).to_host()[0, 0, 0, 0]
    assert corner == 1.0  # count_include_pad=False: x[0, 0] alone, not 1/4
    with pytest.raises(ValueError, match="divisor_override"):
        F.avg_pool2d(x, 2, divisor_override=3)  # type: ignore[call-arg]
    # mypy sees netcl.autograd.ops.pad's signature (functional star-imports it first)
    padded = F.pad(x, (1, 0, 0, 2), "constant", -1.0).to_host()  # type: ignore[call-arg,arg-type]
    assert padded.shape == (1, 1, 7, 6) and padded[0, 0, 0, 0] == -1.0
    with pytest.raises(ValueError, match="only 'constant'"):
        F.pad(x, (1, 1), "reflect")  # type: ignore[arg-type]
    rm = Tensor.from_host(dev.queue, np.full(1, 10.0, np.float32))
    rv = Tensor.from_host(dev.queue, np.full(1, 4.0, np.float32))
    y = F.batch_norm(x, rm, rv)  # eval: the running statistics
    np.testing.assert_allclose(y.to_host(), (x.to_host() - 10.0) / np.sqrt(4.0 + 1e-5),
                               rtol=1e-5)
    np.testing.assert_allclose(rm.to_host(), [10.0])  # not updated


def test_functional_argument_orders_match_torch() -> None:
    torch = pytest.importorskip("torch")
    x = np.arange(25.0).reshape(1, 1, 5, 5)
    want = torch.nn.functional.avg_pool2d(torch.from_numpy(x), 2, 2, 1, True, False).numpy()
    got = F.avg_pool2d(Tensor.from_host(Linear(1, 1, device="cpu").weight.queue, x),
                       2, 2, 1, True, False).to_host()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    xs = _R.standard_normal((3, 5, 2))
    np.testing.assert_allclose(
        ref_normalize(xs, 3.0), torch.nn.functional.normalize(torch.from_numpy(xs), 3.0),
        rtol=1e-12)


def test_embedding_padding_idx(dev: DeviceHandle) -> None:
    emb = Embedding(6, 3, padding_idx=-1, device=dev)
    assert emb.padding_idx == 5 and repr(emb) == "Embedding(6, 3, padding_idx=5)"
    np.testing.assert_array_equal(emb.weight.to_host()[5], 0.0)
    idx = Tensor.from_host(dev.queue, np.array([[5, 1], [1, 5]]))
    with ag.Tape() as tape:
        out = emb(idx)
        loss = ag.ops.sum(ag.ops.mul(out, 2.0))
    tape.backward(loss)
    np.testing.assert_array_equal(out.to_host()[0, 0], 0.0)
    assert emb.weight.grad is not None
    grad = emb.weight.grad.to_host()
    np.testing.assert_array_equal(grad[5], 0.0)  # the padding row learns nothing
    np.testing.assert_allclose(grad[1], 4.0)  # used twice, d(2 out)/d(row) = 2 each
    with pytest.raises(ValueError, match="padding_idx must be in"):
        Embedding(4, 2, padding_idx=4, device=dev)
