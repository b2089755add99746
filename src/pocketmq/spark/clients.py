"""What the Spark source and sink need from PocketMQ, over the SDK, with one client per process.

Spark reuses its Python workers, so ``client_for(namesrv)`` keeps one ``QueueClient`` per name server in a
module-level cache: the first task of a worker connects, later tasks reuse the connections and routes. The
SDK runs its async core on one loop thread per process; calls that fan out over many queues (bounds,
timestamps, group commits) are gathered there in one round trip instead of one call per queue.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from pocketmq.client.config import ClientConfig
from pocketmq.client.loop_thread import client_loop
from pocketmq.client.producer import Producer, ProducerOptions, SendResult
from pocketmq.client.pull_consumer import MAX_PULL_COUNT, PullConsumer, PullStatus
from pocketmq.common.message import Message, MessageExt, MessageQueue
from pocketmq.spark.offsets import QueueBounds, QueueId

log = logging.getLogger(__name__)

SPARK_CONSUMER_GROUP = "PMQ_SPARK_READER"  # pulls name a group; offsets are never committed under it
SPARK_PRODUCER_GROUP = "PMQ_SPARK_WRITER"

_cache_lock = threading.Lock()
_clients: dict[str, "QueueClient"] = {}


@dataclass(frozen=True, slots=True)
class Pulled:
    """One pull: the messages found (already tag-filtered) and where the next pull starts."""

    status: str
    next_offset: int
    offset_moved: bool
    messages: list[MessageExt] = field(default_factory=list)


def client_for(namesrv: str) -> "QueueClient":
    """This process's client of ``namesrv`` (created on first use; forked processes get their own)."""
    with _cache_lock:
        client = _clients.get(namesrv)
        if client is None or not client.alive:
            client = _clients[namesrv] = QueueClient(namesrv)
        return client


class QueueClient:
    def __init__(self, namesrv: str):
        self.namesrv = namesrv
        self._config = ClientConfig(namesrv_addr=namesrv, instance_name=f"spark-{id(self):x}")
        self._loop = client_loop()
        self._consumer = PullConsumer(SPARK_CONSUMER_GROUP, self._config).start()
        self._producer: Producer | None = None
        self._group_consumers: dict[str, PullConsumer] = {}
        log.info("event=spark_client_started namesrv=%s", namesrv)

    @property
    def alive(self) -> bool:
        return self._loop is client_loop()

    # -- metadata --------------------------------------------------------------------------------------------
    def topic_names(self) -> set[str]:
        from pocketmq.client.admin import Admin  # lazily: only the driver needs the admin client

        with Admin(self._config) as admin:
            return {t for t in admin.topics()}

    def queues(self, topic: str) -> list[QueueId]:
        return sorted(QueueId(mq.topic, mq.broker_name, mq.queue_id) for mq in self._consumer.fetch_queues(topic))

    def bounds(self, queues: Sequence[QueueId]) -> dict[QueueId, QueueBounds]:
        core = self._consumer.core

        async def one(queue: QueueId) -> QueueBounds:
            mq = _mq(queue)
            low, high = await asyncio.gather(core.min_offset(mq), core.max_offset(mq))
            return QueueBounds(low, high)

        return dict(zip(queues, self._gather(one(q) for q in queues)))

    def offsets_for_timestamp(self, queues: Sequence[QueueId], timestamp_ms: int) -> dict[QueueId, int]:
        core = self._consumer.core
        return dict(zip(queues, self._gather(core.offset_for_timestamp(_mq(q), timestamp_ms) for q in queues)))

    # -- reading ---------------------------------------------------------------------------------------------
    def pull(self, queue: QueueId, queue_offset: int, max_count: int, tags: str, timeout_ms: int) -> Pulled:
        result = self._consumer.pull(_mq(queue), queue_offset, min(max_count, MAX_PULL_COUNT),
                                     tag_expression=tags, timeout_s=timeout_ms / 1000)
        return Pulled(result.status.value, result.next_begin_offset, result.status is PullStatus.OFFSET_ILLEGAL,
                      result.messages)

    def commit_group(self, group: str, positions: Mapping[QueueId, int]) -> None:
        """Store ``positions`` as ``group``'s consumer offsets (what ``pocketmq group describe`` shows)."""
        consumer = self._group_consumers.get(group)
        if consumer is None:
            consumer = self._group_consumers[group] = PullConsumer(group, self._config).start()
        core = consumer.core
        self._gather(core.commit(_mq(q), offset) for q, offset in positions.items())

    # -- writing ---------------------------------------------------------------------------------------------
    def send_batch(self, messages: Sequence[Message], *, timeout_ms: int,
                   queue: QueueId | None = None) -> SendResult:
        return self.producer.send_batch(messages, queue=_mq(queue) if queue else None, timeout_s=timeout_ms / 1000)

    def send(self, message: Message, *, timeout_ms: int) -> SendResult:
        return self.producer.send(message, timeout_s=timeout_ms / 1000)

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self._config, ProducerOptions(group=SPARK_PRODUCER_GROUP)).start()
        return self._producer

    def _gather(self, coros: Iterable) -> list:
        async def run_all():
            return await asyncio.gather(*coros)

        return self._loop.run(run_all())

    def __repr__(self) -> str:
        return f"<QueueClient namesrv={self.namesrv} alive={self.alive}>"


def _mq(queue: QueueId) -> MessageQueue:
    return MessageQueue(queue.topic, queue.broker, queue.queue_id)
