"""What the Spark source and sink need from PocketMQ, over the SDK, with one client per process.

Spark reuses its Python workers, so ``client_for(namesrv)`` keeps one ``QueueClient`` per name server in a
module-level cache: the first task of a worker connects, later tasks reuse the connections and routes. The
SDK runs its async core on one loop thread per process; calls that fan out over many queues (bounds,
timestamps, group commits) are gathered there in one round trip instead of one call per queue.

Pulls bypass the SDK's ``PullConsumer.pull``, which decodes every record into a ``MessageExt``: the reader
wants the reply body as the broker sent it (stored records back to back) to decode in bulk into Arrow
columns, and wants several pulls in flight, so ``submit_pull`` sends the PULL_MESSAGE request itself on the
SDK's client instance (its connections and routes) and returns a future.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pocketmq.client.config import ClientConfig
from pocketmq.client.loop_thread import client_loop
from pocketmq.client.producer import AsyncProducer, Producer, ProducerOptions
from pocketmq.client.pull_consumer import PullConsumer
from pocketmq.client.selector import MessageSelector
from pocketmq.common.errors import RemotingError
from pocketmq.common.message import Message, MessageQueue
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.replies import reply_error
from pocketmq.protocol.request_headers import PullMessageRequestHeader, PullSysFlag
from pocketmq.spark.offsets import QueueBounds, QueueId

log = logging.getLogger(__name__)

SPARK_CONSUMER_GROUP = "PMQ_SPARK_READER"  # pulls name a group; offsets are never committed under it
SPARK_PRODUCER_GROUP = "PMQ_SPARK_WRITER"
PULL_MAX_MESSAGES = 256  # the broker's cap on one pull (broker/messages.py PULL_MAX_COUNT)
RETRY_BACKOFF_S = 0.2  # between resends of a chunk after a retriable failure (grows with the attempt)

_cache_lock = threading.Lock()
_clients: dict[str, QueueClient] = {}


@dataclass(frozen=True, slots=True)
class Pulled:
    """One pull: the stored records as the broker sent them (RocketMQ 4.x layout, back to back, filtered by
    tag hash or by an SQL92 expression) and where the next pull starts, past what the broker filtered out."""

    status: str  # FOUND, NO_NEW_MSG, NO_MATCHED_MSG or OFFSET_MOVED
    next_offset: int
    records: bytes = b""

    @property
    def offset_moved(self) -> bool:
        return self.status == "OFFSET_MOVED"


_PULL_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_MOVED",
}


def client_for(namesrv: str) -> QueueClient:
    """This process's client of ``namesrv`` (created on first use; forked processes get their own)."""
    with _cache_lock:
        client = _clients.get(namesrv)
        if client is None or not client.alive:
            client = _clients[namesrv] = QueueClient(namesrv)
        return client


