"""Pure planning: rate limits, positioning, AvailableNow targets, partition splits, data-loss decisions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.spark.offsets import QueueBounds, QueueId
from pocketmq.spark.planning import (
    DataLossError,
    OffsetRange,
    TriggerLimits,
    clip_to_bounds,
    next_offsets,
    proportional_shares,
    ranges_between,
    split_ranges,
)

Q = [QueueId("t", "broker-a", i) for i in range(4)]
NOW = 1_000_000


def plan(start, bounds, limits=TriggerLimits(), *, new=None, last=NOW, now=NOW, fail=True, target=None):
    return next_offsets(
        start, bounds, new or {}, limits, last_trigger_ms=last, now_ms=now, fail_on_data_loss=fail, target=target
    )


def bounds(*maxima, minimum=0):
    return {Q[i]: QueueBounds(minimum, m) for i, m in enumerate(maxima)}


def test_fresh_query_first_batch_only_positions():
    result = plan({}, bounds(10, 20), new={Q[0]: 3, Q[1]: 20})
    assert result.end == {Q[0]: 3, Q[1]: 20} and result.rows == 0 and result.positioned == 2
    assert ranges_between({}, result.end) == []


def test_reads_everything_without_limits():
    result = plan({Q[0]: 3, Q[1]: 20}, bounds(10, 25))
    assert result.end == {Q[0]: 10, Q[1]: 25} and result.rows == 12
    assert ranges_between({Q[0]: 3, Q[1]: 20}, result.end) == [OffsetRange(Q[0], 3, 10), OffsetRange(Q[1], 20, 25)]


def test_nothing_new_returns_start():
    start = {Q[0]: 10, Q[1]: 25}
    result = plan(start, bounds(10, 25))
    assert result.end == start and result.rows == 0


def test_max_rows_split_in_proportion():
    result = plan({Q[0]: 0, Q[1]: 0, Q[2]: 0}, bounds(300, 100, 0), TriggerLimits(max_rows=100))
    assert result.end == {Q[0]: 75, Q[1]: 25, Q[2]: 0} and result.rows == 100


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=8), st.integers(1, 5_000))
def test_shares_sum_to_the_limit_and_never_exceed_a_queue(sizes, limit):
    by_queue = {QueueId("t", "b", i): size for i, size in enumerate(sizes)}
    shares = proportional_shares(by_queue, limit)
    assert sum(shares.values()) == min(limit, sum(sizes))
    assert all(0 <= shares[q] <= by_queue[q] for q in by_queue)
    assert shares == proportional_shares(dict(reversed(list(by_queue.items()))), limit)  # deterministic


def test_min_rows_waits_until_max_trigger_delay():
    limits = TriggerLimits(min_rows=50, max_trigger_delay_ms=10_000)
    start = {Q[0]: 0}
    waiting = plan(start, bounds(30), limits, last=NOW, now=NOW + 9_999)
    assert waiting.end == start and waiting.waiting and waiting.rows == 0
    due = plan(start, bounds(30), limits, last=NOW, now=NOW + 10_000)
    assert due.end == {Q[0]: 30} and not due.waiting
    enough = plan(start, bounds(50), limits, last=NOW, now=NOW)
    assert enough.end == {Q[0]: 50}


def test_min_rows_still_positions_new_queues():
    result = plan({Q[0]: 0}, bounds(5, 9), TriggerLimits(min_rows=50, max_trigger_delay_ms=10_000), new={Q[1]: 0})
    assert result.end == {Q[0]: 0, Q[1]: 0} and result.positioned == 1


def test_available_now_target_caps_and_excludes_later_queues():
    start = {Q[0]: 0, Q[1]: 0}
    result = plan(start, bounds(100, 100, 100), target={Q[0]: 40, Q[1]: 100}, new={Q[2]: 0})
    assert result.end == {Q[0]: 40, Q[1]: 100}
    done = plan(result.end, bounds(200, 200, 200), target={Q[0]: 40, Q[1]: 100}, new={Q[2]: 0})
    assert done.end == result.end  # nothing more: the query can finish


def test_available_now_with_start_past_target_reads_nothing():
    result = plan({Q[0]: 50}, bounds(60), target={Q[0]: 40})
    assert result.end == {Q[0]: 50}


def test_retention_fails_or_skips_ahead():
    start = {Q[0]: 10}
    with pytest.raises(DataLossError, match="failOnDataLoss.*5 message"):
        plan(start, bounds(100, minimum=15))
    result = plan(start, bounds(100, minimum=15), TriggerLimits(max_rows=20), fail=False)
    assert result.end == {Q[0]: 35} and result.losses[0].lost == 5


def test_reset_queue_fails_or_restarts_from_its_new_beginning():
    with pytest.raises(DataLossError, match="deleted and recreated"):
        plan({Q[0]: 500}, bounds(20))
    result = plan({Q[0]: 500}, bounds(20), fail=False)
    assert result.end == {Q[0]: 0} and result.losses[0].lost is None
    assert ranges_between({Q[0]: 500}, result.end) == []
    assert plan(result.end, bounds(20), fail=False).end == {Q[0]: 20}


def test_queue_missing_from_route_keeps_its_position():
    result = plan({Q[0]: 5, Q[1]: 7}, bounds(9))
    assert result.end == {Q[0]: 9, Q[1]: 7}


def test_split_ranges_for_min_partitions():
    ranges = [OffsetRange(Q[0], 0, 90), OffsetRange(Q[1], 0, 10)]
    assert split_ranges(ranges, None) == ranges
    assert split_ranges(ranges, 2) == ranges
    parts = split_ranges(ranges, 5)
    assert len(parts) >= 5
    assert sum(p.size for p in parts if p.queue == Q[0]) == 90 and parts[0].start_offset == 0
    for a, b in zip(parts, parts[1:]):
        if a.queue == b.queue:
            assert a.end_offset == b.start_offset


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=5), st.integers(1, 20))
def test_split_covers_every_offset_once(sizes, min_partitions):
    ranges = [OffsetRange(QueueId("t", "b", i), 7, 7 + size) for i, size in enumerate(sizes)]
    parts = split_ranges(ranges, min_partitions)
    covered = sorted((p.queue, o) for p in parts for o in range(p.start_offset, p.end_offset))
    assert covered == sorted((r.queue, o) for r in ranges for o in range(r.start_offset, r.end_offset))
    assert len(parts) >= min(min_partitions, sum(sizes))


def test_clip_to_bounds_at_read_time():
    r = OffsetRange(Q[0], 10, 20)
    assert clip_to_bounds(r, QueueBounds(0, 30), True) == (r, None)
    clipped, loss = clip_to_bounds(r, QueueBounds(15, 30), False)
    assert clipped == OffsetRange(Q[0], 15, 20) and loss.lost == 5
    clipped, loss = clip_to_bounds(r, QueueBounds(25, 30), False)
    assert clipped.size == 0 and loss.lost == 10
    clipped, loss = clip_to_bounds(r, QueueBounds(0, 5), False)
    assert clipped.size == 0 and loss.lost is None
    with pytest.raises(DataLossError, match="removed"):
        clip_to_bounds(r, QueueBounds(12, 30), True)
