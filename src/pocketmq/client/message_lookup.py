"""Finding stored messages for an operator (``pocketmq message query|show``, docs/cli.md).

- by key: QUERY_MESSAGE on every broker of the topic (the brokers' key index), within a store time range;
- by message id: an offset message id (what a broker's send reply calls ``msgId``) names its broker and commit
  log offset: VIEW_MESSAGE_BY_ID there. Otherwise it is the producer's id (UNIQ_KEY), looked up on every broker of
  the topic (QUERY_MESSAGE with ``_UNIQUE_KEY_QUERY``). Both are 32 hex digits, so an id that names no known
  broker is tried as the producer's;
- by queue offset, and by store time range: pulls as RocketMQ's admin tools' group, which commits nothing.

Each message found comes with the name of the broker that stores it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.pull_consumer import MAX_PULL_COUNT, AsyncPullConsumer, PullStatus
from pocketmq.common.errors import BadRequestError, ClientError
from pocketmq.common.message import MessageExt, MessageQueue, parse_offset_msg_id
from pocketmq.common.record import decode_records
from pocketmq.common.topic import TOOLS_CONSUMER_GROUP
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.headers import INT64_MAX
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import QueryMessageRequestHeader, ViewMessageRequestHeader

DEFAULT_MAX_MESSAGES = 32


@dataclass(frozen=True, slots=True)
class FoundMessage:
    broker_name: str
    message: MessageExt


class MessageLookup:
    """The lookups over ``admin``'s client instance and namespace: ``async with MessageLookup(admin) as l``."""

    def __init__(self, admin: AsyncAdmin):
        self._admin = admin
        self._namespace = admin.namespace
        self._reader = AsyncPullConsumer(TOOLS_CONSUMER_GROUP, admin.config, instance=admin.instance)

    async def __aenter__(self) -> MessageLookup:
        await self._reader.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._reader.shutdown()

    async def by_key(
        self,
        topic: str,
        key: str,
        *,
        begin_ms: int = 0,
        end_ms: int = INT64_MAX,
        max_messages: int = DEFAULT_MAX_MESSAGES,
    ) -> list[FoundMessage]:
        found = await self._query(topic, key, unique=False, begin_ms=begin_ms, end_ms=end_ms, max_messages=max_messages)
        return sorted(found, key=lambda f: f.message.store_timestamp_ms)[:max_messages]

    async def by_id(self, msg_id: str, topic: str | None = None) -> list[FoundMessage]:
        """The message of ``msg_id``; with ``topic``, also as the producer's id (a message sent twice is found
        twice)."""
        addr = await self._broker_of_offset_id(msg_id)
        if addr is not None:
            broker_name, broker_addr = addr
            request = RemotingCommand.request(
                RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader.ext_fields(msg_id=msg_id)
            )
            response = await self._admin.instance.remoting.invoke(
                broker_addr, request, self._admin.config.request_timeout_s
            )
            if response.code == ResponseCode.SUCCESS:
                return [FoundMessage(broker_name, self._shown(m)) for m in decode_records(response.body)]
            if response.code != ResponseCode.QUERY_NOT_FOUND:
                expect_success(response)
        if topic is None:
            raise BadRequestError(f"{msg_id!r} is no offset message id of a known broker: name its topic to look it up")
        return await self._query(topic, msg_id, unique=True)

    async def at_offset(self, queue: MessageQueue, queue_offset: int) -> list[FoundMessage]:
        result = await self._reader.pull(queue, queue_offset, 1)
        return [FoundMessage(queue.broker_name, m) for m in result.messages if m.queue_offset == queue_offset]

    async def in_time_range(
        self, topic: str, begin_ms: int, end_ms: int, *, max_messages: int = DEFAULT_MAX_MESSAGES
    ) -> list[FoundMessage]:
        """Messages stored in [begin_ms, end_ms], up to ``max_messages`` of the earliest per queue, oldest first."""
        queues = await self._reader.fetch_queues(topic)
        per_queue = await asyncio.gather(*(self._read_range(q, begin_ms, end_ms, max_messages) for q in queues))
        found = [f for messages in per_queue for f in messages]
        return sorted(found, key=lambda f: (f.message.store_timestamp_ms, f.broker_name, f.message.queue_id))[
            :max_messages
        ]

    async def _read_range(self, queue: MessageQueue, begin_ms: int, end_ms: int, limit: int) -> list[FoundMessage]:
        offset = await self._reader.offset_for_timestamp(queue, begin_ms)
        found: list[FoundMessage] = []
        while len(found) < limit:
            result = await self._reader.pull(queue, offset, min(MAX_PULL_COUNT, limit - len(found)))
            if result.status is not PullStatus.FOUND or not result.messages:
                break
            for msg in result.messages:
                if msg.store_timestamp_ms > end_ms:
                    return found
                found.append(FoundMessage(queue.broker_name, msg))
            offset = result.next_begin_offset
        return found

    async def _query(
        self,
        topic: str,
        key: str,
        *,
        unique: bool,
        begin_ms: int = 0,
        end_ms: int = INT64_MAX,
        max_messages: int = DEFAULT_MAX_MESSAGES,
    ) -> list[FoundMessage]:
        fields = QueryMessageRequestHeader.ext_fields(
            topic=self._namespace.wrap(topic),
            key=key,
            max_num=max_messages,
            begin_timestamp_ms=begin_ms,
            end_timestamp_ms=end_ms,
            unique_key_query=unique,
        )
        responses = await self._admin.on_topic_brokers(topic, RequestCode.QUERY_MESSAGE, fields)
        found = []
        for name, response in responses.items():
            if response.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            expect_success(response)
            found += [FoundMessage(name, self._shown(m)) for m in decode_records(response.body)]
        return found

    async def _broker_of_offset_id(self, msg_id: str) -> tuple[str, str] | None:
        """(broker name, address) of the broker an offset message id names, None when it names none known."""
        try:
            (host, port), _ = parse_offset_msg_id(msg_id)
        except ValueError:
            return None
        try:
            brokers = await self._admin.brokers()
        except ClientError:
            return None
        addr = f"{host}:{port}"
        return next(((b.broker_name, b.addr) for b in brokers if b.addr == addr), None)

    def _shown(self, msg: MessageExt) -> MessageExt:
        self._namespace.unwrap_message(msg)
        return msg.decompress()
