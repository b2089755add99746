"""Simple (POP) consumers: ``AsyncSimpleConsumer`` (asyncio core) and ``SimpleConsumer`` (synchronous facade).

The broker owns the position: ``receive`` pops up to ``max_count`` (<= 32) messages of the subscribed topics,
each invisible to other consumers of the group for ``invisible_duration_ms``; ``ack`` removes a message for
good; ``change_invisible_duration`` moves its deadline (the delivery attempt stays). A message neither acked
nor changed comes back after its invisible time with ``reconsume_times`` + 1, and lands in ``%DLQ%<group>``
after the group's max retries. Over the remoting protocol (POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME).

A received message carries its receipt handle as the ``POP_CK`` property (RocketMQ's extraInfo, built from
the reply's startOffsetInfo / msgOffsetInfo as RocketMQ's client does) and the broker name in
``PMQ_BROKER_NAME``; ``ack`` and ``change_invisible_duration`` need nothing else.

>>> with SimpleConsumer("my-group", {"orders": "*"}, config) as consumer:
...     for msg in consumer.receive(32, invisible_duration_ms=30_000):
...         handle(msg)
...         consumer.ack(msg)
"""

from __future__ import annotations

import itertools
import logging
import zlib
from collections.abc import Mapping

from pocketmq.client.batch_ack import BROKER_NAME_PROPERTY, AckCoalescer, batch_ack_requests, pop_ck
from pocketmq.client.config import ClientConfig
from pocketmq.client.consumer_tracing import ConsumerTracing
from pocketmq.client.instance import (
    ClientInstance,
    ConsumerData,
    acquire_instance,
    checked_subscriptions,
    release_instance,
)
from pocketmq.client.loop_thread import SyncFacade
from pocketmq.client.selector import MessageSelector, as_selector
from pocketmq.common import properties as props
from pocketmq.common.errors import BadRequestError, ClientError
from pocketmq.common.message import SYSFLAG_COMPRESSED, MessageExt
from pocketmq.common.namespace import Namespace
from pocketmq.common.record import decode_records_prefix
from pocketmq.common.topic import group_name_problem, topic_name_problem
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)

log = logging.getLogger(__name__)

MAX_RECEIVE = 32
_NOTHING = (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.NO_MESSAGE)


def _infos(text: str) -> dict[tuple[int, int], str]:
    """``"r qid value;r qid value"`` -> {(r, qid): value}."""
    out = {}
    for entry in (text or "").split(";"):
        parts = entry.split(" ")
        if len(parts) >= 3:
            out[(int(parts[0]), int(parts[1]))] = " ".join(parts[2:])
    return out


def messages_of_pop_reply(response: RemotingCommand, broker_name: str) -> list[MessageExt]:
    """Decode a POP_MESSAGE reply; every message gets its POP_CK (extraInfo) and broker name."""
    h = response.ext_fields
    starts = _infos(h.get("startOffsetInfo", ""))
    order_counts = {
        (int(p[0]), int(p[1]), int(p[2])): int(p[3])
        for p in (e.split(" ") for e in h.get("orderCountInfo", "").split(";"))
        if len(p) == 4
    }
    head = f"{h['popTime']} {h['invisibleTime']} {h['reviveQid']}"
    messages, damaged = decode_records_prefix(response.body)
    if damaged is not None:  # the rest of the reply comes back after its invisible time, like any unacked message
        log.error(
            "event=damaged_record_in_pop_reply broker=%s records_kept=%d error=%s", broker_name, len(messages), damaged
        )
    for msg in messages:
        retry = 1 if props.RETRY_TOPIC in msg.properties else 0
        start = starts.get((retry, msg.queue_id), msg.queue_offset)
        if (retry, msg.queue_id, msg.queue_offset) in order_counts:
            start = msg.queue_offset  # FIFO: every message is its own checkpoint
            msg.reconsume_times = order_counts[(retry, msg.queue_id, msg.queue_offset)]
        msg.properties[props.POP_CK] = f"{start} {head} {retry} {broker_name} {msg.queue_id} {msg.queue_offset}"
        msg.properties[BROKER_NAME_PROPERTY] = broker_name
        if msg.sys_flag & SYSFLAG_COMPRESSED:
            msg.body = zlib.decompress(msg.body)
            msg.sys_flag &= ~SYSFLAG_COMPRESSED
    return messages


