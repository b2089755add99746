"""Retention: the pure decision, and deletion by age and by disk usage with queue and index clean-up."""

from __future__ import annotations

import time

from store_helpers import message

from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import GetStatus
from pocketmq.store.retention import DiskUsage, SegmentAge, segments_to_delete
from pocketmq.testing.polling import eventually

HOUR_MS = 3_600_000
ROOMY = DiskUsage(total_bytes=100, used_bytes=10)


def test_decision_deletes_expired_oldest_first_and_stops_at_a_young_one():
    segments = [SegmentAge(0, 10, 0), SegmentAge(10, 10, 5 * HOUR_MS), SegmentAge(20, 10, 0)]
    assert segments_to_delete(segments, 10 * HOUR_MS, 72 * HOUR_MS, ROOMY, 0.75) == 0
    assert segments_to_delete(segments, 76 * HOUR_MS, 72 * HOUR_MS, ROOMY, 0.75) == 1
    assert segments_to_delete(segments, 80 * HOUR_MS, 72 * HOUR_MS, ROOMY, 0.75) == 3


def test_decision_deletes_young_segments_while_the_disk_is_too_full():
    segments = [SegmentAge(i * 10, 10, 0) for i in range(5)]
    assert segments_to_delete(segments, 0, 72 * HOUR_MS, DiskUsage(100, 95), 0.75) == 2
    assert segments_to_delete(segments, 0, 72 * HOUR_MS, DiskUsage(100, 75), 0.75) == 0


async def _filled(open_store, clock, **overrides):
    store = await open_store(clock=clock, flush_interval_ms=10, checkpoint_interval_ms=10, **overrides)
    for i in range(40):
        await store.put_message(message(body=bytes(400), queue_id=i % 2, uniq_key=f"u{i}"))
    end = store.max_phys_offset
    await eventually(lambda: store._checkpoint.phys_offset == end, message="checkpoint")
    return store


async def test_expired_segments_go_with_their_queue_units_and_index(open_store):
    clock = ManualClock(time.time_ns() // 1_000_000)
    store = await _filled(open_store, clock)
    segments_before = len(store._commit_log.segments)
    assert await store.clean_expired() == 0
    clock.advance(73 * HOUR_MS)
    assert await store.clean_expired() == segments_before - 1  # all but the active segment
    assert store.min_phys_offset == store._commit_log.segments[-1].base_offset
    low = store.min_queue_offset("orders", 0)
    assert low > 0
    assert store.get_messages("orders", 0, 0, 1).status is GetStatus.OFFSET_TOO_SMALL
    got = store.get_messages("orders", 0, low, 100)
    assert got.status is GetStatus.FOUND and got.messages()[0].phys_offset >= store.min_phys_offset
    assert store.query_by_uniq_key("orders", "u0") == []
    assert store.query_by_uniq_key("orders", "u39")
    assert store.read_message(0) is None


async def test_a_full_disk_deletes_the_oldest_segments_whatever_their_age(open_store):
    clock = ManualClock(time.time_ns() // 1_000_000)
    total = 100 * 4096
    usage = {"used": 90 * 4096}  # 15 segments over the 75% line: every old segment must go
    store = await _filled(open_store, clock, disk_usage=lambda path: (total, usage["used"], total - usage["used"]))
    segments_before = len(store._commit_log.segments)
    assert await store.clean_expired() == segments_before - 1
    usage["used"] = 10 * 4096
    await store.put_message(message(body=bytes(4000)))
    assert await store.clean_expired() == 0
