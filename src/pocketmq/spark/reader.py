"""Batch and streaming readers of the ``pocketmq`` data source.

Driver side (``partitions``, ``latestOffset``, ``commit``): discover the subscribed queues, fetch their
bounds, and let ``planning`` decide. Executor side (``read``): pull one partition's offset ranges with the
process's cached client and yield Arrow record batches. ``read`` runs on another reader instance than the
driver's (Spark builds it once at planning and pickles it), so everything it needs travels in the
``QueueRangePartition``; the driver's later state is invisible to it.

Progress lives only in Spark's checkpoint: offsets are end-exclusive positions (``offsets.py``), and
``commit`` only mirrors them to a consumer group when ``commitToGroup`` asks for it, for monitoring.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.spark.clients import QueueClient, client_for
from pocketmq.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    QueueBounds,
    QueueId,
    from_offset_json,
    resolve_spec,
    to_offset_json,
    unknown_queues,
)
from pocketmq.spark.options import OptionError, SourceOptions, parse_source_options
from pocketmq.spark.planning import (
    OffsetRange,
    TriggerLimits,
    clip_to_bounds,
    next_offsets,
    ranges_between,
    split_ranges,
)
from pocketmq.spark.range_reader import QueueRangePartition, ReadSettings, log_loss, read_partition

log = logging.getLogger(__name__)


class QueueCatalog:
    """The driver's view of the subscribed queues (topics are re-discovered on every call)."""

    def __init__(self, options: SourceOptions, client: QueueClient):
        self.options = options
        self.client = client

    def topics(self) -> list[str]:
        if self.options.topic_pattern is None:
            return list(self.options.topics)
        return sorted(t for t in self.client.topic_names() if self.options.subscribes(t))

    def check_at_start(self) -> None:
        """Fail the query at start on topics or queues that do not exist, naming the option."""
        if self.options.topic_pattern is None:
            existing = self.client.topic_names()
            missing = [t for t in self.options.topics if t not in existing]
            if missing:
                option = "topic"
                raise OptionError(
                    option, f"topic(s) {', '.join(missing)} do not exist on the cluster of {self.options.namesrv}"
                )
        try:
            self.client.check_selector(self.topics(), self.options.selector)
        except RemoteServerError as exc:
            raise OptionError("sql", f"a broker refuses it: {exc}") from None
        queues = self.queues()
        for option, spec in (("startingOffsets", self.options.starting), ("endingOffsets", self.options.ending)):
            if unknown := unknown_queues(spec, queues):
                raise OptionError(
                    option, f"names queue(s) the topics do not have: {', '.join(str(q) for q in unknown)}"
                )

    def queues(self) -> list[QueueId]:
        return sorted(q for topic in self.topics() for q in self.client.queues(topic))

    def positions(
        self, spec: OffsetSpec, queues: list[QueueId], bounds: dict[QueueId, QueueBounds], *, unnamed: int
    ) -> dict[QueueId, int]:
        timestamp_offsets = None
        if spec.timestamp_ms is not None:  # a "timestamp" spec
            timestamp_offsets = self.client.offsets_for_timestamp(queues, spec.timestamp_ms)
        return resolve_spec(spec, queues, bounds, unnamed=unnamed, timestamp_offsets=timestamp_offsets)


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Read a partition this source planned (Spark hands back the ones ``partitions`` returned)."""
    if not isinstance(partition, QueueRangePartition):
        raise TypeError(f"not a PocketMQ partition: {partition!r}")
    return read_partition(partition)


def make_partitions(ranges: list[OffsetRange], options: SourceOptions) -> list[QueueRangePartition]:
    settings = ReadSettings.of(options)
    return [QueueRangePartition((r,), settings) for r in split_ranges(ranges, options.min_partitions)]


class _PickledWithOptionsOnly:
    """Spark pickles the planning reader into the read function it ships to executors; a reader's client
    (threads, sockets) cannot travel and ``read`` needs none of the driver's state, only the partition."""

    options: SourceOptions

    def __getstate__(self) -> dict:
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.options = state["options"]


