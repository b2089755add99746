"""Batch and streaming sinks of the ``pocketmq`` data source: ``df.write`` / ``df.writeStream``.

Each Spark task turns its rows into messages (``sink_rows``), stamps every message with an idempotency key
derived from (write id, batch id, partition, content, occurrence), places it on a queue that depends only
on the message, and sends the messages in batches of one queue. The broker stores a key once (property
``PMQ_IDEMPOTENT=true``), so a task retried by Spark, or a micro-batch replayed after a crash, rewrites
nothing that is already in the topic: exactly once for streaming writes, within the broker's
de-duplication window (docs/spark.md).

Writers are built on the driver and pickled to executors: they hold options and the checked column
layout, never a client (the executor's process-wide client comes from ``client_for``). Spark's ``commit``
and ``abort`` run in another driver worker with a fresh writer; they only log, because every message is
durable (and idempotent) once its task's ``write`` returns.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pocketmq.common.message import Message
from pocketmq.spark.clients import client_for
from pocketmq.spark.offsets import QueueId
from pocketmq.spark.options import OptionError, SinkOptions, parse_sink_options
from pocketmq.spark.sink_rows import KeyMinter, SinkLayout, chunk_messages, queue_index, row_to_message, sink_layout

log = logging.getLogger(__name__)

MAX_BATCH_MESSAGES = 512  # messages per send request
MAX_BATCH_BYTES = 1024 * 1024  # body bytes per send request (the broker takes up to 4 MiB)
FLUSH_MESSAGES = 4096  # messages buffered by a task before they are sent
SEND_ATTEMPTS = 3


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: messages per topic."""

    partition_id: int
    messages_by_topic: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskIdentity:
    """Where a task's idempotency keys come from."""

    write_id: str
    batch_id: int
    partition_id: int


def write_task(
    batches: Iterator[pa.RecordBatch], options: SinkOptions, layout: SinkLayout, identity: TaskIdentity
) -> SinkCommitMessage:
    """Send every row of one task; returns once all of it is stored (or raises, and Spark retries)."""
    client = client_for(options.namesrv)
    minter = KeyMinter(identity.write_id, identity.batch_id, identity.partition_id)
    queues_of: dict[str, list[QueueId]] = {}
    pending: dict[QueueId, list[Message]] = defaultdict(list)
    buffered = sequence = 0
    written: Counter[str] = Counter()

    def flush() -> None:
        chunks = {
            queue: chunk_messages(messages, max_count=MAX_BATCH_MESSAGES, max_bytes=MAX_BATCH_BYTES)
            for queue, messages in pending.items()
        }
        client.send_chunks(chunks, timeout_ms=options.send_timeout_ms, attempts=SEND_ATTEMPTS)
        for queue, messages in pending.items():
            written[queue.topic] += len(messages)
        pending.clear()

    for batch in batches:
        for row in zip(*(column.to_pylist() for column in batch.columns)):
            message = row_to_message(row, layout)
            if options.idempotent:
                minter.stamp(message)
            queues = queues_of.get(message.topic)
            if queues is None:
                queues = queues_of[message.topic] = client.write_queues(message.topic)
            pending[queues[queue_index(message, len(queues), sequence=sequence)]].append(message)
            sequence += 1
            buffered += 1
            if buffered >= FLUSH_MESSAGES:
                flush()
                buffered = 0
    if pending:
        flush()
    log.info(
        "event=sink_task_written write_id=%s batch_id=%d partition=%d messages=%s",
        identity.write_id,
        identity.batch_id,
        identity.partition_id,
        dict(written),
    )
    return SinkCommitMessage(identity.partition_id, dict(written))


def check_sink(options: SinkOptions, schema: StructType) -> SinkLayout:
    """Driver-side checks at start: the columns, and that the ``topic`` option names an existing topic."""
    layout = sink_layout([(f.name, f.dataType.simpleString()) for f in schema.fields], options.topic)
    if options.topic is not None and options.topic not in client_for(options.namesrv).topic_names():
        raise OptionError("topic", f"topic {options.topic!r} does not exist on the cluster of {options.namesrv}")
    return layout


def _task_context() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("pocketmq sink: write() ran outside a Spark task")
    return context


def _summary(messages: list) -> tuple[int, Counter[str]]:
    totals: Counter[str] = Counter()
    failed = 0
    for message in messages:
        if message is None:
            failed += 1
        else:
            totals.update(message.messages_by_topic)
    return failed, totals


class PocketBatchWriter(DataSourceArrowWriter):
    """``df.write.format("pocketmq")``: the write id is drawn once, when the write is planned, so a task
    that Spark retries re-sends the same keys and the broker keeps one copy."""

    def __init__(self, raw_options: dict[str, str], schema: StructType, overwrite: bool):
        if overwrite:
            raise OptionError("mode", "a topic is append-only: use mode 'append', not 'overwrite'")
        self.options = parse_sink_options(raw_options)
        self.layout = check_sink(self.options, schema)
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        identity = TaskIdentity(self.write_id, 0, _task_context().partitionId())
        return write_task(iterator, self.options, self.layout, identity)

    def commit(self, messages: list) -> None:
        _, totals = _summary(messages)
        log.info("event=sink_write_committed write_id=%s messages=%s", self.write_id, dict(totals))

    def abort(self, messages: list) -> None:
        failed, totals = _summary(messages)
        log.warning(
            "event=sink_write_aborted write_id=%s failed_tasks=%d messages_already_stored=%s",
            self.write_id,
            failed,
            dict(totals),
        )


class PocketStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("pocketmq")``: keys come from the query id (kept in the checkpoint, the same
    after a restart) and the micro-batch id, so a replayed batch re-sends exactly its earlier keys."""

    def __init__(self, raw_options: dict[str, str], schema: StructType, overwrite: bool):
        # Complete and update output modes append each batch's result rows, as Kafka's sink does.
        self.options = parse_sink_options(raw_options)
        self.layout = check_sink(self.options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        context = _task_context()
        query_id = context.getLocalProperty("sql.streaming.queryId")
        batch_id = context.getLocalProperty("streaming.sql.batchId")
        if query_id is None or batch_id is None:
            raise RuntimeError("pocketmq stream sink: Spark did not set the query id and batch id of this task")
        identity = TaskIdentity(query_id, int(batch_id), context.partitionId())
        return write_task(iterator, self.options, self.layout, identity)

    def commit(self, messages: list, batchId: int) -> None:
        _, totals = _summary(messages)
        log.info("event=sink_batch_committed batch_id=%d messages=%s", batchId, dict(totals))

    def abort(self, messages: list, batchId: int) -> None:
        failed, totals = _summary(messages)
        # What the successful tasks stored stays in the topic; the batch's replay re-sends the same keys and
        # the broker answers those with the stored copies.
        log.warning(
            "event=sink_batch_aborted batch_id=%d failed_tasks=%d messages_already_stored=%s",
            batchId,
            failed,
            dict(totals),
        )
