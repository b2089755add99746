"""``pocketmq dlq list|resend``: a consumer group's dead-letter queue (``%DLQ%<group>``).

- ``list GROUP [--max N]``: the dead messages over every broker: id, original topic, reconsume times, body;
  a *reference* entry (POP revive could not read the message from its broker: common/dead_letter_reference.py)
  shows as such, with where the message is and why it could not be read.
- ``resend GROUP (--id ID | --all)``: send dead messages back to their original topic (the ``RETRY_TOPIC``
  property) with their body, tag, keys, message id and user properties; the retry bookkeeping (``DELAY``,
  ``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID``, reconsume counts) is dropped so they start afresh. ``ID`` matches
  the message id, the broker-side id or the original message id. A reference is resolved first: the real
  message is read from its broker group (a PULL of that one offset through the name server's broker table,
  ``cluster.remote_reader``) and sent to its business topic; when it cannot be read (the broker is still
  unreachable, the message is gone) one line says why and the command exits 1. The DLQ entries stay where
  they are (RocketMQ never deletes from a DLQ either).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from pocketmq.auth.signature import Credentials
from pocketmq.broker.pop.copies import business_topic
from pocketmq.cli.output import add_action, body_fields, emit, json_line, print_rows, report, run_admin
from pocketmq.cli.terminal import ProgressBar
from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.producer import AsyncProducer
from pocketmq.client.pull_consumer import AsyncPullConsumer, PullStatus
from pocketmq.cluster.breaker import BreakerBoard
from pocketmq.cluster.namesrv_client import NamesrvClient
from pocketmq.cluster.remote_reader import RemoteMessageReader
from pocketmq.common import properties as props
from pocketmq.common.dead_letter_reference import DeadLetterReference
from pocketmq.common.errors import ClientError, TopicNotExistError
from pocketmq.common.message import Message, MessageExt, MessageQueue
from pocketmq.common.read_result import ReadStatus
from pocketmq.common.topic import TOOLS_CONSUMER_GROUP, dlq_topic, retry_topic
from pocketmq.protocol.transport import RemotingClient

LIST_COLUMNS = ["message_id", "kind", "origin_topic", "reconsume_times", "broker", "queue_offset", "body"]
# Retry bookkeeping a resent message starts without.
_RETRY_PROPERTIES = (
    props.DELAY_TIME_LEVEL,
    props.RETRY_TOPIC,
    props.ORIGIN_MESSAGE_ID,
    props.RECONSUME_TIME,
    props.MAX_RECONSUME_TIMES,
    props.REAL_TOPIC,
    props.REAL_QUEUE_ID,
    props.TIMER_DELIVER_MS,
    props.TIMER_DELAY_SEC,
    props.TIMER_DELAY_MS,
    "TIMER_OUT_MS",
)


@dataclass(frozen=True, slots=True)
class QueueOffsets:
    queue: MessageQueue
    min_offset: int
    max_offset: int
    committed: int | None


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "dlq", help="list and resend a group's dead-letter messages", description=__doc__.split("\n\n")[0]
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = add_action(actions, "list", "the dead messages of a group", list_dead, "group")
    p.add_argument("--max", type=int, default=1000, help="list at most this many (default 1000)")
    p = add_action(actions, "resend", "send dead messages back to their original topic", resend, "group")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", help="the message to resend")
    which.add_argument("--all", action="store_true", help="resend every dead message of the group")


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


async def dead_messages(admin: AsyncAdmin, group: str, limit: int) -> list[tuple[str, MessageExt]]:
    """Up to ``limit`` (broker name, message) of ``%DLQ%<group>``, queue by queue, oldest first."""
    found: list[tuple[str, MessageExt]] = []
    reader = AsyncPullConsumer(TOOLS_CONSUMER_GROUP, admin.config, instance=admin.instance)
    await reader.start()
    try:
        for offsets in await group_topic_offsets(admin, dlq_topic(group)):
            offset = offsets.min_offset
            while offset < offsets.max_offset and len(found) < limit:
                result = await reader.pull(offsets.queue, offset, min(64, limit - len(found)))
                if result.status is PullStatus.FOUND:
                    found += [(offsets.queue.broker_name, msg) for msg in result.messages]
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
    finally:
        await reader.shutdown()
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
        "origin_topic": msg.properties.get(props.RETRY_TOPIC),
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
        row.update(
            kind="reference",
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
            },
        )
    return row


def resent_copy(msg: MessageExt, origin: str | None = None) -> Message:
    """The message to send back to its original topic (see the module docstring); ``origin`` None: the
    ``RETRY_TOPIC`` of a dead message."""
    origin = origin or msg.properties.get(props.RETRY_TOPIC)
    if not origin:
        raise ClientError(f"dead message {msg.msg_id} has no RETRY_TOPIC: its original topic is unknown")
    properties = {k: v for k, v in msg.properties.items() if k not in _RETRY_PROPERTIES}
    return Message(topic=origin, body=msg.body, properties=properties, flag=msg.flag)


def matches(msg: MessageExt, wanted: str) -> bool:
    return wanted in (msg.msg_id, msg.offset_msg_id, msg.properties.get(props.ORIGIN_MESSAGE_ID))


async def require_group(admin: AsyncAdmin, group: str) -> None:
    """SubscriptionGroupNotExistError for a group with neither a dead-letter or retry topic nor a config (a
    mistyped name is an error, as in `group describe`). The topics are asked of the name server first: that
    answers with a master down, and the timer's PMQ_SYS_TIMER has only a DLQ."""
    topics = await admin.list_topics()
    if dlq_topic(group) not in topics and retry_topic(group) not in topics:
        await admin.describe_group(group)


