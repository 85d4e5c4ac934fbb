"""download_into / upload_from: copies into and out of existing host arrays on every backend,
views (an offset into the buffer) included, and the errors for arrays that do not fit."""

from __future__ import annotations

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor, narrow_view
from netcl.core.transfer import download_into, upload_from, wait_events


@pytest.mark.parametrize("size", [1, 7, 33, 257])
def test_download_into_a_slice_and_upload_back(dev: DeviceHandle, size: int) -> None:
    data = np.arange(size * 3, dtype=np.float32).reshape(3, size)
    t = Tensor.from_host(dev.queue, data)
    view = narrow_view(t, size, (size,))  # the middle row: a nonzero offset
    flat = np.full(size + 2, -1.0, np.float32)
    wait_events([download_into(view, flat[1:-1])])
    np.testing.assert_array_equal(flat, np.r_[-1.0, data[1], -1.0])
    wait_events([upload_from(view, flat[1:-1] * 2)])
    want = data.copy()
    want[1] *= 2
    np.testing.assert_array_equal(t.to_host(), want)


def test_empty_tensor_needs_no_copy(dev: DeviceHandle) -> None:
    t = Tensor.from_shape(dev.queue, (0, 3))
    assert download_into(t, np.empty(0, np.float32)) is None
    assert upload_from(t, np.empty(0, np.float32)) is None


@pytest.mark.parametrize("host", [np.zeros(4, np.float64), np.zeros(5, np.float32),
                                  np.zeros(8, np.float32)[::2]],
                         ids=["dtype", "size", "strided"])
def test_arrays_that_do_not_fit_are_refused(dev: DeviceHandle, host: np.ndarray) -> None:
    t = Tensor.from_shape(dev.queue, (4,))
    with pytest.raises(ValueError, match=r"download_into: the host array must be C-contiguous"):
        download_into(t, host)
    with pytest.raises(ValueError, match=r"upload_from: .* for a float32 tensor of shape \(4,\)"):
        upload_from(t, host)