class QueueClient:
    def __init__(self, namesrv: str):
        self.namesrv = namesrv
        self._config = ClientConfig(namesrv_addr=namesrv, instance_name=f"spark-{os.getpid()}")
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
            return set(admin.list_topics())

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

    def check_selector(self, topics: Sequence[str], selector: MessageSelector) -> None:
        """Ask the topics' brokers whether they filter by ``selector`` (an SQL92 one: each broker may have
        property filtering off); RemoteServerError when one refuses."""
        subscriptions = dict.fromkeys(topics, selector)
        self._loop.run(self._consumer.core.instance.check_subscriptions(SPARK_CONSUMER_GROUP, subscriptions))

    # -- reading ---------------------------------------------------------------------------------------------
    def submit_pull(
        self, queue: QueueId, queue_offset: int, max_count: int, selector: MessageSelector, timeout_ms: int
    ) -> concurrent.futures.Future[Pulled]:
        """Start one pull on the client loop and return at once (the caller keeps several in flight). The
        records come back undecoded: the reader decodes them in bulk, straight into columns."""
        return asyncio.run_coroutine_threadsafe(
            self._pull(queue, queue_offset, max_count, selector, timeout_ms), self._loop.loop
        )

    async def _pull(
        self, queue: QueueId, queue_offset: int, max_count: int, selector: MessageSelector, timeout_ms: int
    ) -> Pulled:
        instance = self._consumer.core.instance
        if queue.broker not in instance.broker_addrs:
            await instance.route(queue.topic, refresh=True)
        request = RemotingCommand.request(
            RequestCode.PULL_MESSAGE,
            PullMessageRequestHeader.ext_fields(
                consumer_group=SPARK_CONSUMER_GROUP,
                topic=queue.topic,
                queue_id=queue.queue_id,
                queue_offset=queue_offset,
                max_msg_nums=max_count,
                sys_flag=PullSysFlag.of(subscription=True),  # no commit, no suspend
                commit_offset=0,
                suspend_timeout_ms=0,
                subscription=selector.expression,
                sub_version=0,
                expression_type=selector.expression_type,
            ),
        )
        response = await instance.invoke_broker(queue.broker, request, timeout_ms / 1000)
        status = _PULL_STATUS_BY_CODE.get(response.code)
        if status is None:
            raise reply_error(response)
        try:
            next_offset = int(response.ext_fields["nextBeginOffset"])
        except (KeyError, ValueError):
            raise RemoteServerError(
                ResponseCode.SYSTEM_ERROR, f"pull reply lacks nextBeginOffset: {response.ext_fields}"
            ) from None
        return Pulled(status, next_offset, response.body if status == "FOUND" else b"")

    def commit_group(self, group: str, positions: Mapping[QueueId, int]) -> None:
        """Store ``positions`` as ``group``'s consumer offsets (what ``pocketmq group describe`` shows)."""
        consumer = self._group_consumers.get(group)
        if consumer is None:
            consumer = self._group_consumers[group] = PullConsumer(group, self._config).start()
        core = consumer.core
        self._gather(core.commit(_mq(q), offset) for q, offset in positions.items())

    # -- writing ---------------------------------------------------------------------------------------------
    def write_queues(self, topic: str) -> list[QueueId]:
        """``topic``'s writable queues in route order (interleaved by broker): what placement indexes."""
        route = self._loop.run(self.producer.core.instance.route(topic))
        return [QueueId(mq.topic, mq.broker_name, mq.queue_id) for mq in route.write_queues]

    def send_chunks(
        self, chunks: Mapping[QueueId, Sequence[Sequence[Message]]], *, timeout_ms: int, attempts: int
    ) -> None:
        """Send every chunk to its queue as one batch: queues in parallel, a queue's chunks in order. A
        retriable failure is retried on the *same* queue (idempotent keys make that safe; another broker
        could not de-duplicate), up to ``attempts`` times within ``timeout_ms`` per chunk."""
        core = self.producer.core

        async def one_queue(queue: QueueId, queue_chunks: Sequence[Sequence[Message]]) -> None:
            for chunk in queue_chunks:
                await _send_chunk(core, queue, chunk, timeout_ms=timeout_ms, attempts=attempts)

        self._gather(one_queue(queue, queue_chunks) for queue, queue_chunks in chunks.items())

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


async def _send_chunk(
    core: AsyncProducer, queue: QueueId, chunk: Sequence[Message], *, timeout_ms: int, attempts: int
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    for attempt in range(1, attempts + 1):
        try:
            await core.send_batch(chunk, queue=_mq(queue), timeout_s=max(0.1, deadline - loop.time()))
            return
        except (RemotingError, RemoteServerError) as exc:
            if not exc.retriable or attempt == attempts or loop.time() >= deadline:
                raise
            log.info("event=sink_send_retry queue=%s messages=%d attempt=%d error=%s", queue, len(chunk), attempt, exc)
            await asyncio.sleep(min(RETRY_BACKOFF_S * attempt, max(0.0, deadline - loop.time())))


def _mq(queue: QueueId) -> MessageQueue:
    return MessageQueue(queue.topic, queue.broker, queue.queue_id)
