"""Pull consumers: ``AsyncPullConsumer`` (asyncio core) and ``PullConsumer`` (synchronous facade).

The caller owns the position: it lists a topic's queues, assigns itself some, pulls from an offset it chooses
and commits the offsets it is done with (stored on the queue's broker under the consumer group). This is what
the Spark connector and ``pocketmq tail`` need: explicit queues, no rebalancing.

Messages come back decoded (``MessageExt``) with zlib-compressed bodies already inflated. The broker filters
by tag hash; the client filters again by the tag itself, as RocketMQ clients do, so a hash collision never
delivers a message of another tag.
"""

from __future__ import annotations

import enum
import logging
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from pocketmq.client.config import ClientConfig
from pocketmq.client.instance import ClientInstance, ConsumerData, InstanceUser
from pocketmq.client.loop_thread import SyncFacade
from pocketmq.client.replies import check_topic, offset_of
from pocketmq.client.selector import MessageSelector, as_selector
from pocketmq.common.errors import BadRequestError, ClientError
from pocketmq.common.message import SYSFLAG_COMPRESSED, MessageExt, MessageQueue
from pocketmq.common.namespace import Namespace
from pocketmq.common.record import decode_records_prefix
from pocketmq.common.topic import group_name_problem
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.replies import expect_success, reply_error
from pocketmq.protocol.request_headers import (
    PullMessageRequestHeader,
    PullSysFlag,
    QueryConsumerOffsetRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

log = logging.getLogger(__name__)

DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
MAX_PULL_COUNT = 1024


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS_BY_CODE: dict[int, PullStatus] = {  # looked up by a reply's int code
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class PullResult:
    """``next_begin_offset`` is where the next pull of this queue starts, whatever the status."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)


def pull_result_from_response(response: RemotingCommand, tags: frozenset[str] | None, queue_offset: int) -> PullResult:
    """Decode a PULL_MESSAGE reply of a pull from ``queue_offset``: records, inflated bodies, the client-side
    tag filter. A record that does not decode (damaged) is skipped, never a reason to stall the queue: the
    records before it are kept and the next pull starts right after the last of them (or, when the damaged
    record came first, one offset further), so the records after it come with the next pull."""
    status = _STATUS_BY_CODE.get(response.code)
    if status is None:
        raise reply_error(response)
    fields = response.ext_fields
    try:
        next_begin, min_offset, max_offset = (
            int(fields["nextBeginOffset"]),
            int(fields["minOffset"]),
            int(fields["maxOffset"]),
        )
    except (KeyError, ValueError):
        raise RemoteServerError(ResponseCode.SYSTEM_ERROR, f"pull reply lacks offsets: {fields}") from None
    messages: list[MessageExt] = []
    if status is PullStatus.FOUND:
        decoded, damaged = decode_records_prefix(response.body)
        if damaged is not None:
            next_begin = decoded[-1].queue_offset + 1 if decoded else queue_offset + 1
            log.error(
                "event=damaged_record_skipped pulled_from=%d records_kept=%d next_offset=%d error=%s",
                queue_offset,
                len(decoded),
                next_begin,
                damaged,
            )
        for msg in decoded:
            if msg.sys_flag & SYSFLAG_COMPRESSED:
                msg.body = zlib.decompress(msg.body)
                msg.sys_flag &= ~SYSFLAG_COMPRESSED
            if tags is None or msg.tags in tags:
                messages.append(msg)
        if not messages:
            status = PullStatus.NO_MATCHED_MSG
    return PullResult(status, next_begin, min_offset, max_offset, messages)


class AsyncPullConsumer(InstanceUser):
    """The asyncio pull consumer of one consumer group."""

    _kind = "pull consumer"

    def __init__(
        self,
        group: str = DEFAULT_CONSUMER_GROUP,
        config: ClientConfig | None = None,
        *,
        instance: ClientInstance | None = None,
    ):
        problem = group_name_problem(group)
        if problem:
            raise ClientError(f"consumer group: {problem}")
        super().__init__(config, instance=instance)
        self.namespace = Namespace(self.config.namespace)
        self.group = self.namespace.wrap(group)
        self._assigned: tuple[MessageQueue, ...] = ()

    def _attach(self, instance: ClientInstance) -> None:
        subscriptions = {mq.topic: "*" for mq in self._assigned}
        instance.register_consumer(ConsumerData(self.group, subscriptions=subscriptions))

    def _detach(self, instance: ClientInstance) -> None:
        instance.unregister_consumer(self.group)

    # -- queues ---------------------------------------------------------------------------------------------------
    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` from a fresh route; TopicNotExistError when it has none (a read
        never creates the topic it names)."""
        check_topic(topic)
        route = await self.instance.route(self.namespace.wrap(topic), refresh=True, auto_create=False)
        return [self.namespace.unwrap_queue(mq) for mq in route.read_queues]

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        self._assigned = tuple(sorted({self.namespace.wrap_queue(mq) for mq in queues}))
        self._attach(self.instance)

    @property
    def assignment(self) -> tuple[MessageQueue, ...]:
        return tuple(self.namespace.unwrap_queue(mq) for mq in self._assigned)

    # -- pulling --------------------------------------------------------------------------------------------------
    async def pull(
        self,
        queue: MessageQueue,
        queue_offset: int,
        max_count: int = 32,
        *,
        tag_expression: str | MessageSelector = "*",
        timeout_s: float | None = None,
        long_poll_ms: int = 0,
    ) -> PullResult:
        """Up to ``max_count`` messages of ``queue`` from ``queue_offset`` that ``tag_expression`` selects (a tag
        expression or a ``MessageSelector``: ``MessageSelector.by_sql(...)``); with ``long_poll_ms`` the broker
        holds the request until a message arrives or that time passes. The result's next offset is past the
        messages the broker filtered out, also when none is left (NO_MATCHED_MSG)."""
        if not 1 <= max_count <= MAX_PULL_COUNT:
            raise BadRequestError(f"max_count must be in [1, {MAX_PULL_COUNT}], got {max_count}")
        if queue_offset < 0 or long_poll_ms < 0:
            raise BadRequestError("queue_offset and long_poll_ms must not be negative")
        selector = as_selector(tag_expression)
        queue = self.namespace.wrap_queue(queue)
        request = RemotingCommand.request(
            RequestCode.PULL_MESSAGE,
            PullMessageRequestHeader.ext_fields(
                consumer_group=self.group,
                topic=queue.topic,
                queue_id=queue.queue_id,
                queue_offset=queue_offset,
                max_msg_nums=max_count,
                sys_flag=PullSysFlag.of(suspend=long_poll_ms > 0, subscription=True),
                commit_offset=0,
                suspend_timeout_ms=long_poll_ms,
                subscription=selector.expression,
                sub_version=self.instance.clock.now_ms(),
                expression_type=selector.expression_type,
            ),
        )
        timeout_s = timeout_s or (long_poll_ms / 1000 + self.config.request_timeout_s)
        response = await self._invoke(queue, request, timeout_s)
        result = pull_result_from_response(response, selector.tags, queue_offset)
        for msg in result.messages:
            self.namespace.unwrap_message(msg)
        return result

    # -- offsets --------------------------------------------------------------------------------------------------
    async def commit(self, queue: MessageQueue, queue_offset: int) -> None:
        """Store ``queue_offset`` (the next offset to consume) for this group on the queue's broker."""
        if queue_offset < 0:
            raise BadRequestError("a committed offset is never negative")
        queue = self.namespace.wrap_queue(queue)
        response = await self._invoke(
            queue,
            RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                UpdateConsumerOffsetRequestHeader.ext_fields(
                    consumer_group=self.group, topic=queue.topic, queue_id=queue.queue_id, commit_offset=queue_offset
                ),
            ),
        )
        expect_success(response)

    async def committed(self, queue: MessageQueue) -> int | None:
        """This group's committed offset of ``queue``, or None when it never committed one."""
        queue = self.namespace.wrap_queue(queue)
        response = await self._invoke(
            queue,
            RemotingCommand.request(
                RequestCode.QUERY_CONSUMER_OFFSET,
                QueryConsumerOffsetRequestHeader.ext_fields(
                    consumer_group=self.group, topic=queue.topic, queue_id=queue.queue_id
                ),
            ),
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return offset_of(response)

    async def min_offset(self, queue: MessageQueue) -> int:
        return await self._offset_query(RequestCode.GET_MIN_OFFSET, queue)

    async def max_offset(self, queue: MessageQueue) -> int:
        """One past the last message's queue offset (the offset the next message will get)."""
        return await self._offset_query(RequestCode.GET_MAX_OFFSET, queue)

    async def offset_for_timestamp(self, queue: MessageQueue, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms``."""
        return await self._offset_query(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, queue, timestamp_ms)

    async def _offset_query(self, code: int, queue: MessageQueue, timestamp_ms: int | None = None) -> int:
        queue = self.namespace.wrap_queue(queue)
        fields = (
            QueueRequestHeader.ext_fields(topic=queue.topic, queue_id=queue.queue_id)
            if timestamp_ms is None
            else SearchOffsetRequestHeader.ext_fields(
                topic=queue.topic, queue_id=queue.queue_id, timestamp_ms=timestamp_ms
            )
        )
        return offset_of(await self._invoke(queue, RemotingCommand.request(code, fields)))

    async def _invoke(
        self, queue: MessageQueue, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        instance = self.instance
        if queue.broker_name not in instance.broker_addrs:
            await instance.route(queue.topic, refresh=True)  # a queue from elsewhere, or a broker that moved
        return await instance.invoke_broker(queue.broker_name, request, timeout_s)

    def __repr__(self) -> str:
        return f"<AsyncPullConsumer group={self.group} assigned={len(self._assigned)} started={self._started}>"


class PullConsumer(SyncFacade):
    """The synchronous pull consumer: ``AsyncPullConsumer`` run on the process's client loop thread.

    >>> with PullConsumer("my-group") as consumer:
    ...     queue = consumer.fetch_queues("orders")[0]
    ...     result = consumer.pull(queue, consumer.committed(queue) or 0)
    """

    def __init__(self, group: str = DEFAULT_CONSUMER_GROUP, config: ClientConfig | None = None):
        super().__init__(AsyncPullConsumer(group, config))

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return self._loop.run(self.core.fetch_queues(topic))

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        queues = list(queues)
        self._loop.run(_call(self.core.assign, queues))

    @property
    def assignment(self) -> tuple[MessageQueue, ...]:
        return self.core.assignment

    def pull(
        self,
        queue: MessageQueue,
        queue_offset: int,
        max_count: int = 32,
        *,
        tag_expression: str = "*",
        timeout_s: float | None = None,
        long_poll_ms: int = 0,
    ) -> PullResult:
        return self._loop.run(
            self.core.pull(
                queue,
                queue_offset,
                max_count,
                tag_expression=tag_expression,
                timeout_s=timeout_s,
                long_poll_ms=long_poll_ms,
            )
        )

    def commit(self, queue: MessageQueue, queue_offset: int) -> None:
        self._loop.run(self.core.commit(queue, queue_offset))

    def committed(self, queue: MessageQueue) -> int | None:
        return self._loop.run(self.core.committed(queue))

    def min_offset(self, queue: MessageQueue) -> int:
        return self._loop.run(self.core.min_offset(queue))

    def max_offset(self, queue: MessageQueue) -> int:
        return self._loop.run(self.core.max_offset(queue))

    def offset_for_timestamp(self, queue: MessageQueue, timestamp_ms: int) -> int:
        return self._loop.run(self.core.offset_for_timestamp(queue, timestamp_ms))

    def __repr__(self) -> str:
        return f"<PullConsumer {self.core!r}>"


async def _call(func, *args):
    """Run a plain function on the client loop (the instance's state belongs to that loop's thread)."""
    return func(*args)