class PocketBatchReader(_PickledWithOptionsOnly, DataSourceReader):
    """``spark.read.format("pocketmq")``: everything between startingOffsets and endingOffsets, resolved
    when the query is planned."""

    def __init__(self, raw_options: dict[str, str]):
        self.options = parse_source_options(raw_options, streaming=False)
        self._catalog = QueueCatalog(self.options, client_for(self.options.namesrv))
        self._catalog.check_at_start()

    def partitions(self) -> Sequence[InputPartition]:
        queues = self._catalog.queues()
        bounds = self._catalog.client.bounds(queues)
        start = self._catalog.positions(self.options.starting, queues, bounds, unnamed=EARLIEST)
        end = self._catalog.positions(self.options.ending, queues, bounds, unnamed=LATEST)
        ranges = []
        for queue in queues:
            wanted = OffsetRange(queue, start[queue], end[queue])
            if wanted.size:
                clipped, loss = clip_to_bounds(wanted, bounds[queue], self.options.fail_on_data_loss)
                log_loss(loss, where="plan")
                if clipped.size:
                    ranges.append(clipped)
        partitions = make_partitions(ranges, self.options)
        log.info(
            "event=batch_planned topics=%s queues=%d offsets=%d partitions=%d",
            self._catalog.topics(),
            len(queues),
            sum(r.size for r in ranges),
            len(partitions),
        )
        # Spark wants at least one partition; an empty one reads nothing.
        return partitions or [QueueRangePartition((), ReadSettings.of(self.options))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class PocketStreamReader(_PickledWithOptionsOnly, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("pocketmq")``: micro-batches of queue offset ranges, exactly once with
    Spark's checkpoint (see planning.py for how the first batch positions the queues)."""

    def __init__(self, raw_options: dict[str, str], clock: Clock = SYSTEM_CLOCK):
        self.options = parse_source_options(raw_options, streaming=True)
        self._catalog = QueueCatalog(self.options, client_for(self.options.namesrv))
        self._catalog.check_at_start()
        self._clock = clock
        self._last_trigger_ms = clock.now_ms()
        self._target: dict[QueueId, int] | None = None  # Trigger.AvailableNow: where to stop
        self._latest_seen: dict | None = None

    def initialOffset(self) -> dict:
        return {}  # nothing positioned yet: the first batch positions every queue

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        queues = self._catalog.queues()
        self._target = {q: b.max_offset for q, b in self._catalog.client.bounds(queues).items()}
        log.info("event=available_now_target queues=%d offsets=%s", len(self._target), to_offset_json(self._target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_positions = from_offset_json(start)
        queues = self._catalog.queues()
        bounds = self._catalog.client.bounds(queues)
        self._latest_seen = to_offset_json({q: b.max_offset for q, b in bounds.items()})
        new_queues = [q for q in queues if q not in start_positions]
        # The first batch positions by startingOffsets; queues that appear later start at their earliest.
        spec = self.options.starting if not start_positions else OffsetSpec("earliest")
        new_positions = self._catalog.positions(spec, new_queues, bounds, unnamed=EARLIEST) if new_queues else {}
        now_ms = self._clock.now_ms()
        result = next_offsets(
            start_positions,
            bounds,
            new_positions,
            self._limits(limit),
            last_trigger_ms=self._last_trigger_ms,
            now_ms=now_ms,
            fail_on_data_loss=self.options.fail_on_data_loss,
            target=self._target,
        )
        for loss in result.losses:
            log_loss(loss, where="plan")
        if result.rows:
            self._last_trigger_ms = now_ms
        if result.positioned or result.rows:
            log.info(
                "event=batch_offsets rows=%d positioned=%d waiting=%s", result.rows, result.positioned, result.waiting
            )
        return to_offset_json(result.end)

    def _limits(self, limit: ReadLimit) -> TriggerLimits:
        if isinstance(limit, ReadAllAvailable):
            return TriggerLimits()  # Spark asks for everything (Trigger.Once): options do not apply
        # Spark passes one limit (the default one); the other option still applies. AvailableNow never waits.
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.options.min_offsets_per_trigger
        return TriggerLimits(
            max_rows=max_rows,
            min_rows=None if self._target is not None else min_rows,
            max_trigger_delay_ms=self.options.max_trigger_delay_ms,
        )

    def reportLatestOffset(self) -> dict | None:
        """The queue ends seen by the last ``latestOffset`` (shown in the query's progress)."""
        return self._latest_seen

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        ranges = ranges_between(from_offset_json(start), from_offset_json(end))
        return make_partitions(ranges, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict) -> None:
        if self.options.commit_to_group is None:
            return
        positions = from_offset_json(end)
        try:
            self._catalog.client.commit_group(self.options.commit_to_group, positions)
        except Exception as exc:  # monitoring only: the checkpoint holds the truth, never fail the query
            log.warning("event=commit_to_group_failed group=%s error=%s", self.options.commit_to_group, exc)
