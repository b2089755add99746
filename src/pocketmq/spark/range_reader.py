"""The executor side of the source: read one partition's queue ranges into Arrow record batches.

Everything a task needs travels in its ``QueueRangePartition`` (ranges and ``ReadSettings``, both
picklable); the connection comes from the worker process's cached client (``clients.client_for``).

Throughput comes from three things:

- **Pulls in flight.** ``QueuePuller`` keeps ``PULLS_IN_FLIGHT`` pulls of a queue travelling at predicted
  offsets (each pull starts where the previous one asked to end), so the broker serves the next pulls while
  this process decodes; a reply that ends elsewhere (tag filtering, the broker's byte cap) drops the
  predictions and pulls again from where it ended. With an SQL92 filter a reply ends where the broker found
  enough matches, which no prediction can know: one pull at a time, each from where the last ended.
- **Bulk decoding.** Pull replies are the broker's stored records, back to back; they are decoded by
  ``decode_record_columns`` straight into columns, with no message object per record.
- **Large batches.** Replies are joined until ``ROWS_PER_BATCH`` offsets are covered, then decoded and
  turned into one Arrow batch: Arrow's kernels cost per call, so a batch per 256-message pull would pay that
  cost many times over.

Data loss is judged again here (retention may have run since planning): see ``planning.clip_to_bounds``.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from pocketmq.client.selector import SQL92, MessageSelector
from pocketmq.common.record import decode_record_columns
from pocketmq.spark.clients import PULL_MAX_MESSAGES, Pulled, QueueClient, client_for
from pocketmq.spark.offsets import QueueId
from pocketmq.spark.options import SourceOptions
from pocketmq.spark.planning import DataLoss, OffsetRange, clip_to_bounds
from pocketmq.spark.schema import records_to_batch

log = logging.getLogger(__name__)

MAX_PULLS_WITHOUT_PROGRESS = 3
PULLS_IN_FLIGHT = 3  # per queue being read: enough to hide the round trip behind decoding
ROWS_PER_BATCH = 4096  # offsets covered by one Arrow batch (fewer at a range's end)


@dataclass(frozen=True, slots=True)
class ReadSettings:
    """What an executor needs to read a range (picklable, no client in it)."""

    namesrv: str
    selector: MessageSelector
    include_properties: bool
    fail_on_data_loss: bool
    pull_batch_size: int
    pull_timeout_ms: int

    @classmethod
    def of(cls, options: SourceOptions) -> ReadSettings:
        return cls(
            options.namesrv,
            options.selector,
            options.include_properties,
            options.fail_on_data_loss,
            options.pull_batch_size,
            options.pull_timeout_ms,
        )


class QueueRangePartition(InputPartition):
    """One Spark task: offset ranges of queues, and how to read them."""

    def __init__(self, ranges: tuple[OffsetRange, ...], settings: ReadSettings):
        super().__init__(None)
        self.ranges = ranges
        self.settings = settings

    def __repr__(self) -> str:
        shown = ", ".join(f"{r.queue}[{r.start_offset},{r.end_offset})" for r in self.ranges)
        return f"<QueueRangePartition {shown}>"


def read_partition(partition: QueueRangePartition) -> Iterator[pa.RecordBatch]:
    client = client_for(partition.settings.namesrv)
    for offset_range in partition.ranges:
        yield from read_range(client, offset_range, partition.settings)


class QueuePuller:
    """Pulls of one queue, up to ``depth`` in flight at offsets ``start, start + step, ...`` below ``end``."""

    def __init__(
        self, client: QueueClient, offset_range: OffsetRange, settings: ReadSettings, *, depth: int = PULLS_IN_FLIGHT
    ):
        self._client = client
        self._queue = offset_range.queue
        self._settings = settings
        self._step = max(1, min(settings.pull_batch_size, PULL_MAX_MESSAGES))
        self._depth = 1 if settings.selector.expression_type == SQL92 else depth
        self._in_flight: dict[int, concurrent.futures.Future[Pulled]] = {}

    def pull(self, offset: int, end: int) -> Pulled:
        """The pull at ``offset`` (of at most ``end - offset`` messages), waiting for it if it travels."""
        predicted = range(offset, end, self._step)[: self._depth]
        for stale in [start for start in self._in_flight if start not in predicted]:
            self._in_flight.pop(stale).cancel()
        for start in predicted:
            if start not in self._in_flight:
                self._in_flight[start] = self._client.submit_pull(
                    self._queue,
                    start,
                    min(self._step, end - start),
                    self._settings.selector,
                    self._settings.pull_timeout_ms,
                )
        future = self._in_flight.pop(offset)
        try:
            return future.result(self._settings.pull_timeout_ms / 1000 + 1)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        for future in self._in_flight.values():
            future.cancel()
        self._in_flight.clear()


def read_range(client: QueueClient, offset_range: OffsetRange, settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    """Pull ``[start, end)`` of one queue. Offsets that retention removed (or a reset queue) are a data
    loss: an error when ``fail_on_data_loss``, else skipped and logged with their count."""
    queue = offset_range.queue
    current, loss = clip_to_bounds(offset_range, client.bounds([queue])[queue], settings.fail_on_data_loss)
    log_loss(loss, where="read")
    offset, end = current.start_offset, current.end_offset
    wanted_tags = settings.selector.tags
    puller = QueuePuller(client, current, settings)
    pending: list[bytes] = []  # pulled records not yet in a batch, covering [pending_from, offset)
    pending_from = offset
    stalled = 0
    try:
        while offset < end:
            pulled = puller.pull(offset, end)
            if pulled.next_offset <= offset or pulled.offset_moved:
                # The queue moved under us (retention ran since we checked): judge again from here.
                stalled += 1
                remaining, loss = clip_to_bounds(
                    OffsetRange(queue, offset, end), client.bounds([queue])[queue], settings.fail_on_data_loss
                )
                log_loss(loss, where="read")
                if remaining.start_offset != offset or remaining.end_offset != end:
                    offset, end, stalled = remaining.start_offset, remaining.end_offset, 0
                    continue
                if stalled >= MAX_PULLS_WITHOUT_PROGRESS:
                    raise RuntimeError(
                        f"pocketmq: no progress pulling {queue} at offset {offset} (end {end}): "
                        f"the broker answered {pulled.status} {stalled} times"
                    )
                continue
            stalled = 0
            if pulled.records:
                pending.append(pulled.records)
            offset = pulled.next_offset
            if pending and offset - pending_from >= ROWS_PER_BATCH:
                yield pulled_batch(queue, pending, end, wanted_tags, settings.include_properties)
                pending, pending_from = [], offset
    finally:
        puller.close()
    if pending:
        yield pulled_batch(queue, pending, end, wanted_tags, settings.include_properties)


def pulled_batch(
    queue: QueueId, pulled_records: list[bytes], end: int, wanted_tags: frozenset[str] | None, include_properties: bool
) -> pa.RecordBatch:
    """Pulled records as one batch: only queue offsets below ``end`` (a filtered pull may find its matches
    beyond it), only the wanted tags (the broker filters by tag hash, which can collide)."""
    records = decode_record_columns(pulled_records[0] if len(pulled_records) == 1 else b"".join(pulled_records))
    batch = records_to_batch(queue.topic, queue.broker, records, include_properties=include_properties)
    below_end = bisect.bisect_left(records.queue_offsets, end)  # queue offsets ascend within a queue
    if below_end < batch.num_rows:
        batch = batch.slice(0, below_end)
    if wanted_tags is not None:
        batch = batch.filter(pc.is_in(batch.column("tags"), value_set=pa.array(sorted(wanted_tags), pa.string())))
    return batch


def log_loss(loss: DataLoss | None, *, where: str) -> None:
    if loss is not None:
        log.warning(
            "event=data_loss where=%s queue=%s requested_offset=%d min_offset=%d max_offset=%d lost=%s detail=%r",
            where,
            loss.queue,
            loss.requested_offset,
            loss.bounds.min_offset,
            loss.bounds.max_offset,
            "unknown" if loss.lost is None else loss.lost,
            loss.describe(),
        )
