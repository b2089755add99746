"""A consumer group's dead letters (``%DLQ%<group>`` and its dead-letter references): read, shown as JSON, and
resolved for a resend (``pocketmq dlq``, the console's dead letters page; the command's docstring says what a
reference is and where a resend goes).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.auth.signature import Credentials
from pocketmq.broker.pop.copies import business_topic
from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.pull_consumer import AsyncPullConsumer, PullStatus
from pocketmq.cluster.breaker import BreakerBoard
from pocketmq.cluster.namesrv_client import NamesrvClient
from pocketmq.cluster.remote_reader import RemoteMessageReader
from pocketmq.common import properties as props
from pocketmq.common.dead_letter_reference import (
    OUTCOME_PROPERTY,
    REFERENCE_TOPIC,
    STATE_OPEN,
    STATE_PROPERTY,
    STATE_RESOLVED,
    DeadLetterReference,
    fold,
)
from pocketmq.common.errors import ClientError, TopicNotExistError
from pocketmq.common.message import Message, MessageExt, MessageQueue
from pocketmq.common.read_result import ReadStatus
from pocketmq.common.topic import TOOLS_CONSUMER_GROUP, dlq_topic, pop_retry_topic, retry_topic
from pocketmq.ops.dlq_target import origin_topic, resent_copy
from pocketmq.ops.message_json import body_fields
from pocketmq.protocol.transport import RemotingClient


@dataclass(frozen=True, slots=True)
class QueueOffsets:
    queue: MessageQueue
    min_offset: int
    max_offset: int
    committed: int | None


async def group_topic_offsets(admin: AsyncAdmin, topic: str, group: str | None = None) -> list[QueueOffsets]:
    """Min/max offsets (and ``group``'s committed offset) of every queue of ``topic``; [] when it has no route
    (a group's retry or DLQ topic is not created by looking at it)."""
    try:
        route = await admin.instance.route(admin.namespace.wrap(topic), refresh=True, auto_create=False)
    except TopicNotExistError:
        return []
    reader = AsyncPullConsumer(group or TOOLS_CONSUMER_GROUP, admin.config, instance=admin.instance)
    await reader.start()
    try:
        queues = [admin.namespace.unwrap_queue(q) for q in route.read_queues]
        return [
            QueueOffsets(
                q, await reader.min_offset(q), await reader.max_offset(q), await reader.committed(q) if group else None
            )
            for q in queues
        ]
    finally:
        await reader.shutdown()


async def topic_messages(
    admin: AsyncAdmin, topic: str, limit: int, keep: Callable[[MessageExt], bool] | None = None
) -> list[tuple[str, MessageExt]]:
    """Up to ``limit`` (broker name, message) of ``topic`` (those ``keep`` keeps), queue by queue, oldest first:
    the reading stops at the limit, so a search for one holds no more than a pull's messages."""
    found: list[tuple[str, MessageExt]] = []
    reader = AsyncPullConsumer(TOOLS_CONSUMER_GROUP, admin.config, instance=admin.instance)
    await reader.start()
    try:
        for offsets in await group_topic_offsets(admin, topic):
            offset = offsets.min_offset
            while offset < offsets.max_offset and len(found) < limit:
                batch = 64 if keep else min(64, limit - len(found))
                result = await reader.pull(offsets.queue, offset, batch)
                if result.status is PullStatus.FOUND:
                    kept = [msg for msg in result.messages if keep is None or keep(msg)]
                    found += [(offsets.queue.broker_name, msg) for msg in kept[: limit - len(found)]]
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
    finally:
        await reader.shutdown()
    return found


async def dead_messages(
    admin: AsyncAdmin, group: str, limit: int, keep: Callable[[MessageExt], bool] | None = None
) -> list[tuple[str, MessageExt]]:
    """Up to ``limit`` (broker name, message): the messages of ``%DLQ%<group>``, then the group's references
    whose real dead letter is not written (open, gone or refused: the event that says so). The references are
    read first: one the broker resolves meanwhile shows twice (as a reference, then as its dead letter), never
    not at all."""
    events = await topic_messages(admin, REFERENCE_TOPIC, 1_000_000)  # folded whole: a later event closes one
    found = await topic_messages(admin, dlq_topic(group), limit, keep)
    wrapped = admin.namespace.wrap(group)
    for broker in sorted({broker for broker, _ in events}):
        for state in fold(msg for b, msg in events if b == broker).values():
            if (
                state.reference.group == wrapped
                and state.state != STATE_RESOLVED
                and len(found) < limit
                and (keep is None or keep(state.entry))
            ):
                found.append((broker, state.entry))
    return found


def reference_of(msg: MessageExt) -> DeadLetterReference | None:
    """The reference a DLQ entry holds (None for a real message); ClientError when it does not parse."""
    try:
        return DeadLetterReference.of_message(msg.properties, msg.body)
    except ValueError as exc:
        raise ClientError(f"dead-letter reference {msg.msg_id} is unreadable: {exc}") from exc


def dead_row(broker_name: str, msg: MessageExt) -> dict:
    row = {
        "message_id": msg.msg_id,
        "kind": "message",
        "origin_topic": origin_topic(msg),
        "origin_message_id": msg.properties.get(props.ORIGIN_MESSAGE_ID),
        "reconsume_times": msg.reconsume_times,
        "broker": broker_name,
        "queue_offset": msg.queue_offset,
        "store_timestamp_ms": msg.store_timestamp_ms,
        **body_fields(msg.body),
    }
    try:
        ref = reference_of(msg)
    except ClientError:  # listed as it is; resend says why it cannot resolve it
        row["kind"] = "unreadable reference"
        return row
    if ref is not None:
        state = msg.properties.get(STATE_PROPERTY, STATE_OPEN)
        row.update(
            kind="reference" if state == STATE_OPEN else f"reference {state}",
            origin_topic=ref.topic,
            body=ref.describe(),
            reference={
                "broker": ref.broker_name,
                "topic": ref.topic,
                "queue_id": ref.queue_id,
                "queue_offset": ref.queue_offset,
                "group": ref.group,
                "reason": ref.reason,
                "description": ref.description,
                "rewrite_count": ref.rewrite_count,
                "state": state,
                "outcome": msg.properties.get(OUTCOME_PROPERTY, ""),
            },
        )
    return row


def matches(msg: MessageExt, wanted: str) -> bool:
    return wanted in (msg.msg_id, msg.offset_msg_id, msg.properties.get(props.ORIGIN_MESSAGE_ID))


async def require_group(admin: AsyncAdmin, group: str) -> None:
    """SubscriptionGroupNotExistError for a group with neither a dead-letter or retry topic nor a config (a
    mistyped name is an error, as in `group describe`). The topics are asked of the name server first: that
    answers with a master down, and the timer's PMQ_SYS_TIMER has only a DLQ."""
    topics = await admin.list_topics()
    if dlq_topic(group) not in topics and retry_topic(group) not in topics:
        await admin.describe_group(group)


async def known_group_dead_messages(
    admin: AsyncAdmin, group: str, limit: int, keep: Callable[[MessageExt], bool] | None = None
) -> list[tuple[str, MessageExt]]:
    """``dead_messages``; when there are none, SubscriptionGroupNotExistError for a group that does not exist (a
    group with references only may have no topic nor config: a POP group whose CKs escaped here)."""
    found = await dead_messages(admin, group, limit, keep)
    if not found:
        await require_group(admin, group)
    return found


class ReferenceResolver:
    """Reads the messages dead-letter references point at, from their broker groups (typed remote reads)."""

    def __init__(
        self,
        namesrv_addrs: list[str],
        ssl_context: ssl.SSLContext | None = None,
        credentials: Credentials | None = None,
    ):
        self._remoting = RemotingClient(ssl_context=ssl_context, credentials=credentials)
        self._namesrv = NamesrvClient(namesrv_addrs, self._remoting)
        self._breakers = BreakerBoard()

    async def __aenter__(self) -> ReferenceResolver:
        return self

    async def __aexit__(self, *exc) -> None:
        await self._remoting.close()

    async def resolve(self, ref: DeadLetterReference, *, to_topic: bool) -> Message | dict:
        """The real message to resend, or a JSON object saying why it could not be read (``resolved`` false)."""
        reader = RemoteMessageReader(ref.broker_name, self._namesrv, self._remoting, breakers=self._breakers)
        read = await reader.read(ref.topic, ref.queue_id, ref.queue_offset)
        found = read.message
        if read.status is ReadStatus.FOUND and found is not None:  # a FOUND read carries its message
            origin = business_topic(found)
            destination = origin if to_topic else pop_retry_topic(ref.group, origin)  # revive is POP's
            return resent_copy(found, destination, origin)
        return {
            "resolved": False,
            "broker": ref.broker_name,
            "topic": ref.topic,
            "queue_id": ref.queue_id,
            "queue_offset": ref.queue_offset,
            "reason": read.reason,
            "need_retry": read.need_retry,
            "description": read.description,
        }
