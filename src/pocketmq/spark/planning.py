"""Pure planning of what a Spark query reads: offset ranges, rate limits, partition splits, data loss.

No I/O and no clock: the readers fetch queue bounds and pass ``now_ms``; everything here is a function of
its arguments, so a replayed micro-batch (same start, same end) plans exactly the same ranges.

Positioning: a queue present in a batch's end offsets but absent from its start offsets is being
*positioned*: the batch reads nothing from it, and the next batch starts there. A fresh query starts from
the empty position ``{}``, so its first batch only positions every queue (by ``startingOffsets``), and that
position is written to Spark's checkpoint before anything is read. This makes a crash in the first batch
replayable even with ``latest`` or a timestamp, which would resolve differently a second time; queues that
appear later (new topics of a pattern, more queues) are positioned the same way, at their earliest offset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from pocketmq.common.errors import PocketMQError
from pocketmq.spark.offsets import QueueBounds, QueueId


class DataLossError(PocketMQError):
    """Offsets a query needs are gone (retention, a deleted topic) and ``failOnDataLoss`` is true."""


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    """Queue offsets ``[start_offset, end_offset)`` of one queue."""

    queue: QueueId
    start_offset: int
    end_offset: int

    @property
    def size(self) -> int:
        return max(0, self.end_offset - self.start_offset)


@dataclass(frozen=True, slots=True)
class DataLoss:
    """Messages a query wanted that are no longer there. ``lost`` is None when the count is unknown
    (the queue was reset: deleted and recreated, so the old offsets mean nothing)."""

    queue: QueueId
    requested_offset: int
    bounds: QueueBounds
    lost: int | None

    def describe(self) -> str:
        held = f"the queue now holds [{self.bounds.min_offset}, {self.bounds.max_offset})"
        if self.lost is None:
            return (
                f"{self.queue}: the query is at offset {self.requested_offset} but {held}: the topic was "
                f"deleted and recreated, or its broker lost data"
            )
        return (
            f"{self.queue}: the query needs offset {self.requested_offset} but {held}: {self.lost} "
            f"message(s) were removed (retention) before they were read"
        )


def data_loss_error(loss: DataLoss) -> DataLossError:
    return DataLossError(
        f"failOnDataLoss=true: {loss.describe()}. Set the option failOnDataLoss=false to skip what is gone and go on."
    )


@dataclass(frozen=True, slots=True)
class TriggerLimits:
    """Admission control of one micro-batch: at most ``max_rows`` offsets; fewer than ``min_rows`` wait
    until ``max_trigger_delay_ms`` has passed since the last batch that read data."""

    max_rows: int | None = None
    min_rows: int | None = None
    max_trigger_delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class NextOffsets:
    """The end offsets of the next micro-batch and how it was decided."""

    end: dict[QueueId, int]
    rows: int  # offsets admitted for reading (tag filtering may yield fewer rows)
    positioned: int  # queues positioned (or repositioned after a reset) by this batch
    losses: list[DataLoss] = field(default_factory=list)
    waiting: bool = False  # data was held back by min_rows


def next_offsets(
    start: Mapping[QueueId, int],
    bounds: Mapping[QueueId, QueueBounds],
    new_positions: Mapping[QueueId, int],
    limits: TriggerLimits,
    *,
    last_trigger_ms: int,
    now_ms: int,
    fail_on_data_loss: bool,
    target: Mapping[QueueId, int] | None = None,
) -> NextOffsets:
    """Plan the end of the micro-batch starting at ``start``.

    ``bounds`` are the subscribed queues' current bounds; ``new_positions`` where queues not in ``start``
    begin; ``target`` (Trigger.AvailableNow) caps every queue at the offset recorded when the query
    started and excludes queues that did not exist then. Raises DataLossError when ``fail_on_data_loss``
    and a queue lost offsets the query still needs.
    """
    end = dict(start)
    losses: list[DataLoss] = []
    effective: dict[QueueId, int] = {}
    available: dict[QueueId, int] = {}
    positioned = 0
    for queue, position in start.items():
        queue_bounds = bounds.get(queue)
        if queue_bounds is None:  # not in the route now (broker down): keep the position
            continue
        if position > queue_bounds.max_offset:
            losses.append(DataLoss(queue, position, queue_bounds, None))
            end[queue] = queue_bounds.min_offset  # read the new incarnation from its start
            positioned += 1
            continue
        if position < queue_bounds.min_offset:
            losses.append(DataLoss(queue, position, queue_bounds, queue_bounds.min_offset - position))
        effective[queue] = max(position, queue_bounds.min_offset)
        upper = queue_bounds.max_offset if target is None else min(queue_bounds.max_offset, target.get(queue, position))
        available[queue] = max(0, upper - effective[queue])
    if losses and fail_on_data_loss:
        raise data_loss_error(losses[0])
    for queue, position in new_positions.items():
        if queue not in start and (target is None or queue in target):
            end[queue] = position
            positioned += 1

    total = sum(available.values())
    waiting = (
        limits.min_rows is not None
        and total < limits.min_rows
        and now_ms - last_trigger_ms < limits.max_trigger_delay_ms
    )
    shares = {} if waiting else proportional_shares(available, limits.max_rows)
    for queue, first in effective.items():
        end[queue] = first + shares.get(queue, 0)
    return NextOffsets(
        end=end, rows=sum(shares.values()), positioned=positioned, losses=losses, waiting=waiting and total > 0
    )


def proportional_shares(sizes: Mapping[QueueId, int], limit: int | None) -> dict[QueueId, int]:
    """Split ``limit`` over the queues in proportion to what each has (largest remainder, ties by queue),
    so the shares sum to exactly ``min(limit, total)`` and no queue gets more than it has."""
    total = sum(sizes.values())
    if limit is None or total <= limit:
        return dict(sizes)
    shares = {queue: size * limit // total for queue, size in sizes.items()}
    remainder = limit - sum(shares.values())
    by_fraction = sorted(sizes, key=lambda queue: (-(sizes[queue] * limit % total), queue))
    for queue in by_fraction[:remainder]:
        shares[queue] += 1
    return shares


def ranges_between(start: Mapping[QueueId, int], end: Mapping[QueueId, int]) -> list[OffsetRange]:
    """The non-empty ranges of a micro-batch, sorted. Queues absent from ``start`` are being positioned
    and read nothing; an end below its start (a reset queue) reads nothing either."""
    ranges = [
        OffsetRange(queue, start[queue], end_offset)
        for queue, end_offset in end.items()
        if queue in start and end_offset > start[queue]
    ]
    return sorted(ranges)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """At least ``min_partitions`` ranges when there are that many offsets: large ranges are cut into
    parts in proportion to their size (as Kafka's ``minPartitions``)."""
    total = sum(r.size for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return list(ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        parts = min(r.size, max(1, math.ceil(r.size * min_partitions / total)))
        for i in range(parts):
            lo = r.start_offset + r.size * i // parts
            hi = r.start_offset + r.size * (i + 1) // parts
            result.append(OffsetRange(r.queue, lo, hi))
    return result


def clip_to_bounds(
    offset_range: OffsetRange, bounds: QueueBounds, fail_on_data_loss: bool
) -> tuple[OffsetRange, DataLoss | None]:
    """What of ``offset_range`` can still be read, judged when reading starts. Offsets below the queue's
    minimum were removed; a range beyond the queue's end means the queue was reset. Raises DataLossError
    when anything is missing and ``fail_on_data_loss``."""
    start, end = offset_range.start_offset, offset_range.end_offset
    loss = None
    if start > bounds.max_offset:
        loss = DataLoss(offset_range.queue, start, bounds, None)
        start = end
    elif start < bounds.min_offset:
        loss = DataLoss(offset_range.queue, start, bounds, min(end, bounds.min_offset) - start)
        start = min(end, bounds.min_offset)
    if end > bounds.max_offset and loss is None:
        loss = DataLoss(offset_range.queue, bounds.max_offset, bounds, None)
    end = max(start, min(end, bounds.max_offset))
    if loss is not None and fail_on_data_loss:
        raise data_loss_error(loss)
    return OffsetRange(offset_range.queue, start, end), loss
