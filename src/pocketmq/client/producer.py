"""Producers: ``AsyncProducer`` (the asyncio core) and ``Producer`` (its synchronous facade).

A send picks a queue (round robin over every broker's writable queues, or the message group's queue, or any
``QueueSelector``), sends SEND_MESSAGE_V2 (one-letter header fields) to that broker's master, and on a
retriable failure (connection lost, timeout, broker busy, topic or permission gone on that broker) tries again
on another broker, up to ``retry_times_when_send_failed`` (sync) or ``retry_times_when_send_async_failed``
(``send_async``) more times within one overall deadline, refreshing the route when the error says so. A reply
of FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE is a stored message with a weaker guarantee:
a result, unless ``retry_another_broker_when_not_store_ok`` asks to try another broker. With
``send_latency_fault_enable`` every send's latency (or failure) is reported to ``LatencyFaultTolerance`` and
brokers sitting out are avoided by the selector. ``send_oneway`` waits for nothing and never retries.

Gray release (docs/gray.md): a gray producer (``ClientConfig.enable_gray_switch``) marks its messages gray;
a gray message (from it, or marked by hand) goes to a gray queue through ``GraySelector``, and on a topic with
a gray ratio of its own (carried by the route) every other message to a normal queue.

Bodies of ``compress_over_bytes`` and more are zlib-compressed (sys_flag bit 0), as 4.x clients do; batches
are never compressed.

With ``auto_batch`` the plain sends an ``AsyncProducer`` starts in one loop turn travel as one batch
(client/send_accumulator.py). The synchronous ``Producer`` sends from the calling thread over blocking
connections of its own (client/blocking_channel.py), running the same ``_send_with_retries``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import logging
import zlib
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from pocketmq.client.blocking_channel import BlockingChannels
from pocketmq.client.config import ClientConfig
from pocketmq.client.instance import ClientInstance, InstanceUser
from pocketmq.client.latency_fault import LatencyFaultTolerance
from pocketmq.client.loop_thread import SyncFacade
from pocketmq.client.queue_select import GraySelector, MessageGroupSelector, QueueSelector, RetryTopicSelector
from pocketmq.client.recall import recall_message
from pocketmq.client.route_view import TopicRouteView
from pocketmq.client.send_accumulator import SendAccumulator
from pocketmq.client.tracing import ClientTracer
from pocketmq.common import properties as props
from pocketmq.common.errors import (
    ClientError,
    IllegalMessageError,
    IllegalTopicError,
    NoWritableQueueError,
    PocketMQError,
    RemotingError,
    RemotingTimeoutError,
)
from pocketmq.common.gray import GRAY_PROPERTY, is_gray_message
from pocketmq.common.message import SYSFLAG_COMPRESSED, Message, MessageQueue
from pocketmq.common.namespace import Namespace
from pocketmq.common.topic import DEFAULT_TOPIC, RETRY_GROUP_TOPIC_PREFIX, group_name_problem, topic_name_problem
from pocketmq.protocol.batch_codec import encode_batch
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.replies import reply_error
from pocketmq.protocol.request_headers import SendMessageRequestHeaderV2
from pocketmq.runtime.clock import Clock

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
LEGAL_TOPICS_CACHED = 1024
T = TypeVar("T")
# Where a message in an automatic batch would be stored or answered differently than alone (delays, transactions,
# FIFO groups, de-duplication).
_UNBATCHABLE_PROPERTIES = frozenset(
    {
        props.DELAY_TIME_LEVEL,
        props.TIMER_DELIVER_MS,
        props.TIMER_DELAY_SEC,
        props.TIMER_DELAY_MS,
        props.TRANSACTION_PREPARED,
        props.SHARDING_KEY,
        props.IDEMPOTENT,
    }
)  # a de-duplicated one answers with its first copy's place


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_STATUS_BY_CODE: dict[int, SendStatus] = {  # looked up by a reply's int code
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where a message (or a batch) was stored.

    ``msg_id`` is the producer's UNIQ_KEY (comma-joined for a batch, as RocketMQ), ``message_ids`` the same as
    a list; ``offset_msg_id`` the broker's id(s); a batch occupies ``queue_offset .. queue_offset + n - 1``.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    message_ids: tuple[str, ...] = field(default=())
    recall_handle: str | None = None  # a delayed message's: ``recall_message`` cancels it before it is due

    @property
    def queue_id(self) -> int:
        return self.message_queue.queue_id


@dataclass(frozen=True, slots=True)
class ProducerOptions:
    group: str = DEFAULT_PRODUCER_GROUP
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    # Resend a message stored with a weaker guarantee (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
    # SLAVE_NOT_AVAILABLE) on another broker (RocketMQ's retryAnotherBrokerWhenNotStoreOK).
    retry_another_broker_when_not_store_ok: bool = False
    # Avoid brokers that were slow or failing for RocketMQ 5's durations (client/latency_fault.py).
    send_latency_fault_enable: bool = False
    send_timeout_s: float = 3.0
    compress_over_bytes: int = 4096
    max_message_bytes: int = MAX_MESSAGE_BYTES
    default_topic_queue_nums: int = 4
    # Merge the plain sends of one topic started in one loop turn into one batch (client/send_accumulator.py;
    # RocketMQ 5's autoBatch): off by default, as in RocketMQ.
    auto_batch: bool = False
    auto_batch_max_messages: int = 64
    auto_batch_max_bytes: int = 256 * 1024  # of bodies

    def __post_init__(self) -> None:
        problem = group_name_problem(self.group)
        if problem:
            raise ClientError(f"producer group: {problem}")
        if (
            min(self.retry_times_when_send_failed, self.retry_times_when_send_async_failed) < 0
            or self.send_timeout_s <= 0
        ):
            raise ClientError("retry times must be >= 0 and send_timeout_s > 0")
        if self.auto_batch_max_messages < 1 or not 0 < self.auto_batch_max_bytes <= self.max_message_bytes // 2:
            raise ClientError(
                "auto_batch_max_messages must be >= 1 and auto_batch_max_bytes in (0, "
                "max_message_bytes / 2] (a batch's encoding adds to its bodies)"
            )


class AsyncProducer(InstanceUser):
    """The asyncio producer. ``await start()``, then ``await send(msg)`` from any task of the same loop."""

    _kind = "producer"

    def __init__(
        self,
        config: ClientConfig | None = None,
        options: ProducerOptions | None = None,
        *,
        selector: QueueSelector | None = None,
        instance: ClientInstance | None = None,
    ):
        super().__init__(config, instance=instance)
        self.namespace = Namespace(self.config.namespace)
        options = options or ProducerOptions()
        self.options = replace(options, group=self.namespace.wrap(options.group))
        self.selector = selector or MessageGroupSelector()
        self._gray_selector: GraySelector | None = None  # built on the first gray message
        self._retry_selector: RetryTopicSelector | None = None  # built on the first send to a retry topic
        self.faults = LatencyFaultTolerance()  # used when options.send_latency_fault_enable
        self._legal_topics: set[str] = set()  # names already checked, so a send skips the regex
        self.tracer: ClientTracer | None = None  # with config.enable_trace, once started
        self._accumulator = (
            SendAccumulator(
                self._send_auto_batch,
                max_messages=self.options.auto_batch_max_messages,
                max_bytes=self.options.auto_batch_max_bytes,
            )
            if self.options.auto_batch
            else None
        )

    # -- sending ------------------------------------------------------------------------------------------------
    async def send(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        timeout_s: float | None = None,
        delay_level: int | None = None,
        deliver_at_ms: int | None = None,
    ) -> SendResult:
        """Send one message; with ``queue``, to that queue only (no retry elsewhere).

        ``delay_level`` (1-18 with the broker's default table) or ``deliver_at_ms`` (epoch ms) delays it.
        """
        return await self._start_send(
            message, queue, timeout_s, delay_level, deliver_at_ms, self.options.retry_times_when_send_failed
        )

    def _start_send(
        self,
        message: Message,
        queue: MessageQueue | None,
        timeout_s: float | None,
        delay_level: int | None,
        deliver_at_ms: int | None,
        retry_times: int,
        *,
        at_once: bool = False,
    ) -> asyncio.Future[SendResult] | Coroutine[object, object, SendResult]:
        """An automatic batch's future for a send that may join one, else the coroutine of a send alone; with
        ``at_once`` (``send_async``) the future of a first attempt already sent when it could be (``_send_now``).
        """
        if (
            self._accumulator is not None
            and queue is None
            and timeout_s is None
            and delay_level is None
            and deliver_at_ms is None
            and self._batchable(message)
        ):
            return self._accumulator.add(message, retry_times)
        build = self._prepare_single(message, delay_level, deliver_at_ms)
        if at_once and queue is None:
            sent = self._send_now(message, build, timeout_s, retry_times)
            if sent is not None:
                return sent
        return self._send_with_retries(message, build, queue, timeout_s, retry_times)

    def _send_now(self, message: Message, build, timeout_s: float | None, retry_times: int) -> asyncio.Future | None:
        """The first attempt of a send, sent now, its reply handled by a callback: no task and no coroutine for a
        send whose route is cached and whose broker connection is open, the usual case (a task's creation and
        steps cost about 7% of a ``send_async``'s client CPU: docs/benchmarks.md). Its retries, when it needs
        any, run as the task of ``_send_with_retries`` from where this attempt left them. None when the attempt
        cannot start at once: the caller runs the coroutine, which waits for the route or the connection."""
        instance = self.instance
        route = instance.cached_route(message.topic)
        if route is None or not route.write_queues:
            return None
        clock = instance.clock
        timeout_s = timeout_s or self.options.send_timeout_s
        attempts = _Attempts(clock.monotonic_ms() + timeout_s * 1000, total=1 + retry_times)
        mq, address = self._pick_queue(message, route, attempts.failed_brokers, clock)
        request = build(mq)
        started_ms = clock.monotonic_ms()
        reply = instance.remoting.request_now(address, request, timeout_s)
        if reply is None:
            return None
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[SendResult] = loop.create_future()

        def on_reply(_: asyncio.Future) -> None:
            if outcome.cancelled():
                return
            if reply.cancelled():
                outcome.cancel()
                return
            try:
                response = instance.remoting.reply(address, reply, request, timeout_s)
                result = self._sent(response, message, mq, address, started_ms, None)
                if self._settled(result, attempts, message, mq):
                    outcome.set_result(result)
                    return
            except (RemotingError, RemoteServerError, NoWritableQueueError) as exc:
                try:
                    self._attempt_failed(exc, attempts, message, mq)
                except PocketMQError as final:
                    outcome.set_exception(final)
                    return
            except Exception as exc:  # whatever failed, the send's future says so: it must never stay pending
                outcome.set_exception(exc)
                return
            retries = loop.create_task(
                self._send_with_retries(message, build, None, timeout_s, retry_times, resumed=attempts)
            )
            retries.add_done_callback(lambda task: _settle(outcome, task))
            outcome.add_done_callback(lambda f: retries.cancel() if f.cancelled() else None)

        reply.add_done_callback(on_reply)
        return outcome

    async def _send_alone(self, message: Message, retry_times: int) -> SendResult:
        """A message of a refused automatic batch, sent on its own (its own checks' errors raise in here)."""
        build = self._prepare_single(message, None, None)
        return await self._send_with_retries(message, build, None, None, retry_times)

    def _prepare_single(self, message: Message, delay_level: int | None, deliver_at_ms: int | None):
        """Check and stamp ``message``; the builder of its SEND_MESSAGE_V2 for a queue."""
        instance = self.instance
        _set_delay(message, delay_level, deliver_at_ms)
        self._check_message(message)
        self._mark_gray(message)
        if props.UNIQ_KEY not in message.properties:
            message.properties[props.UNIQ_KEY] = instance.message_ids.next_id(instance.clock.now_ms())
        body, sys_flag = message.body, 0
        if len(body) >= self.options.compress_over_bytes:
            body, sys_flag = zlib.compress(body), SYSFLAG_COMPRESSED
        properties = props.encode_properties(message.properties)

        def build(mq: MessageQueue) -> RemotingCommand:
            return self._request(
                RequestCode.SEND_MESSAGE_V2, mq, properties, sys_flag, message.flag, body, instance.clock
            )

        return build

    def _batchable(self, message: Message) -> bool:
        """May ``message`` go in an automatic batch? (Checked here, so its own errors stay its own.) Not when a
        batch could change where or how it is stored: a delay, a message group or gray queue, a selector of the
        user's, compression."""
        self._check_message(message)
        self._mark_gray(message)
        return (
            type(self.selector) is MessageGroupSelector
            and len(message.body) < self.options.compress_over_bytes
            and not _UNBATCHABLE_PROPERTIES.intersection(message.properties)
            and not is_gray_message(message.properties)
        )

    async def _send_auto_batch(self, messages: list[Message], retry_times: int) -> list[SendResult | BaseException]:
        """An automatic batch (``SendAccumulator``): sent with its senders' retry count (a send's or a
        ``send_async``'s), one outcome per message. A batch refused as a whole (too large once encoded, or a
        message the broker refuses: nothing of it was stored) is sent again message by message, so each gets its
        own outcome."""
        try:
            build, uniq_keys = self._prepare_batch(messages)
            result = await self._send_with_retries(messages[0], build, None, None, retry_times, uniq_keys)
        except (IllegalMessageError, RemoteServerError) as exc:
            if exc.retriable or len(messages) == 1:
                raise
            return await asyncio.gather(
                *(self._send_alone(m, retry_times) for m in messages),
                return_exceptions=True,
            )
        offset_ids = result.offset_msg_id.split(",")
        if len(offset_ids) != len(uniq_keys):
            offset_ids = [result.offset_msg_id] * len(uniq_keys)
        return [
            SendResult(result.status, key, offset_id, result.message_queue, result.queue_offset + index, (key,))
            for index, (key, offset_id) in enumerate(zip(uniq_keys, offset_ids))
        ]

    async def recall_message(self, topic: str, recall_handle: str, *, timeout_s: float | None = None) -> str:
        """Cancel a delayed message of ``topic`` before it is due, by its send's ``recall_handle``; returns its
        message id. ``RemoteServerError`` (ILLEGAL_OPERATION) when it is due already or the handle is not valid."""
        timeout_s = timeout_s or self.options.send_timeout_s
        return await recall_message(
            self.instance, self.options.group, self.namespace.wrap(topic), recall_handle, timeout_s
        )

    async def shutdown(self) -> None:
        if self._accumulator is not None and self._started:
            await self._accumulator.close()  # the sends already started get their results
        if self.tracer is not None:
            await self.tracer.stop()  # its last records go out while the instance is still there
            self.tracer = None
        await super().shutdown()

    def _attach(self, instance: ClientInstance) -> None:
        instance.register_producer(self.options.group)
        if self.config.enable_trace and self.tracer is None:  # it sends its trace messages itself
            self.tracer = ClientTracer(self.send, instance.clock, client_host=instance.client_ip)
            self.tracer.start()

    def _detach(self, instance: ClientInstance) -> None:
        instance.unregister_producer(self.options.group)

    def send_async(
        self,
        message: Message,
        callback=None,
        on_exception=None,
        *,
        queue: MessageQueue | None = None,
        timeout_s: float | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start a send and return at once: the returned future is awaitable; ``callback(result)`` or
        ``on_exception(error)`` run on the loop when it ends. Retried ``retry_times_when_send_async_failed``
        times; with ``auto_batch`` it joins the loop turn's batch as ``send`` does (batched with the other
        ``send_async`` calls, whose retry count it shares)."""
        loop = asyncio.get_running_loop()
        try:
            started = self._start_send(
                message, queue, timeout_s, None, None, self.options.retry_times_when_send_async_failed, at_once=True
            )
        except PocketMQError as exc:  # refused by the checks before it started: its future says so
            started = loop.create_future()
            started.set_exception(exc)
        future = started if isinstance(started, asyncio.Future) else loop.create_task(started)

        def done(f: asyncio.Future) -> None:
            if f.cancelled():
                return
            error = f.exception()
            if error is None and callback is not None:
                callback(f.result())
            elif error is not None and on_exception is not None:
                on_exception(error)
            elif error is not None:
                log.warning("event=async_send_failed topic=%s error=%s", message.topic, error)

        future.add_done_callback(done)
        return future

    async def send_oneway(self, message: Message, *, queue: MessageQueue | None = None) -> None:
        """Send without waiting for the broker's answer (no result, no retry): RocketMQ's sendOneway."""
        instance = self.instance
        self._check_message(message)
        self._mark_gray(message)
        if props.UNIQ_KEY not in message.properties:
            message.properties[props.UNIQ_KEY] = instance.message_ids.next_id(instance.clock.now_ms())
        mq = None if queue is None else self.namespace.wrap_queue(queue)
        if mq is None:
            route = instance.cached_route(message.topic) or await instance.route(message.topic)
            if not route.write_queues:
                raise NoWritableQueueError(f"topic {message.topic!r} has no writable queue in its route")
            mq = self._selector_for(message, route).select(
                route.write_queues, message, self._avoided_brokers(route.write_queues, instance.clock)
            )
        properties = props.encode_properties(message.properties)
        request = self._request(
            RequestCode.SEND_MESSAGE_V2, mq, properties, 0, message.flag, message.body, instance.clock
        )
        await instance.remoting.invoke_oneway(instance.broker_addr(mq.broker_name), request)

    def _avoided_brokers(self, queues, clock: Clock) -> frozenset[str]:
        """Brokers sitting out after being slow or failing (only with ``send_latency_fault_enable``)."""
        if not self.options.send_latency_fault_enable:
            return frozenset()
        names = sorted({mq.broker_name for mq in queues})
        available = self.faults.filter(names, clock.now_ms())
        return frozenset(names) - set(available)

    async def send_batch(
        self, messages: Sequence[Message], *, queue: MessageQueue | None = None, timeout_s: float | None = None
    ) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE; they land consecutively in one queue."""
        build, uniq_keys = self._prepare_batch(messages)
        return await self._send_with_retries(
            messages[0], build, queue, timeout_s, self.options.retry_times_when_send_failed, uniq_keys
        )

    def _prepare_batch(self, messages: Sequence[Message]):
        """Check and stamp the messages of a batch; the builder of its SEND_BATCH_MESSAGE and the batch's keys."""
        instance = self.instance
        if not messages:
            raise IllegalMessageError("a batch needs at least one message")
        topic = messages[0].topic
        now_ms = instance.clock.now_ms()
        for msg in messages:
            if msg.topic != topic:
                raise IllegalMessageError(f"a batch holds one topic: {msg.topic!r} differs from {topic!r}")
            if msg.delay_level > 0:
                raise IllegalMessageError("delayed messages cannot be sent in a batch")
            self._check_message(msg)
            self._mark_gray(msg)
            if props.UNIQ_KEY not in msg.properties:
                msg.properties[props.UNIQ_KEY] = instance.message_ids.next_id(now_ms)
        body = encode_batch(list(messages))
        if len(body) > self.options.max_message_bytes:
            raise IllegalMessageError(f"batch is {len(body)} bytes, over the limit {self.options.max_message_bytes}")

        def build(mq: MessageQueue) -> RemotingCommand:
            return self._request(RequestCode.SEND_BATCH_MESSAGE, mq, "", 0, 0, body, instance.clock, batch=True)

        return build, [m.properties[props.UNIQ_KEY] for m in messages]

    def _mark_gray(self, message: Message) -> None:
        """A gray producer's messages are all gray (docs/gray.md)."""
        if self.config.enable_gray_switch:
            message.properties.setdefault(GRAY_PROPERTY, self.config.gray_tag)

    def _selector_for(self, message: Message, route: TopicRouteView) -> QueueSelector:
        """On a topic with a gray ratio of its own (the route carries it) every message goes through a gray
        selector by that ratio, so normal messages keep off the gray queues with no selector set; elsewhere a
        gray message does (by ``gray_queue_ratio``) and other messages use the configured selector. The
        configured selector picks within the message's part (docs/gray.md). A retry topic has its own fixed
        split (``RetryTopicSelector``)."""
        if message.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            if self._retry_selector is None:
                inner = self.selector.inner if isinstance(self.selector, GraySelector) else self.selector
                self._retry_selector = RetryTopicSelector(inner)
            return self._retry_selector
        if isinstance(self.selector, GraySelector):
            return self.selector.for_route(route.gray_ratios)
        if not route.gray_ratios and not is_gray_message(message.properties):
            return self.selector
        if self._gray_selector is None:
            self._gray_selector = GraySelector(self.config.gray_queue_ratio, inner=self.selector)
        return self._gray_selector.for_route(route.gray_ratios)

    def _check_message(self, message: Message) -> None:
        """Every send path's check; it also gives ``message`` the broker's name of its topic (in place, as
        RocketMQ's producers do: wrapping is idempotent, so a message may be sent again)."""
        message.topic = self.namespace.wrap(message.topic)
        if message.topic not in self._legal_topics:
            problem = topic_name_problem(message.topic)
            if problem:
                raise IllegalTopicError(problem)
            if len(self._legal_topics) < LEGAL_TOPICS_CACHED:
                self._legal_topics.add(message.topic)
        if not message.body:
            raise IllegalMessageError("message body is empty")
        if len(message.body) > self.options.max_message_bytes:
            raise IllegalMessageError(
                f"message body is {len(message.body)} bytes, over the limit {self.options.max_message_bytes}"
            )

    def _request(
        self,
        code: int,
        mq: MessageQueue,
        properties: str,
        sys_flag: int,
        flag: int,
        body: bytes,
        clock: Clock,
        batch: bool = False,
    ) -> RemotingCommand:
        # built directly (not via RemotingCommand.request) to skip re-stringifying every field on the hot path
        cmd = RemotingCommand.request(code)
        cmd.ext_fields = SendMessageRequestHeaderV2.ext_fields(
            producer_group=self.options.group,
            topic=mq.topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=self.options.default_topic_queue_nums,
            queue_id=mq.queue_id,
            sys_flag=sys_flag,
            born_timestamp_ms=clock.now_ms(),
            flag=flag,
            properties=properties,
            # reconsumeTimes, unitMode and batch are optional and default to 0, false and false on every broker:
            # only a batch says so (three fields fewer: ~0.4 µs less to encode and to parse)
            batch=True if batch else None,
        )
        cmd.body = body
        return cmd

    async def _send_with_retries(
        self,
        message: Message,
        build,
        queue: MessageQueue | None,
        timeout_s: float | None,
        retry_times: int,
        uniq_keys: list[str] | None = None,
        *,
        io: _BlockingSendIO | None = None,
        resumed: _Attempts | None = None,
    ) -> SendResult:
        """One send with its retries, or the rest of them after ``resumed`` (``_send_now``'s first attempt). Its
        I/O is the client loop's (``instance.route``, ``instance.remoting``) unless ``io`` gives other awaitables:
        the synchronous facade's never suspend (``_BlockingSendIO``)."""
        instance = self.instance
        if queue is not None:
            queue = self.namespace.wrap_queue(queue)
        route_of, invoke = (instance.route, instance.remoting.invoke) if io is None else (io.route, io.invoke)
        clock = instance.clock
        timeout_s = timeout_s or self.options.send_timeout_s
        attempts = resumed or _Attempts(
            clock.monotonic_ms() + timeout_s * 1000, total=1 if queue is not None else 1 + retry_times
        )
        while attempts.made < attempts.total:
            remaining_s = (attempts.deadline_ms - clock.monotonic_ms()) / 1000
            if remaining_s <= 0:
                break
            mq = queue
            try:
                if mq is None:
                    refresh = _needs_route_refresh(attempts.last_error)
                    # the cached route without a coroutine call: this is the path of every send
                    route = (None if refresh else instance.cached_route(message.topic)) or await route_of(
                        message.topic, refresh=refresh
                    )
                    mq, address = self._pick_queue(message, route, attempts.failed_brokers, clock)
                else:
                    address = instance.broker_addr(mq.broker_name)
                started_ms = clock.monotonic_ms()
                response = await invoke(address, build(mq), remaining_s)
                result = self._sent(response, message, mq, address, started_ms, uniq_keys)
                if self._settled(result, attempts, message, mq):
                    return result
            except (RemotingError, RemoteServerError, NoWritableQueueError) as exc:
                self._attempt_failed(exc, attempts, message, mq)
        if attempts.weak_result is not None:
            return attempts.weak_result
        if attempts.last_error is None:
            raise RemotingTimeoutError(f"send to topic {message.topic!r} timed out after {timeout_s:.1f}s")
        raise attempts.last_error

    def _pick_queue(
        self, message: Message, route: TopicRouteView, failed_brokers: set[str], clock: Clock
    ) -> tuple[MessageQueue, str]:
        """The queue of an attempt, away from the brokers that failed it and those sitting out, and its
        broker's address."""
        if not route.write_queues:
            raise NoWritableQueueError(f"topic {message.topic!r} has no writable queue in its route")
        avoid = frozenset(failed_brokers) | self._avoided_brokers(route.write_queues, clock)
        mq = self._selector_for(message, route).select(route.write_queues, message, avoid)
        # from the route the queue came from: a sync send runs beside the loop thread, which may rebuild the
        # instance's broker table meanwhile
        return mq, route.master_addrs.get(mq.broker_name) or self.instance.broker_addr(mq.broker_name)

    def _sent(
        self,
        response: RemotingCommand,
        message: Message,
        mq: MessageQueue,
        address: str,
        started_ms: float,
        uniq_keys: list[str] | None,
    ) -> SendResult:
        """An attempt's reply: its latency told to fault avoidance, its result (or the broker's refusal raised),
        and the trace."""
        clock = self.instance.clock
        cost_ms = clock.monotonic_ms() - started_ms
        self._report_latency(mq.broker_name, cost_ms, clock, failed=False)
        result = self._result(response, mq, uniq_keys or [message.properties[props.UNIQ_KEY]])
        if self.tracer is not None:
            self.tracer.published(self.options.group, message, result, address, int(cost_ms))
        return result

    def _settled(self, result: SendResult, attempts: _Attempts, message: Message, mq: MessageQueue) -> bool:
        """Counts the attempt; whether ``result`` ends the send: stored with the full guarantee, or no other
        broker is to be tried. Else it is kept as the weak result and its broker avoided from now on."""
        attempts.made += 1
        if (
            result.status is SendStatus.SEND_OK
            or not self.options.retry_another_broker_when_not_store_ok
            or attempts.made == attempts.total
        ):
            return True
        attempts.weak_result = result  # stored, with a weaker guarantee: try another broker for a full one
        attempts.failed_brokers.add(mq.broker_name)
        log.info(
            "event=send_not_store_ok topic=%s broker=%s status=%s", message.topic, mq.broker_name, result.status.value
        )
        return False

    def _attempt_failed(
        self, exc: PocketMQError, attempts: _Attempts, message: Message, mq: MessageQueue | None
    ) -> None:
        """Counts a failed attempt: raises ``exc`` when no retry may help, else avoids its broker from now on."""
        if not exc.retriable:
            raise exc
        attempts.made += 1
        attempts.last_error = exc
        if mq is not None:
            self._report_latency(mq.broker_name, 0, self.instance.clock, failed=True)
            attempts.failed_brokers.add(mq.broker_name)
        log.info(
            "event=send_failed topic=%s broker=%s attempt=%d error=%s",
            message.topic,
            mq.broker_name if mq else None,
            attempts.made,
            exc,
        )

    def _report_latency(self, broker_name: str, latency_ms: float, clock: Clock, *, failed: bool) -> None:
        if self.options.send_latency_fault_enable:
            self.faults.update(broker_name, latency_ms, failed=failed, now_ms=clock.now_ms())

    def _result(self, response: RemotingCommand, mq: MessageQueue, uniq_keys: list[str]) -> SendResult:
        status = _STATUS_BY_CODE.get(response.code)
        if status is None:
            raise reply_error(response)
        fields = response.ext_fields
        try:
            queue_offset = int(fields["queueOffset"])
            queue_id = int(fields.get("queueId", mq.queue_id))
        except (KeyError, ValueError):
            raise RemoteServerError(ResponseCode.SYSTEM_ERROR, f"send reply lacks queueOffset: {fields}") from None
        if queue_id != mq.queue_id:
            mq = MessageQueue(mq.topic, mq.broker_name, queue_id)
        return SendResult(
            status=status,
            msg_id=",".join(uniq_keys),
            offset_msg_id=fields.get("msgId", ""),
            message_queue=self.namespace.unwrap_queue(mq),
            queue_offset=queue_offset,
            message_ids=tuple(uniq_keys),
            recall_handle=fields.get("recallHandle") or None,
        )

    def __repr__(self) -> str:
        return f"<AsyncProducer group={self.options.group} started={self._started}>"


@dataclass
class _Attempts:
    """Where a send's attempts stand: how many of ``total`` were made, by when the last must start (monotonic
    ms), the brokers that failed them, the last error and a result stored with a weaker guarantee."""

    deadline_ms: float
    total: int
    made: int = 0
    failed_brokers: set[str] = field(default_factory=set)
    last_error: PocketMQError | None = None
    weak_result: SendResult | None = None


def _settle(outcome: asyncio.Future, task: asyncio.Future) -> None:
    """``outcome`` ends as ``task`` did (unless it was cancelled meanwhile)."""
    if outcome.cancelled():
        return
    if task.cancelled():
        outcome.cancel()
    elif (error := task.exception()) is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(task.result())


def _set_delay(message: Message, delay_level: int | None, deliver_at_ms: int | None) -> None:
    if delay_level is not None and deliver_at_ms is not None:
        raise ClientError("give a delay level or a delivery time, not both")
    if delay_level is not None:
        if delay_level < 1:
            raise ClientError(f"delay level {delay_level} must be >= 1")
        message.properties[props.DELAY_TIME_LEVEL] = str(delay_level)
    if deliver_at_ms is not None:
        message.properties[props.TIMER_DELIVER_MS] = str(deliver_at_ms)


def _needs_route_refresh(error: PocketMQError | None) -> bool:
    if error is None:
        return False
    return error.refresh_route


class _BlockingSendIO:
    """The synchronous facade's send I/O: awaitables that never suspend. Replies come over the calling thread's
    blocking channels; a route not cached yet is fetched on the client loop while the caller waits."""

    def __init__(self, facade: Producer, channels: BlockingChannels):
        self._facade = facade
        self._channels = channels

    async def route(self, topic: str, *, refresh: bool) -> TopicRouteView:
        facade = self._facade
        return facade._loop.run(facade.core.instance.route(topic, refresh=refresh))

    async def invoke(self, address: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        return self._channels.invoke(address, request, timeout_s)


def _run_inline(coro: Coroutine[None, None, T]) -> T:
    """Run to its end, in this thread, a coroutine whose awaits never suspend (``_BlockingSendIO``'s)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a send meant to block suspended")  # a bug: some await in it is not a blocking one


async def _awaited(task):
    return await task


class Producer(SyncFacade):
    """The synchronous producer: the same API as ``AsyncProducer``.

    ``send`` and ``send_batch`` do their I/O in the calling thread, on blocking connections of their own
    (client/blocking_channel.py: no hand-off to the client loop thread, whose wake-ups cost more than the rest
    of a lone send); routes, heartbeats and the other calls run on the process's client loop thread.

    >>> with Producer(ClientConfig(namesrv_addr="127.0.0.1:9876")) as producer:
    ...     result = producer.send(Message.create("orders", b"hello", tags="created"))
    """

    def __init__(
        self,
        config: ClientConfig | None = None,
        options: ProducerOptions | None = None,
        *,
        selector: QueueSelector | None = None,
        core: AsyncProducer | None = None,
    ):
        """``core``: the asyncio producer to drive (a subclass's, e.g. a transaction producer's); default a plain
        ``AsyncProducer`` of ``config``, ``options`` and ``selector``."""
        super().__init__(core or AsyncProducer(config, options, selector=selector))
        config = self.core.config
        self._channels = BlockingChannels(
            connect_timeout_s=config.connect_timeout_s,
            busy_poll_s=config.sync_reply_busy_poll_us / 1e6,
            ssl_context=config.ssl_context(),
            credentials=config.credentials,
        )
        self._io = _BlockingSendIO(self, self._channels)

    def send(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        timeout_s: float | None = None,
        delay_level: int | None = None,
        deliver_at_ms: int | None = None,
    ) -> SendResult:
        self._loop.refuse_own_thread()
        core = self.core
        build = core._prepare_single(message, delay_level, deliver_at_ms)
        return _run_inline(
            core._send_with_retries(
                message, build, queue, timeout_s, core.options.retry_times_when_send_failed, io=self._io
            )
        )

    def send_async(
        self, message: Message, callback=None, on_exception=None, *, queue: MessageQueue | None = None
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send and return at once; the future resolves to the SendResult. Callbacks run on the
        client loop thread."""

        async def start():
            return self.core.send_async(message, callback, on_exception, queue=queue)

        task = self._loop.run(start())
        return asyncio.run_coroutine_threadsafe(_awaited(task), self._loop.loop)

    def send_oneway(self, message: Message, *, queue: MessageQueue | None = None) -> None:
        self._loop.run(self.core.send_oneway(message, queue=queue))

    def send_batch(
        self, messages: Sequence[Message], *, queue: MessageQueue | None = None, timeout_s: float | None = None
    ) -> SendResult:
        self._loop.refuse_own_thread()
        core = self.core
        build, uniq_keys = core._prepare_batch(messages)
        return _run_inline(
            core._send_with_retries(
                messages[0], build, queue, timeout_s, core.options.retry_times_when_send_failed, uniq_keys, io=self._io
            )
        )

    def recall_message(self, topic: str, recall_handle: str, *, timeout_s: float | None = None) -> str:
        return self._loop.run(self.core.recall_message(topic, recall_handle, timeout_s=timeout_s))

    def start(self) -> Producer:
        super().start()
        listeners = self.core.instance.broker_left_listeners
        if self._channels.drop not in listeners:
            listeners.append(self._channels.drop)
        return self

    def shutdown(self) -> None:
        instance = self.core._instance
        if instance is not None and self._channels.drop in instance.broker_left_listeners:
            instance.broker_left_listeners.remove(self._channels.drop)
        try:
            super().shutdown()
        finally:
            self._channels.close()

    def __repr__(self) -> str:
        return f"<Producer {self.core!r}>"
