"""ConsumeQueue alone: units across segments, reopen, truncation, retention, time search."""

from __future__ import annotations

from pocketmq.store.consume_queue import UNIT, ConsumeQueue


def _queue(tmp_path) -> ConsumeQueue:
    return ConsumeQueue(tmp_path / "cq", "orders", 0, units_per_segment=4)


def _units(phys_offsets) -> bytes:
    return b"".join(UNIT.pack(p, 100, 7) for p in phys_offsets)


def test_units_cross_segments_and_reopen_finds_the_end(tmp_path):
    queue = _queue(tmp_path)
    queue.put(0, _units(range(0, 1000, 100)))
    assert (queue.min_queue_offset, queue.max_queue_offset) == (0, 10)
    assert len(queue.segments) == 3
    assert queue.read_units(3, 10) == [(300, 100, 7)]  # one segment at a time
    assert queue.unit(9) == (900, 100, 7) and queue.unit(10) is None
    queue.close()
    again = _queue(tmp_path)
    assert (again.min_queue_offset, again.max_queue_offset) == (0, 10)
    assert repr(again) == "<ConsumeQueue orders/0 min=0 max=10>"


def test_truncate_from_phys_cuts_units_at_or_past_it(tmp_path):
    queue = _queue(tmp_path)
    queue.put(0, _units(range(0, 1000, 100)))
    assert queue.truncate_from_phys(450) == 5
    assert queue.max_queue_offset == 5 and len(queue.segments) == 2
    queue.put(5, _units([450]))
    assert queue.unit(5) == (450, 100, 7)


def test_retention_deletes_leading_segments_and_moves_min(tmp_path):
    queue = _queue(tmp_path)
    queue.put(0, _units(range(0, 1000, 100)))
    assert queue.delete_below_phys(550) == 1
    assert queue.min_queue_offset == 6 and queue.max_queue_offset == 10
    assert queue.delete_below_phys(5000) == 1  # the last segment always stays
    assert queue.min_queue_offset == queue.max_queue_offset == 10


def test_offset_by_time_binary_searches_store_timestamps(tmp_path):
    queue = _queue(tmp_path)
    queue.put(0, _units(range(0, 1000, 100)))
    timestamp_of = {p: 5000 + p for p in range(0, 1000, 100)}.__getitem__
    assert queue.offset_by_time(0, timestamp_of) == 0
    assert queue.offset_by_time(5350, timestamp_of) == 4
    assert queue.offset_by_time(5400, timestamp_of) == 4
    assert queue.offset_by_time(9999, timestamp_of) == 10