def list_dead(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        await require_group(admin, args.group)
        rows = [dead_row(broker, m) for broker, m in await dead_messages(admin, args.group, args.max)]
        if not args.json:
            emit(f"group {args.group}: {len(rows)} dead message(s)")
        print_rows(args, rows, LIST_COLUMNS)

    return run_admin(args, action)


def resend(args) -> int:
    async def action(admin: AsyncAdmin) -> int:
        await require_group(admin, args.group)
        dead = [m for _, m in await dead_messages(admin, args.group, 1_000_000)]
        chosen = dead if args.all else [m for m in dead if matches(m, args.id)][:1]
        if not chosen:
            report(
                args,
                {"group": args.group, "resent": 0},
                f"no dead message of group {args.group} {'' if args.all else f'with id {args.id}'}".rstrip(),
            )
            return 0 if args.all else 1
        unresolved = 0
        progress = ProgressBar(f"resending {args.group}'s dead messages", len(chosen), lines=args.json)
        async with (
            AsyncProducer(admin.config, instance=admin.instance) as producer,
            ReferenceResolver(
                admin.config.namesrv_addrs, admin.config.ssl_context(), admin.config.credentials
            ) as resolver,
        ):
            for msg in chosen:
                progress.advance()
                ref = reference_of(msg)
                copy = resent_copy(msg) if ref is None else await resolver.resolve(msg, ref, args)
                if copy is None:
                    unresolved += 1
                    continue
                result = await producer.send(copy)
                if args.json:
                    emit(
                        json_line(
                            {
                                "message_id": msg.msg_id,
                                "topic": copy.topic,
                                "queue_id": result.queue_id,
                                "queue_offset": result.queue_offset,
                            }
                        )
                    )
        progress.close()
        if not args.json:
            emit(
                f"resent {len(chosen) - unresolved} message(s) of group {args.group} to their original topics"
                + (f"; {unresolved} reference(s) not resolved" if unresolved else "")
            )
        return 1 if unresolved else 0

    return run_admin(args, action)


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

    async def resolve(self, msg: MessageExt, ref: DeadLetterReference, args) -> Message | None:
        """The real message to resend, or None after one line saying why it could not be read."""
        reader = RemoteMessageReader(ref.broker_name, self._namesrv, self._remoting, breakers=self._breakers)
        read = await reader.read(ref.topic, ref.queue_id, ref.queue_offset)
        found = read.message
        if read.status is ReadStatus.FOUND and found is not None:  # a FOUND read carries its message
            return resent_copy(found, business_topic(found))
        where = f"{ref.topic}/{ref.queue_id}@{ref.queue_offset} on {ref.broker_name}"
        report(
            args,
            {
                "message_id": msg.msg_id,
                "resolved": False,
                "broker": ref.broker_name,
                "topic": ref.topic,
                "queue_id": ref.queue_id,
                "queue_offset": ref.queue_offset,
                "reason": read.reason,
                "need_retry": read.need_retry,
                "description": read.description,
            },
            f"reference {msg.msg_id}: {where} not read: {read.reason}"
            f"{' (try again later)' if read.need_retry else ' (gone for good)'}: {read.description}",
        )
        return None
