"""The shared-memory ring: layouts, round trips, growth and cleanup."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from netcl.data.shared_batch import (
    SharedBatchRing,
    SlotAttachments,
    layout_of,
    read_batch,
    segment_prefix,
    write_batch,
)


def test_round_trip_of_nested_batch() -> None:
    batch = {
        "x": np.arange(12, dtype=np.float16).reshape(3, 4),
        "pair": (np.array([1, 2], np.int64), [np.zeros((0, 5), np.uint8), "text", 7]),
        "objects": np.array([None, "a"], dtype=object),
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    }
    layout, arrays = layout_of(batch)
    assert len(layout.arrays) == 4  # the object array travels inline
    assert all(spec.offset % 64 == 0 for spec in layout.arrays)
    ring = SharedBatchRing(1, layout.nbytes)
    try:
        write_batch(ring.buffer(0), layout, arrays)
        out = read_batch(ring.buffer(0), layout)
    finally:
        ring.close()
    np.testing.assert_array_equal(out["x"], batch["x"])
    assert out["x"].dtype == np.float16
    assert out["pair"][0].tolist() == [1, 2]
    assert out["pair"][1][0].shape == (0, 5)
    assert out["pair"][1][1:] == ["text", 7]
    assert out["objects"].tolist() == [None, "a"]
    np.testing.assert_array_equal(out["fortran"], batch["fortran"])


def test_write_refuses_a_slot_that_is_too_small() -> None:
    layout, arrays = layout_of(np.zeros(10_000))
    ring = SharedBatchRing(1, 4096)
    try:
        with pytest.raises(ValueError, match=r"needs 80000 bytes but the slot holds 4096"):
            write_batch(ring.buffer(0), layout, arrays)
    finally:
        ring.close()


def test_resize_replaces_the_segment_and_unlinks_the_old_one() -> None:
    ring = SharedBatchRing(2, 100)
    try:
        old = ring.name(1)
        assert old.startswith(segment_prefix())
        assert ring.capacity(1) >= 100
        ring.resize(1, 50_000)
        assert ring.name(1) != old and ring.capacity(1) >= 50_000
        if os.path.isdir("/dev/shm"):
            assert not os.path.exists(f"/dev/shm/{old}")
            assert os.path.exists(f"/dev/shm/{ring.name(1)}")
    finally:
        ring.close()
    ring.close()  # twice is fine
    assert len(ring) == 0


def test_worker_side_attachments_follow_renames() -> None:
    ring = SharedBatchRing(1, 4096)
    attachments = SlotAttachments()
    try:
        layout, arrays = layout_of(np.arange(5))
        write_batch(attachments.buffer(0, ring.name(0)), layout, arrays)
        assert read_batch(ring.buffer(0), layout).tolist() == [0, 1, 2, 3, 4]
        ring.resize(0, 10_000)
        layout, arrays = layout_of(np.arange(1000))
        write_batch(attachments.buffer(0, ring.name(0)), layout, arrays)
        assert read_batch(ring.buffer(0), layout)[-1] == 999
    finally:
        attachments.close()
        ring.close()


def test_ring_arguments() -> None:
    with pytest.raises(ValueError, match="num_slots must be >= 1, got 0"):
        SharedBatchRing(0, 10)
    with pytest.raises(ValueError, match="slot_bytes must be >= 1, got 0"):
        SharedBatchRing(1, 0)


def test_view_batch_leases_the_slot_until_every_view_is_gone() -> None:
    ring = SharedBatchRing(1, 4096)
    try:
        layout, arrays = layout_of((np.arange(10.0), {"k": np.arange(3)}))
        write_batch(ring.buffer(0), layout, arrays)
        x, d = ring.view_batch(0, layout)
        assert x.tolist() == list(range(10)) and d["k"].tolist() == [0, 1, 2]
        x[0] = 42.0  # no copy: the array is the slot
        assert read_batch(ring.buffer(0), layout)[0][0] == 42.0
        with pytest.raises(RuntimeError, match="slot 0 is leased and cannot be resized"):
            ring.resize(0, 10_000)
        tail = x[5:]
        del x, d
        gc.collect()
        assert ring.reclaim() == [] and ring.leased == 1  # `tail` still points into the slot
        del tail
        gc.collect()
        assert ring.reclaim() == [0] and ring.leased == 0
    finally:
        ring.close()


def test_closing_the_ring_unlinks_but_keeps_live_batches_mapped() -> None:
    ring = SharedBatchRing(1, 4096)
    layout, arrays = layout_of(np.arange(100))
    write_batch(ring.buffer(0), layout, arrays)
    name = ring.name(0)
    batch = ring.view_batch(0, layout)
    ring.close()
    if os.path.isdir("/dev/shm"):
        assert not os.path.exists(f"/dev/shm/{name}")
    assert int(batch.sum()) == 4950  # still readable after close
    del batch
    gc.collect()
