"""The :mod:`netcl.data.augment` transforms as OpenCL kernels, on a batch already on a device.

The randomness is drawn on the host by the CPU transform's own ``draw`` and handed to both
paths, so for the same params the device result matches ``transform.apply`` on the CPU:
exactly for crop, flip, erase and normalise (kernels are built with ``FP_CONTRACT OFF`` and
the same float32 steps), and to float32 rounding for colour jitter (its per-image mean is a
reduction, summed in another order).

Batches are :class:`pyopencl.array.Array` or netcl Tensors (recognised by their interface) of
dtype uint8 or float32, C-contiguous, ``(N, C, H, W)``. The command queue is handed in (this
layer imports no other netcl layer) and must be in order. Each program is built once per
context and dtype, its ``cl.Kernel`` objects kept; per-image parameters (offsets, flags,
boxes, factors) travel in one small device buffer per queue that is reused from call to call,
so a call allocates only its output arrays (pass ``allocator``, e.g. a
:class:`pyopencl.tools.MemoryPool`, to pool those too; a Tensor's result comes from its
device's pool).

Needs pyopencl: ``pip install 'netcl-data[opencl]'``. Where this layer picks a device by
itself (:func:`default_queue`, :func:`opencl_devices`) it obeys netcl-core's probe verdicts,
read from the same cache file: a device found unusable there is skipped with its reason, and a
device not probed yet must build this module's kernels first.

Examples:
    >>> import numpy as np, pyopencl as cl, pyopencl.array as cl_array
    >>> from netcl.data import augment, augment_gpu
    >>> queue = augment_gpu.default_queue()
    >>> x = np.random.default_rng(0).integers(0, 256, (8, 3, 32, 32), dtype=np.uint8)
    >>> pipeline = augment.Compose([augment.RandomCrop(32, padding=4),
    ...                             augment.RandomHorizontalFlip(),
    ...                             augment.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])
    >>> params = pipeline.draw(np.random.default_rng(1), x.shape)
    >>> y = augment_gpu.apply(queue, pipeline, cl_array.to_device(queue, x), params)
    >>> bool(np.array_equal(y.get(), pipeline.apply(x, params)))
    True
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

try:
    import pyopencl as cl
    import pyopencl.array as cl_array
    from pyopencl.tools import context_dependent_memoize
except ImportError as _exc:  # pragma: no cover - exercised only without pyopencl
    raise ImportError(
        "netcl.data.augment_gpu needs pyopencl, which is not installed; install it with "
        "`pip install 'netcl-data[opencl]'` (and an OpenCL driver, e.g. "
        "`pip install pocl-binary-distribution` for a CPU device)"
    ) from _exc

from . import augment
from ._cl_devices import device_key, register_pip_runtimes, stored_verdicts
from .augment import Shape

__all__ = ["apply", "default_queue", "device_report", "opencl_devices", "supported"]

_CTYPES = {np.dtype(np.uint8): "uchar", np.dtype(np.float32): "float"}

# -- kernel sources: one program per (context, input dtype) ----------------------------------

_PREAMBLE = """
#pragma OPENCL FP_CONTRACT OFF
typedef {ctype} T;
"""

_CROP_SRC = """
__kernel void aug_crop(__global const T *x, long x_off, __global T *y,
                   __global const int *meta, int meta_off,
                   int C, int H, int W, int h, int w, int pad, T fill)
{
    const int j = get_global_id(0), i = get_global_id(1), nc = get_global_id(2);
    const int n = nc / C;
    const int si = meta[meta_off + 2 * n] + i - pad;
    const int sj = meta[meta_off + 2 * n + 1] + j - pad;
    T v = fill;
    if (si >= 0 && si < H && sj >= 0 && sj < W)
        v = x[x_off + ((size_t)nc * H + si) * W + sj];
    y[((size_t)nc * h + i) * w + j] = v;
}
"""

_FLIP_SRC = """
__kernel void aug_hflip(__global const T *x, long x_off, __global T *y,
                    __global const int *meta, int meta_off, int C, int H, int W)
{
    const int j = get_global_id(0), i = get_global_id(1), nc = get_global_id(2);
    const int sj = meta[meta_off + nc / C] ? W - 1 - j : j;
    y[((size_t)nc * H + i) * W + j] = x[x_off + ((size_t)nc * H + i) * W + sj];
}
"""

_ERASE_SRC = """
__kernel void aug_erase(__global const T *x, long x_off, __global T *y,
                    __global const int *meta, int meta_off, int C, int H, int W, T value)
{
    const int j = get_global_id(0), i = get_global_id(1), nc = get_global_id(2);
    __global const int *box = meta + meta_off + 4 * (nc / C);
    const size_t k = ((size_t)nc * H + i) * W + j;
    const int inside = i >= box[0] && i < box[0] + box[2] && j >= box[1] && j < box[1] + box[3];
    y[k] = inside ? value : x[x_off + k];
}
"""

_NORMALIZE_SRC = """
__kernel void aug_normalize(__global const T *x, long x_off, __global float *y,
                        __global const int *meta, int meta_off, int C, int H, int W)
{
    const int j = get_global_id(0), i = get_global_id(1), nc = get_global_id(2);
    const int c = nc % C;
    const float a = as_float(meta[meta_off + c]), b = as_float(meta[meta_off + C + c]);
    const size_t k = ((size_t)nc * H + i) * W + j;
    y[k] = (float)x[x_off + k] * a + b;
}
"""

# Kernel names carry a prefix: "normalize" is an OpenCL built-in.
# Meta of colour jitter: N x (brightness, contrast, saturation), then C gray weights, as floats.
_JITTER_SRC = """
__kernel void aug_jitter_mean(__global const T *x, long x_off, __global float *means,
                          __global const int *meta, int meta_off, int N, int C, int HW,
                          float scale, __local float *partial)
{
    const int n = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    __global const int *wts = meta + meta_off + 3 * N;
    const float fb = as_float(meta[meta_off + 3 * n]);
    float acc = 0.0f;
    for (int p = lid; p < HW; p += L) {
        float g = 0.0f;
        for (int c = 0; c < C; ++c) {
            const float v = clamp(((float)x[x_off + ((size_t)n * C + c) * HW + p] * scale) * fb,
                                  0.0f, 1.0f);
            g = c == 0 ? v * as_float(wts[0]) : g + v * as_float(wts[c]);
        }
        acc += g;
    }
    partial[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = L / 2; s > 0; s >>= 1) {
        if (lid < s) partial[lid] += partial[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) means[n] = partial[0] / (float)HW;
}

__kernel void aug_jitter_apply(__global const T *x, long x_off, __global float *y,
                           __global const float *means, __global const int *meta, int meta_off,
                           int N, int C, int HW, float scale)
{
    const int p = get_global_id(0), n = get_global_id(1);
    __global const int *f = meta + meta_off + 3 * n;
    __global const int *wts = meta + meta_off + 3 * N;
    const float fb = as_float(f[0]), fc = as_float(f[1]), fs = as_float(f[2]), m = means[n];
    float g = 0.0f;
    for (int c = 0; c < C; ++c) {
        const size_t k = ((size_t)n * C + c) * HW + p;
        float v = clamp(((float)x[x_off + k] * scale) * fb, 0.0f, 1.0f);
        v = clamp((v - m) * fc + m, 0.0f, 1.0f);
        y[k] = v;
        g = c == 0 ? v * as_float(wts[0]) : g + v * as_float(wts[c]);
    }
    for (int c = 0; c < C; ++c) {
        const size_t k = ((size_t)n * C + c) * HW + p;
        y[k] = clamp((y[k] - g) * fs + g, 0.0f, 1.0f);
    }
}
"""

_SOURCES = (_CROP_SRC, _FLIP_SRC, _ERASE_SRC, _NORMALIZE_SRC, _JITTER_SRC)

_I32, _I64, _F32 = np.int32, np.int64, np.float32

# Scalar argument dtypes per kernel (None for buffers and local memory); "T" is the input type.
_SIGNATURES: dict[str, list[Any]] = {
    "aug_crop": [None, _I64, None, None, _I32, _I32, _I32, _I32, _I32, _I32, _I32, "T"],
    "aug_hflip": [None, _I64, None, None, _I32, _I32, _I32, _I32],
    "aug_erase": [None, _I64, None, None, _I32, _I32, _I32, _I32, "T"],
    "aug_normalize": [None, _I64, None, None, _I32, _I32, _I32, _I32],
    "aug_jitter_mean": [None, _I64, None, None, _I32, _I32, _I32, _I32, _F32, None],
    "aug_jitter_apply": [None, _I64, None, None, None, _I32, _I32, _I32, _I32, _F32],
}


@dataclass
class _Kernels:
    """The built kernels of one program, and per-device work-group sizes for reductions."""

    kernels: dict[str, cl.Kernel]
    reduce_size: dict[int, int] = field(default_factory=dict)

    def __getitem__(self, name: str) -> cl.Kernel:
        return self.kernels[name]

    def reduction_group(self, name: str, device: cl.Device) -> int:
        """The largest power of two <= 256 that ``name`` may use as work-group size."""
        key = device.int_ptr
        if key not in self.reduce_size:
            limit = min(
                256,
                self.kernels[name].get_work_group_info(
                    cl.kernel_work_group_info.WORK_GROUP_SIZE, device
                ),
            )
            self.reduce_size[key] = 1 << (max(1, int(limit)).bit_length() - 1)
        return self.reduce_size[key]


def _build(context: cl.Context, source: str, what: str) -> cl.Program:
    try:
        program: cl.Program = cl.Program(context, source).build()
        return program
    except cl.RuntimeError as exc:
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        folder = Path(tempfile.gettempdir()) / "netcl-data-kernels"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{what}-{digest}.cl"
        path.write_text(source)
        devices = ", ".join(d.name for d in context.devices)
        raise RuntimeError(
            f"augment_gpu: building the {what} kernels failed on {devices} (options: none); "
            f"source saved to {path}\n{exc}"
        ) from exc


@context_dependent_memoize
def _get_kernels(context: cl.Context, dtype: np.dtype[Any]) -> _Kernels:
    """Build the augmentation program for input ``dtype`` once per context."""
    ctype = _CTYPES[dtype]
    source = _PREAMBLE.format(ctype=ctype) + "".join(_SOURCES)
    program = _build(context, source, f"augment_{ctype}")
    kernels: dict[str, cl.Kernel] = {}
    for name, signature in _SIGNATURES.items():
        kernel = cl.Kernel(program, name)
        kernel.set_scalar_arg_dtypes([dtype if s == "T" else s for s in signature])
        kernels[name] = kernel
    return _Kernels(kernels)


# -- which devices this layer may pick by itself ---------------------------------------------

_AUTO_ORDER = (cl.device_type.GPU, cl.device_type.ACCELERATOR, cl.device_type.CPU)
_own_verdicts: dict[str, tuple[bool, str]] = {}
# Intel's CPU runtime frees a context once Python drops it even while a queue on it lives
# (queue.context then fails with INVALID_CONTEXT), so the context is kept with its queue.
_default_queues: dict[str, tuple[cl.Context, cl.CommandQueue]] = {}


def _verdict(dev: cl.Device, stored: dict[str, tuple[bool, str]]) -> tuple[bool, str]:
    """netcl-core's stored verdict, else whether this module's kernels build there."""
    key = device_key(dev)
    if key in stored:
        return stored[key]
    if key not in _own_verdicts:
        try:
            _get_kernels(cl.Context([dev]), np.dtype(np.uint8))
            _own_verdicts[key] = (True, "")
        except Exception as exc:  # a build failure or a driver error
            _own_verdicts[key] = (False, str(exc).splitlines()[0])
    return _own_verdicts[key]


def opencl_devices() -> tuple[list[cl.Device], list[tuple[cl.Device, str]]]:
    """Usable OpenCL devices (GPU first, as netcl's ``auto``) and ``(device, reason)`` skipped.

    Examples:
        >>> usable, skipped = opencl_devices()
        >>> all(isinstance(reason, str) for _, reason in skipped)
        True
    """
    register_pip_runtimes()
    try:
        found = [d for p in cl.get_platforms() for d in p.get_devices()]
    except cl.Error:  # no ICD loader or no platform
        return [], []
    rank = {kind: i for i, kind in enumerate(_AUTO_ORDER)}
    # netcl-core's auto order: by kind, and PoCL before other CPU runtimes (NOTE [ Which OpenCL
    # CPU runtime auto prefers ] in netcl.core.device)
    found.sort(key=lambda d: (min((r for k, r in rank.items() if d.type & k), default=len(rank)),
                              "portable computing language" not in d.platform.name.lower()))
    stored = stored_verdicts()
    usable, skipped = [], []
    for dev in found:
        ok, reason = _verdict(dev, stored)
        if ok:
            usable.append(dev)
        else:
            skipped.append((dev, reason))
    return usable, skipped


def default_queue() -> cl.CommandQueue:
    """An in-order queue on the best usable OpenCL device (GPU, accelerator, then CPU).

    Raises:
        RuntimeError: no usable OpenCL device; the message names each one skipped and why.
    """
    usable, skipped = opencl_devices()
    if not usable:
        why = "; ".join(f"{d.platform.name.strip()}: {d.name.strip()} ({r})" for d, r in skipped)
        raise RuntimeError(
            "augment_gpu.default_queue: no usable OpenCL device"
            + (f"; skipped {why}" if why else "")
            + "; install one with `pip install 'netcl-data[intel-cpu]'` or a GPU driver"
        )
    key = device_key(usable[0])
    if key not in _default_queues:
        context = cl.Context([usable[0]])
        _default_queues[key] = (context, cl.CommandQueue(context))
    return _default_queues[key][1]


def device_report() -> list[str]:
    """The test session header: OpenCL devices under test and those skipped, with the reason."""
    usable, skipped = opencl_devices()
    ids = ["cpu"] + [f"cl:{d.platform.name.strip()}:{d.name.strip()}" for d in usable]
    lines = [f"netcl devices under test: {', '.join(ids)}"]
    if skipped:
        lines.append(
            "netcl devices skipped: "
            + "; ".join(f"cl:{d.platform.name.strip()}:{d.name.strip()} ({r})" for d, r in skipped)
        )
    return lines


# -- parameters: one reused device buffer per queue ------------------------------------------


class _MetaBuffer:
    """A grow-only device buffer of int32 words, and the host array it is copied from."""

    def __init__(self, context: cl.Context) -> None:
        self.context = context
        self.capacity = 0
        self.device: cl.Buffer | None = None
        self.host = np.empty(0, dtype=np.int32)
        self.pending: cl.Event | None = None
        self.scratch: cl.Buffer | None = None
        self.scratch_floats = 0

    def upload(
        self, queue: cl.CommandQueue, chunks: list[npt.NDArray[np.int32]]
    ) -> tuple[cl.Buffer, list[int]]:
        offsets = np.cumsum([0, *(len(c) for c in chunks)]).tolist()
        total = max(1, offsets[-1])
        if self.pending is not None:
            self.pending.wait()  # the last copy must have read the host array before we refill it
        device = self.device
        if device is None or total > self.capacity:
            self.capacity = max(total, 2 * self.capacity, 1024)
            device = cl.Buffer(self.context, cl.mem_flags.READ_ONLY, 4 * self.capacity)
            self.device = device
            self.host = np.empty(self.capacity, dtype=np.int32)
        for chunk, start in zip(chunks, offsets, strict=False):
            self.host[start : start + len(chunk)] = chunk
        self.pending = cl.enqueue_copy(queue, device, self.host[:total], is_blocking=False)
        return device, offsets[:-1]

    def floats(self, count: int) -> cl.Buffer:
        """A reused device scratch buffer of at least ``count`` float32s."""
        if self.scratch is None or count > self.scratch_floats:
            self.scratch_floats = max(count, 2 * self.scratch_floats, 256)
            self.scratch = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, 4 * self.scratch_floats)
        return self.scratch


@context_dependent_memoize
def _meta_buffers(context: cl.Context) -> dict[int, _MetaBuffer]:
    return {}


def _meta_buffer(queue: cl.CommandQueue) -> _MetaBuffer:
    buffers = _meta_buffers(queue.context)
    key = queue.int_ptr
    if key not in buffers:
        buffers[key] = _MetaBuffer(queue.context)
    return buffers[key]


def _words(values: npt.NDArray[Any]) -> npt.NDArray[np.int32]:
    """Integers as int32 words; float32 arrays bit-cast (the kernels read them with as_float)."""
    if values.dtype == np.float32:
        return np.ascontiguousarray(values).ravel().view(np.int32)
    return np.ascontiguousarray(values, dtype=np.int32).ravel()


# -- one entry per transform: pack its params on the host, enqueue its kernels ---------------


@dataclass(frozen=True)
class _Stage:
    """One transform on a batch of ``shape``/``dtype``, its params packed as int32 words."""

    transform: Any
    params: Any
    shape: Shape
    dtype: np.dtype[Any]
    meta: npt.NDArray[np.int32]


Runner = Callable[[cl.CommandQueue, _Stage, cl_array.Array, cl.Buffer, int, Any], cl_array.Array]


@dataclass(frozen=True)
class _DeviceOp:
    pack: Callable[[Any, Any, Shape, np.dtype[Any]], npt.NDArray[np.int32]]
    run: Runner
    out_dtype: Callable[[np.dtype[Any]], np.dtype[Any]]


def _same(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return dtype


def _float32(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return np.dtype(np.float32)


def _buffer(x: cl_array.Array) -> cl.Buffer:
    data = x.base_data
    if not isinstance(data, cl.Buffer):
        raise TypeError(
            f"augment_gpu.apply: arrays must live in a cl.Buffer, got {type(data).__name__} "
            "(SVM-backed arrays are not supported)"
        )
    return data


def _src(x: cl_array.Array) -> tuple[cl.Buffer, np.int64]:
    return _buffer(x), np.int64(x.offset // x.dtype.itemsize)


def _pixels_grid(shape: Shape) -> tuple[int, int, int]:
    n, c, h, w = shape
    return (w, h, n * c)


def _run_crop(
    queue: cl.CommandQueue, st: _Stage, x: cl_array.Array, meta: cl.Buffer, off: int, alloc: Any
) -> cl_array.Array:
    t: augment.RandomCrop = st.transform
    _, c, height, width = st.shape
    out_shape = t.output_shape(st.shape)
    y = cl_array.empty(queue, out_shape, st.dtype, allocator=alloc)
    fill = augment.cast_scalar(t.op, "fill", t.fill, st.dtype)
    kernel = _get_kernels(queue.context, st.dtype)["aug_crop"]
    event = kernel(
        queue,
        _pixels_grid(out_shape),
        None,
        *_src(x),
        _buffer(y),
        meta,
        off,
        c,
        height,
        width,
        t.size[0],
        t.size[1],
        t.padding,
        fill,
    )
    y.add_event(event)
    return y


def _run_flip(
    queue: cl.CommandQueue, st: _Stage, x: cl_array.Array, meta: cl.Buffer, off: int, alloc: Any
) -> cl_array.Array:
    _, c, height, width = st.shape
    y = cl_array.empty(queue, st.shape, st.dtype, allocator=alloc)
    kernel = _get_kernels(queue.context, st.dtype)["aug_hflip"]
    event = kernel(
        queue, _pixels_grid(st.shape), None, *_src(x), _buffer(y), meta, off, c, height, width
    )
    y.add_event(event)
    return y


def _run_erase(
    queue: cl.CommandQueue, st: _Stage, x: cl_array.Array, meta: cl.Buffer, off: int, alloc: Any
) -> cl_array.Array:
    t: augment.RandomErasing = st.transform
    _, c, height, width = st.shape
    y = cl_array.empty(queue, st.shape, st.dtype, allocator=alloc)
    value = augment.cast_scalar(t.op, "value", t.value, st.dtype)
    kernel = _get_kernels(queue.context, st.dtype)["aug_erase"]
    event = kernel(
        queue,
        _pixels_grid(st.shape),
        None,
        *_src(x),
        _buffer(y),
        meta,
        off,
        c,
        height,
        width,
        value,
    )
    y.add_event(event)
    return y


def _pack_normalize(
    t: augment.Normalize, params: None, shape: Shape, dtype: np.dtype[Any]
) -> npt.NDArray[np.int32]:
    a, b = t.coefficients(dtype, shape[1])
    return _words(np.concatenate([a, b]))


def _run_normalize(
    queue: cl.CommandQueue, st: _Stage, x: cl_array.Array, meta: cl.Buffer, off: int, alloc: Any
) -> cl_array.Array:
    _, c, height, width = st.shape
    y = cl_array.empty(queue, st.shape, np.float32, allocator=alloc)
    kernel = _get_kernels(queue.context, st.dtype)["aug_normalize"]
    event = kernel(
        queue, _pixels_grid(st.shape), None, *_src(x), _buffer(y), meta, off, c, height, width
    )
    y.add_event(event)
    return y


def _pack_jitter(
    t: augment.ColorJitter, params: augment.JitterParams, shape: Shape, dtype: np.dtype[Any]
) -> npt.NDArray[np.int32]:
    factors = t.check_params(shape, params)
    return _words(np.concatenate([factors.ravel(), augment.gray_weights(shape[1])]))


def _run_jitter(
    queue: cl.CommandQueue, st: _Stage, x: cl_array.Array, meta: cl.Buffer, off: int, alloc: Any
) -> cl_array.Array:
    n, c, height, width = st.shape
    kernels = _get_kernels(queue.context, st.dtype)
    y = cl_array.empty(queue, st.shape, np.float32, allocator=alloc)
    means = _meta_buffer(queue).floats(n)
    scale = np.float32(augment.unit_scale(st.dtype))
    group = kernels.reduction_group("aug_jitter_mean", queue.device)
    # Any: pyopencl's stubs leave LocalMemory out of the kernel argument types.
    partial_sums: Any = cl.LocalMemory(4 * group)
    kernels["aug_jitter_mean"](
        queue,
        (n * group,),
        (group,),
        *_src(x),
        means,
        meta,
        off,
        n,
        c,
        height * width,
        scale,
        partial_sums,
    )
    event = kernels["aug_jitter_apply"](
        queue,
        (height * width, n),
        None,
        *_src(x),
        _buffer(y),
        means,
        meta,
        off,
        n,
        c,
        height * width,
        scale,
    )
    y.add_event(event)
    return y


_DEVICE_OPS: dict[type, _DeviceOp] = {
    augment.RandomCrop: _DeviceOp(
        lambda t, p, shape, dtype: _words(t.check_params(shape, p)), _run_crop, _same
    ),
    augment.RandomHorizontalFlip: _DeviceOp(
        lambda t, p, shape, dtype: _words(t.check_params(shape, p)), _run_flip, _same
    ),
    augment.RandomErasing: _DeviceOp(
        lambda t, p, shape, dtype: _words(t.check_params(shape, p)), _run_erase, _same
    ),
    augment.Normalize: _DeviceOp(_pack_normalize, _run_normalize, _float32),
    augment.ColorJitter: _DeviceOp(_pack_jitter, _run_jitter, _float32),
}


def supported(transform: object) -> bool:
    """Whether :func:`apply` can run ``transform`` (a Compose of supported transforms counts).

    Examples:
        >>> from netcl.data import augment
        >>> supported(augment.Compose([augment.RandomCrop(8), augment.Normalize(0.5, 0.5)]))
        True
    """
    if isinstance(transform, augment.Compose):
        return all(supported(t) for t in transform.transforms)
    return type(transform) in _DEVICE_OPS


def _flatten(transform: Any, params: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(transform, augment.Compose):
        if not isinstance(params, tuple) or len(params) != len(transform.transforms):
            raise ValueError(
                f"augment_gpu.apply: a Compose of {len(transform.transforms)} transforms needs a "
                f"tuple of as many params (from its draw), got {type(params).__name__}"
            )
        for t, p in zip(transform.transforms, params, strict=True):
            yield from _flatten(t, p)
    else:
        yield transform, params


def _check_device_batch(x: object) -> Shape:
    if not isinstance(x, cl_array.Array):
        raise TypeError(
            f"augment_gpu.apply: x must be a pyopencl.array.Array, got {type(x).__name__}"
        )
    if x.ndim != 4:
        raise ValueError(f"augment_gpu.apply: x must be (N, C, H, W), got shape {x.shape}")
    if x.dtype not in _CTYPES:
        raise TypeError(
            f"augment_gpu.apply: x must be uint8 or float32, got {x.dtype} (convert it first)"
        )
    if not x.flags.c_contiguous:
        raise ValueError(f"augment_gpu.apply: x must be C-contiguous, got strides {x.strides}")
    n, c, h, w = x.shape
    return (n, c, h, w)


def _is_tensor(x: object) -> bool:
    """A netcl Tensor, recognised by its interface (this layer imports no other netcl layer)."""
    return all(hasattr(x, a) for a in ("backend", "buffer", "offset", "queue", "shape",
                                       "dtype")) and hasattr(type(x), "from_shape")


def _tensor_view(queue: cl.CommandQueue, x: Any) -> cl_array.Array:
    """A device array over a netcl Tensor's storage (no copy)."""
    dtype = np.dtype(str(x.dtype))
    if dtype not in _CTYPES:
        raise TypeError(
            f"augment_gpu.apply: x must be uint8 or float32, got {x.dtype} (convert it first)"
        )
    if x.queue is not queue and hasattr(x, "wait"):
        x.wait()  # produced on another queue: its pending work must finish first
    return cl_array.Array(queue, tuple(x.shape), dtype, data=x.buffer,
                          offset=int(x.offset) * dtype.itemsize)


def _apply_tensor(queue: cl.CommandQueue | None, transform: augment.Transform[Any], x: Any,
                  params: Any, allocator: Any) -> Any:
    """:func:`apply` on a netcl Tensor: a Tensor of the same class comes back. On the NumPy
    backend the CPU transform runs (same results); on OpenCL the kernels read the tensor's
    buffer and the last one writes into a new tensor's (from its device's pool)."""
    queue = x.queue if queue is None else queue
    if x.backend != "cl":
        out = transform.apply(np.asarray(x.to_host()), params)
        return type(x).from_host(x.queue, out)
    view = _tensor_view(queue, x)
    shape, dtype = _check_device_batch(view), view.dtype
    for t, _ in _flatten(transform, params):
        op = _DEVICE_OPS.get(type(t))
        if op is not None:
            shape, dtype = t.output_shape(shape), op.out_dtype(dtype)
    result = type(x).from_shape(x.queue, shape, dtype.name, fill=None)
    if 0 in shape:
        return result

    def last(nbytes: int) -> Any:  # the final stage writes straight into ``result``
        return result.buffer

    y = _run(queue, transform, view, params, allocator, last)
    if y.base_data is not result.buffer:  # pragma: no cover - every stage allocates once
        raise RuntimeError("augment_gpu.apply: the last stage did not write the result tensor")
    return result


def apply(
    queue: cl.CommandQueue | None,
    transform: augment.Transform[Any],
    x: Any,
    params: Any,
    *,
    allocator: Any = None,
) -> Any:
    """Run ``transform`` with ``params`` (from ``transform.draw``) on the device batch ``x``.

    Args:
        queue: an in-order command queue on the context that holds ``x`` (None: the queue of
            ``x`` when it is a netcl Tensor).
        transform: one of the :mod:`netcl.data.augment` transforms, or a Compose of them.
        x: the batch: a C-contiguous uint8 or float32 :class:`pyopencl.array.Array`, or a
            netcl Tensor (a Tensor comes back: on OpenCL computed by the kernels from the
            tensor's buffer with no copy, on the NumPy backend by ``transform.apply``).
        params: what ``transform.draw(rng, x.shape)`` returned.
        allocator: passed to :func:`pyopencl.array.empty` for the output arrays.

    Returns:
        A new device array (or Tensor), equal to ``transform.apply(x.get(), params)``.

    Raises:
        TypeError: ``x`` is not a uint8/float32 device array or Tensor, or a transform has no
            kernel.
        ValueError: the queue is out of order, or ``x``/``params`` have the wrong shape.
    """
    if _is_tensor(x):
        return _apply_tensor(queue, transform, x, params, allocator)
    if queue is None:
        raise TypeError("augment_gpu.apply: queue is None and x is not a netcl Tensor; pass "
                        "the command queue that holds x")
    return _run(queue, transform, x, params, allocator, None)


def _run(queue: cl.CommandQueue, transform: augment.Transform[Any], x: cl_array.Array,
         params: Any, allocator: Any, last_allocator: Any) -> cl_array.Array:
    if queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE:
        raise ValueError(
            "augment_gpu.apply: needs an in-order command queue (its parameter buffer is "
            "reused from call to call), got one with OUT_OF_ORDER_EXEC_MODE_ENABLE"
        )
    shape = _check_device_batch(x)
    dtype = x.dtype
    stages: list[tuple[_DeviceOp, _Stage]] = []
    for t, p in _flatten(transform, params):
        op = _DEVICE_OPS.get(type(t))
        if op is None:
            raise TypeError(
                f"augment_gpu.apply: no device kernel for {type(t).__name__}; supported are "
                f"{sorted(k.__name__ for k in _DEVICE_OPS)}"
            )
        stages.append((op, _Stage(t, p, shape, dtype, op.pack(t, p, shape, dtype))))
        shape, dtype = t.output_shape(shape), op.out_dtype(dtype)
    if x.size == 0 or 0 in shape:  # nothing to compute, and an empty NDRange is an error
        return cl_array.empty(queue, shape, dtype, allocator=allocator)
    if not stages and last_allocator is not None:  # nothing to run: copy into the result
        y = cl_array.empty(queue, shape, dtype, allocator=last_allocator)
        cl.enqueue_copy(queue, _buffer(y), _buffer(x), byte_count=x.nbytes,
                        src_offset=x.offset)
        return y
    meta, offsets = _meta_buffer(queue).upload(queue, [st.meta for _, st in stages])
    for k, ((op, st), off) in enumerate(zip(stages, offsets, strict=True)):
        final = k == len(stages) - 1 and last_allocator is not None
        x = op.run(queue, st, x, meta, off, last_allocator if final else allocator)
    return x
