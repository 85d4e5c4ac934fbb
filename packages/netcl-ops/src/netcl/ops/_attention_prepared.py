"""Remembered attention calls: the fused path's launches kept per call signature.

# NOTE [ Remembered attention launches ]
# A fused attention call repeated with the same shapes, dtypes, offsets, mask, flags, queue
# and kernel switches makes the same launches: the same kernels, sizes and scalars, only the
# buffers (and, with dropout, the Philox stream) differ. The first call plans, checks and
# launches as usual (about 240 Python calls for a forward, 1000 for a forward+backward,
# 165 us and 720 us of host time per call on an H200 host) and records its launches
# (:class:`Record`); the public functions then keep them under the call's key. A repeated
# call looks the key up, leases its outputs from the pool with their final shapes and
# launches through ``launch_values`` with the buffers set in their slots: the scheme of
# NOTE [ Remembered launches ] in ._launch, for a call of several launches and outputs:
# about 125 Python calls for a forward and 250 for a backward, most of their time in the
# driver's enqueue (PoCL, B*H 2, L 16: forward 23 us, backward 44 us of host time per call,
# beside 15 us for one ops.add; 71 and 142 us before).
# A call whose first run made a copy (an operand whose broadcast is not one run of axes, a
# gradient not at offset 0), summed a broadcast gradient, or computed D with the ops is not
# kept: every buffer slot must hold one of the call's own tensors, checked by identity. The
# key holds the tensors' queues (so no id is reused), the switches' environment variables and
# the types of the scalars (``scale=True`` must still raise, not hit ``scale=1``); the table
# is bounded and cleared when full. A workspace a call makes and drops (the fused tensor-core
# backward's float32 dQ) is a scratch role: remembered as one more output after the caller's
# (which a repeat makes from the pool and the caller drops, as it drops D).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netcl.core.env import env_raw
from netcl.core.kernels.primitives import launch_values
from netcl.core.tensor import Tensor, output_tensor

from ._launch import device_buffer

__all__ = ["ENV_SWITCHES", "Prepared", "Record", "call_key", "forget", "lookup", "remember",
           "run"]

# the variables that change which kernels a call gets (read per call, so a test or a bench
# that sets one gets a new key)
ENV_SWITCHES = ("NETCL_ATTENTION_KERNEL", "NETCL_ATTENTION_TILED_BLOCK", "NETCL_ATTN_MMA_LOADS",
                "NETCL_MMA", "NETCL_ATTENTION_DELTA", "NETCL_ATTENTION_BWD", "NETCL_ATTN_MMA_RED")
_MAX_PREPARED = 1024


@dataclass
class Record:
    """What one fused call launched: ``steps`` of ``(kernel, grid, local, args, slots,
    stream)`` (``slots``: the ``(index, role)`` of each buffer argument, ``stream``: the
    index of the Philox key's first word, or -1) and ``tensors``, the tensor of each role.
    ``scratch`` names the roles of workspaces the call made and drops (remembered as outputs
    after the caller's). ``ok`` is cleared by a launch outside the record (the ops' D)."""

    steps: list[tuple[Any, tuple[int, ...], tuple[int, ...], list[Any],
                      tuple[tuple[int, str], ...], int]] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    scratch: list[str] = field(default_factory=list)
    ok: bool = True

    def launch(self, queue: Any, kernel: Any, grid: tuple[int, ...], local: tuple[int, ...],
               args: list[Any], slots: tuple[tuple[int, str], ...], stream: int) -> None:
        launch_values(queue, kernel, grid, local, args)
        self.steps.append((kernel, grid, local, list(args), slots, stream))


def launch(record: Record | None, queue: Any, kernel: Any, grid: tuple[int, ...],
           local: tuple[int, ...], args: list[Any], slots: tuple[tuple[int, str], ...],
           stream: int) -> None:
    """``launch_values``, recorded in ``record`` when one is given."""
    if record is None:
        launch_values(queue, kernel, grid, local, args)
    else:
        record.launch(queue, kernel, grid, local, args, slots, stream)


@dataclass(frozen=True)
class _Step:
    kernel: Any
    grid: tuple[int, ...]
    local: tuple[int, ...]
    args: tuple[Any, ...]  # None in the buffer slots (and the stream's three words)
    slots: tuple[tuple[int, str], ...]
    stream: int


@dataclass(frozen=True)
class Prepared:
    """A remembered call: its launches, the ``(role, shape, dtype)`` of each tensor it makes
    (in the order :func:`run` returns them: the caller's outputs, then the record's scratch
    workspaces) and the dropout words it draws (0: none)."""

    steps: tuple[_Step, ...]
    outputs: tuple[tuple[str, tuple[int, ...], str], ...]
    words: int


_prepared: dict[tuple[Any, ...], Prepared] = {}


def _tensor_key(t: Any) -> tuple[Any, ...] | None:
    if not isinstance(t, Tensor) or t.array is not None:
        return None
    return (t.queue, t.shape, t.dtype, t.offset)


def call_key(kind: str, tensors: tuple[Any, ...], *scalars: Any) -> tuple[Any, ...] | None:
    """The key of a call of ``kind`` on ``tensors`` (``None`` entries allowed: an absent
    mask) with ``scalars`` (kept with their types), or ``None`` when a tensor is not an
    OpenCL Tensor (such calls go the checked way; so do calls with an unhashable scalar,
    which :func:`lookup` and :func:`remember` pass over)."""
    parts: list[Any] = [kind]
    for t in tensors:
        if t is None:
            parts.append(None)
            continue
        found = _tensor_key(t)
        if found is None:
            return None
        parts.append(found)
    for s in scalars:
        parts += (type(s), s)
    parts += [env_raw(name) for name in ENV_SWITCHES]  # raw: only compared
    return tuple(parts)


def forget() -> None:
    """Drop every remembered call (the next call of each plans again: timing the planning)."""
    _prepared.clear()


def lookup(key: tuple[Any, ...] | None) -> Prepared | None:
    """The call remembered under ``key`` (NOTE [ Remembered attention launches ])."""
    if key is None:
        return None
    try:
        return _prepared.get(key)
    except TypeError:  # an unhashable scalar: the checked path says what is wrong with it
        return None


def remember(key: tuple[Any, ...] | None, record: Record,
             outputs: tuple[tuple[str, tuple[int, ...]], ...], words: int) -> None:
    """Keep ``record`` under ``key`` when every buffer slot of it holds its role's tensor;
    ``outputs`` are the roles (and final shapes) of the tensors a repeat makes, in order (the
    record's scratch roles follow them)."""
    if key is None or not record.ok or not record.steps:
        return
    try:
        hash(key)
    except TypeError:
        return
    tensors = record.tensors
    steps = []
    for kernel, grid, local, args, slots, stream in record.steps:
        frozen = list(args)
        for i, role in slots:
            t = tensors.get(role)
            if t is None or args[i] is not t.buffer:
                return  # a copy or a materialized operand: not a call to repeat
            frozen[i] = None
        if stream >= 0:
            frozen[stream:stream + 3] = [None, None, None]
        steps.append(_Step(kernel, grid, local, tuple(frozen), slots, stream))
    outputs += tuple((role, tensors[role].shape) for role in record.scratch)
    made = tuple((role, shape, tensors[role].dtype) for role, shape in outputs)
    if len(_prepared) >= _MAX_PREPARED:
        _prepared.clear()
    _prepared[key] = Prepared(tuple(steps), made, words)


def run(entry: Prepared, queue: Any, given: dict[str, Tensor], seed: int,
        offset: int) -> list[Tensor]:
    """Repeat ``entry`` on the tensors ``given`` by role (with the dropout stream ``(seed,
    offset)`` where it has dropout), into new tensors (``entry.outputs``: a caller drops the
    ones it does not return, D and the scratch workspaces, once the launches are queued)."""
    buffers = {role: device_buffer(t) for role, t in given.items()}
    made = []
    for role, shape, dtype in entry.outputs:
        t = output_tensor(queue, shape, dtype)
        buffers[role] = t.buffer
        made.append(t)
    for step in entry.steps:
        args = list(step.args)
        for i, role in step.slots:
            args[i] = buffers[role]
        if step.stream >= 0:
            s = step.stream
            args[s:s + 3] = [np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32),
                             np.uint64(offset)]
        launch_values(queue, step.kernel, step.grid, step.local, args)
    return made
