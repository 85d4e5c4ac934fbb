"""The loop a DataLoader worker process runs."""

from __future__ import annotations

import os
import pickle
import signal
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import connection, parent_process
from typing import Any

import numpy as np
import numpy.typing as npt

from ._fetch import BatchTransform, CollateFn, fetch_batch
from .shared_batch import SlotAttachments, layout_of, write_batch


@dataclass(frozen=True)
class Task:
    """Build batch ``batch_index`` of ``epoch`` into ring slot ``slot`` (segment ``name``)."""

    batch_index: int
    epoch: int
    indices: npt.NDArray[np.int64]
    slot: int
    name: str
    capacity: int


@dataclass(frozen=True)
class WorkerConfig:
    """What every worker needs; pickled once per worker under spawn."""

    dataset: Any
    collate_fn: CollateFn | None
    transform: BatchTransform | None
    seed: int
    worker_init_fn: Callable[[int], None] | None


@dataclass(frozen=True)
class RemoteError:
    """An exception raised in a worker, with its formatted traceback."""

    worker_id: int
    pid: int
    batch_index: int | None
    type_name: str
    message: str
    traceback: str
    pickled: bytes | None

    @staticmethod
    def capture(exc: BaseException, worker_id: int, batch_index: int | None) -> RemoteError:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        pickled: bytes | None
        try:
            pickled = pickle.dumps(exc)
            pickle.loads(pickled)  # exceptions with custom __init__ may not come back
        except Exception:
            pickled = None
        return RemoteError(
            worker_id, os.getpid(), batch_index, type(exc).__qualname__, str(exc), text, pickled
        )


# Messages a worker sends: ("ok", batch_index, slot, layout), ("inline", batch_index, slot,
# batch, nbytes) when the batch did not fit, ("error", batch_index, slot, RemoteError).


def worker_main(
    worker_id: int, conn: connection.Connection, config: WorkerConfig
) -> None:  # pragma: no cover - runs in a child process
    """Serve tasks from ``conn`` until told to stop or the parent goes away."""
    # Ctrl-C reaches the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    attachments = SlotAttachments()
    parent = parent_process()
    watch: list[Any] = [conn] if parent is None else [conn, parent.sentinel]
    try:
        if config.worker_init_fn is not None:
            try:
                config.worker_init_fn(worker_id)
            except Exception as exc:
                conn.send(("error", None, None, RemoteError.capture(exc, worker_id, None)))
                return
        while True:
            if conn not in connection.wait(watch):
                return  # the parent died
            try:
                task = conn.recv()
            except EOFError:
                return
            if task is None:
                return
            reply = _run(task, worker_id, config, attachments)
            try:
                conn.send(reply)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                error = RemoteError.capture(exc, worker_id, task.batch_index)
                conn.send(("error", task.batch_index, task.slot, error))
    except (BrokenPipeError, ConnectionResetError):
        return
    finally:
        attachments.close()


def _run(
    task: Task, worker_id: int, config: WorkerConfig, attachments: SlotAttachments
) -> tuple[Any, ...]:  # pragma: no cover - runs in a child process
    try:
        batch = fetch_batch(
            config.dataset,
            task.indices,
            config.collate_fn,
            config.transform,
            config.seed,
            task.epoch,
            task.batch_index,
        )
        layout, arrays = layout_of(batch)
        if layout.nbytes > task.capacity:
            return ("inline", task.batch_index, task.slot, batch, layout.nbytes)
        write_batch(attachments.buffer(task.slot, task.name), layout, arrays)
        return ("ok", task.batch_index, task.slot, layout)
    except Exception as exc:
        error = RemoteError.capture(exc, worker_id, task.batch_index)
        return ("error", task.batch_index, task.slot, error)
