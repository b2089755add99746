"""Finding the messages of a topic by key, message id, queue offset or store time (``pocketmq message query``,
the console's messages page): one request shape, ``find_messages``, over the SDK's ``MessageLookup``."""

from __future__ import annotations

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.message_lookup import DEFAULT_MAX_MESSAGES, FoundMessage, MessageLookup
from pocketmq.common.errors import BadRequestError, ClientError
from pocketmq.common.message import MessageQueue
from pocketmq.protocol.headers import INT64_MAX


class MessageNotFoundError(ClientError):
    """No broker has a message of that id."""


async def one_message(admin: AsyncAdmin, msg_id: str, topic: str | None) -> FoundMessage:
    """The message of ``msg_id`` (an offset message id, or the producer's with ``topic``)."""
    async with MessageLookup(admin) as lookup:
        found = await lookup.by_id(msg_id, topic)
    if not found:
        raise MessageNotFoundError(f"no message {msg_id}" + (f" of topic {topic}" if topic else ""))
    return found[0]


async def find_messages(
    admin: AsyncAdmin,
    topic: str,
    *,
    key: str | None = None,
    msg_id: str | None = None,
    offset: str | None = None,
    time_range: tuple[int, int] | None = None,
    max_messages: int = DEFAULT_MAX_MESSAGES,
) -> list[FoundMessage]:
    """The messages of ``topic`` with ``key`` (``time_range`` narrows it), with ``msg_id``, at ``offset``
    (``[BROKER:]QUEUE:OFFSET``), or stored in ``time_range``: the first of these given decides."""
    if max_messages < 1:
        raise BadRequestError("max must be at least 1")
    async with MessageLookup(admin) as lookup:
        if key is not None:
            begin_ms, end_ms = time_range or (0, INT64_MAX)
            return await lookup.by_key(topic, key, begin_ms=begin_ms, end_ms=end_ms, max_messages=max_messages)
        if msg_id is not None:
            return [f for f in await lookup.by_id(msg_id, topic) if f.message.topic == topic]
        if offset is not None:
            broker, queue_id, queue_offset = parse_queue_offset(offset)
            queue = MessageQueue(topic, broker or await _only_broker(admin, topic), queue_id)
            return await lookup.at_offset(queue, queue_offset)
        if time_range is not None:
            return await lookup.in_time_range(topic, *time_range, max_messages=max_messages)
    raise BadRequestError("name a key, an id, an offset or a time range")


def parse_queue_offset(text: str) -> tuple[str | None, int, int]:
    """``[BROKER:]QUEUE:OFFSET`` as (broker or None, queue id, queue offset)."""
    parts = text.rsplit(":", 2)
    try:
        queue_id, offset = int(parts[-2]), int(parts[-1])
    except (ValueError, IndexError):
        raise BadRequestError(f"offset {text!r}: expected [BROKER:]QUEUE:OFFSET") from None
    if queue_id < 0 or offset < 0:
        raise BadRequestError(f"offset {text!r}: queue and offset are never negative")
    return (parts[0] if len(parts) == 3 else None), queue_id, offset


async def _only_broker(admin: AsyncAdmin, topic: str) -> str:
    route = await admin.instance.route(admin.namespace.wrap(topic), refresh=True, auto_create=False)
    if len(route.broker_names) != 1:
        raise BadRequestError(
            f"topic {topic} is on brokers {', '.join(route.broker_names)}: name one as BROKER:QUEUE:OFFSET"
        )
    return route.broker_names[0]
