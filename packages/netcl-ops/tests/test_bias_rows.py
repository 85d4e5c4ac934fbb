"""``bias_add``'s two OpenCL kernels, each forced on every OpenCL device (NOTE [ Bias add on
CPU devices ] in netcl.ops._bias): the per-element one GPUs run and the per-run one of CPU
devices, over odd shapes, every axis and offset views, against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.testing import supports_dtype
from netcl.ops import _bias, bias_add
from netcl.ops.testing import offset_view

RNG = np.random.default_rng(7)
SHAPES = [((7, 33), -1), ((2, 5, 3, 7), 1), ((3, 4, 6), -1), ((9,), 0), ((2, 3, 4), 0),
          ((65, 1), -1), ((1, 129), -1)]
TOL = {"float16": 2e-3, "float32": 1e-6, "float64": 1e-12}


@pytest.mark.parametrize("per_row", [True, False], ids=["rows", "elements"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_bias_add_kernels(dev: DeviceHandle, dtype: str, per_row: bool,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend runs no OpenCL kernel")
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    monkeypatch.setattr(_bias, "ln_per_row", lambda device: per_row)
    for shape, axis in SHAPES:
        x: Any = RNG.standard_normal(shape)
        b: Any = RNG.standard_normal(shape[axis])
        x, b = x.astype(dtype), b.astype(dtype)
        got = bias_add(offset_view(dev, x, 3, dtype), offset_view(dev, b, 2, dtype), axis)
        ax = axis % len(shape)
        want = x.astype(np.float64) + b.astype(np.float64).reshape(
            (-1,) + (1,) * (len(shape) - ax - 1))
        np.testing.assert_allclose(got.to_host().astype(np.float64), want,
                                   rtol=TOL[dtype], atol=TOL[dtype], err_msg=str((shape, axis)))