class AsyncSimpleConsumer:
    """The asyncio simple consumer of one consumer group over ``subscriptions`` {topic: a tag expression or a
    ``MessageSelector``}."""

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, str | MessageSelector],
        config: ClientConfig | None = None,
        *,
        await_duration_ms: int = 20_000,
    ):
        problem = group_name_problem(group) or next(filter(None, map(topic_name_problem, subscriptions)), None)
        if problem:
            raise ClientError(problem)
        if not subscriptions:
            raise ClientError("a simple consumer subscribes to at least one topic")
        self.config = config or ClientConfig()
        self.namespace = Namespace(self.config.namespace)
        self.group = self.namespace.wrap(group)
        self.subscriptions = {self.namespace.wrap(topic): as_selector(s) for topic, s in subscriptions.items()}
        self.await_duration_ms = await_duration_ms
        self._instance: ClientInstance | None = None
        self._turn = itertools.count()
        self._tracing: ConsumerTracing | None = None  # with config.enable_trace, once started
        self._acks = AckCoalescer(self.group, self.namespace.wrap, self._invoke_broker, self._ack_alone)

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientError("simple consumer is not started")
        return self._instance

    async def start(self) -> None:
        if self._instance is not None:
            return
        instance = await acquire_instance(self.config)
        await checked_subscriptions(instance, self.group, self.subscriptions)
        self._instance = instance
        self._instance.register_consumer(
            ConsumerData(self.group, consume_type="CONSUME_POP", subscriptions=self.subscriptions)
        )
        for topic in self.subscriptions:
            await self._instance.route(topic)
        await self._instance.heartbeat_all()
        if self.config.enable_trace:
            self._tracing = await ConsumerTracing.start(self.config, self._instance)

    async def shutdown(self) -> None:
        if self._instance is None:
            return
        if self._tracing is not None:
            await self._tracing.stop()
            self._tracing = None
        instance, self._instance = self._instance, None
        instance.unregister_consumer(self.group)
        await release_instance(instance)

    async def __aenter__(self) -> AsyncSimpleConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()

    async def receive(
        self, max_count: int = MAX_RECEIVE, invisible_duration_ms: int = 30_000, *, await_duration_ms: int | None = None
    ) -> list[MessageExt]:
        """Up to ``max_count`` messages of one subscribed topic and broker (turn by turn); waits up to
        ``await_duration_ms`` (default: the consumer's) for one to arrive. An empty list when none came."""
        if not 1 <= max_count <= MAX_RECEIVE:
            raise BadRequestError(f"max_count must be in [1, {MAX_RECEIVE}], got {max_count}")
        if invisible_duration_ms <= 0:
            raise BadRequestError("invisible_duration_ms must be positive")
        wait_ms = self.await_duration_ms if await_duration_ms is None else await_duration_ms
        instance = self.instance
        turn = next(self._turn)
        topics = sorted(self.subscriptions)
        topic = topics[turn % len(topics)]
        route = await instance.route(topic)
        if (
            not route.readable_broker_names
        ):  # fetched while the brokers were away: ask again now, not at the next refresh
            route = await instance.route(topic, refresh=True)
        brokers = route.readable_broker_names  # a group without master is read through its slave
        if not brokers:
            raise ClientError(f"topic {topic!r} has no readable queue")
        broker_name = brokers[turn // len(topics) % len(brokers)]
        request = RemotingCommand.request(
            RequestCode.POP_MESSAGE,
            PopMessageRequestHeader.ext_fields(
                consumer_group=self.group,
                topic=topic,
                queue_id=-1,
                max_msg_nums=max_count,
                invisible_time_ms=invisible_duration_ms,
                poll_time_ms=wait_ms,
                born_time_ms=instance.clock.now_ms(),
                init_mode=0,
                exp_type=self.subscriptions[topic].expression_type,
                exp=self.subscriptions[topic].expression,
                order=False,
            ),
        )
        response = await instance.invoke_broker(broker_name, request, wait_ms / 1000 + self.config.request_timeout_s)
        if response.code in _NOTHING:
            return []
        if response.code != ResponseCode.SUCCESS and broker_name not in route.master_addrs:
            # A slave serves POP only while it acts as master (docs/ha.md): until then its group has nothing
            log.info(
                "event=pop_refused_by_slave broker=%s code=%d remark=%s", broker_name, response.code, response.remark
            )
            return []
        messages = [
            self.namespace.unwrap_message(msg) for msg in messages_of_pop_reply(expect_success(response), broker_name)
        ]
        if self._tracing is not None:
            self._tracing.tracer.received(self.group, messages)
        return messages

    async def ack(self, msg: MessageExt) -> None:
        """Ack ``msg``; returns once the broker has taken the ack. The acks of one event-loop turn go to each
        broker as one request (``client/batch_ack.py``), each with its own outcome."""
        await self._acks.ack(msg)
        self._trace_acked([msg])

    async def _ack_alone(self, msg: MessageExt) -> None:
        await self._about_receipt(msg, RequestCode.ACK_MESSAGE, AckMessageRequestHeader)

    async def _invoke_broker(self, broker_name: str, request: RemotingCommand) -> RemotingCommand:
        return await self.instance.invoke_broker(broker_name, request)

    def _trace_acked(self, messages: list[MessageExt]) -> None:
        """Acked: consumed, in the time since the receive (the receipt's pop time)."""
        if self._tracing is None or not messages:
            return
        now_ms = self.instance.clock.now_ms()
        for msg in messages:
            cost_ms = max(now_ms - int(pop_ck(msg)[0].split(" ")[1]), 0)
            self._tracing.tracer.consumed([msg], True, cost_ms)

    async def ack_batch(self, messages: list[MessageExt]) -> None:
        """Ack many messages in one BATCH_ACK_MESSAGE per broker (stale ones are skipped by the broker)."""
        for broker, batch in batch_ack_requests(messages, self.group, self.namespace.wrap).items():
            expect_success(await self.instance.invoke_broker(broker, batch.request))
        self._trace_acked(messages)

    async def change_invisible_duration(self, msg: MessageExt, invisible_duration_ms: int) -> MessageExt:
        """Make ``msg`` invisible for ``invisible_duration_ms`` from now; updates (and returns) ``msg`` with its
        new receipt handle: ack or change it again through the returned message."""
        response = await self._about_receipt(
            msg,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            ChangeInvisibleTimeRequestHeader,
            invisible_time_ms=invisible_duration_ms,
        )
        parts = msg.properties[props.POP_CK].split(" ")
        h = response.ext_fields
        parts[0], parts[1], parts[2], parts[3] = parts[7], h["popTime"], h["invisibleTime"], h["reviveQid"]
        msg.properties[props.POP_CK] = " ".join(parts)
        return msg

    async def _about_receipt(
        self, msg: MessageExt, code: int, header: type[AckMessageRequestHeader], **more: int
    ) -> RemotingCommand:
        """Request ``code`` about ``msg``'s receipt handle (an ack or a change of it, ``header`` with ``more``
        fields) to the broker that handed it out; the reply, SUCCESS."""
        extra, broker = pop_ck(msg)
        fields = header.ext_fields(
            consumer_group=self.group,
            topic=self.namespace.wrap(msg.topic),
            queue_id=msg.queue_id,
            extra_info=extra,
            offset=int(extra.rsplit(" ", 1)[1]),  # the last of the handle's fields
            **more,
        )
        return expect_success(await self.instance.invoke_broker(broker, RemotingCommand.request(code, fields)))

    def __repr__(self) -> str:
        return f"<AsyncSimpleConsumer group={self.group} topics={sorted(self.subscriptions)}>"


class SimpleConsumer(SyncFacade):
    """The synchronous simple consumer: ``AsyncSimpleConsumer`` run on the process's client loop thread."""

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, str | MessageSelector],
        config: ClientConfig | None = None,
        *,
        await_duration_ms: int = 20_000,
    ):
        super().__init__(AsyncSimpleConsumer(group, subscriptions, config, await_duration_ms=await_duration_ms))

    def receive(
        self, max_count: int = MAX_RECEIVE, invisible_duration_ms: int = 30_000, *, await_duration_ms: int | None = None
    ) -> list[MessageExt]:
        return self._loop.run(self.core.receive(max_count, invisible_duration_ms, await_duration_ms=await_duration_ms))

    def ack(self, msg: MessageExt) -> None:
        self._loop.run(self.core.ack(msg))

    def ack_batch(self, messages: list[MessageExt]) -> None:
        self._loop.run(self.core.ack_batch(messages))

    def change_invisible_duration(self, msg: MessageExt, invisible_duration_ms: int) -> MessageExt:
        return self._loop.run(self.core.change_invisible_duration(msg, invisible_duration_ms))

    def __repr__(self) -> str:
        return f"<SimpleConsumer {self.core!r}>"
