"""``pocketmq dlq list|resend``: a consumer group's dead-letter queue (``%DLQ%<group>``).

- ``list GROUP [--max N]``: the dead messages over every broker: id, original topic, reconsume times, body.
- ``resend GROUP (--id ID | --all)``: send dead messages back to their original topic (the ``RETRY_TOPIC``
  property) with their body, tag, keys, message id and user properties; the retry bookkeeping (``DELAY``,
  ``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID``, reconsume counts) is dropped so they start afresh. ``ID`` matches
  the message id, the broker-side id or the original message id. The DLQ copies stay where they are
  (RocketMQ never deletes from a DLQ either).
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.cli.output import add_action, body_fields, emit, json_line, print_rows, report, run_admin
from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.producer import AsyncProducer
from pocketmq.client.pull_consumer import AsyncPullConsumer, PullStatus
from pocketmq.common import properties as props
from pocketmq.common.message import Message, MessageExt, MessageQueue
from pocketmq.common.topic import dlq_topic
from pocketmq.errors import ClientError, TopicNotExistError

READER_GROUP = "CLI_DLQ_READER"
LIST_COLUMNS = ["message_id", "origin_topic", "reconsume_times", "broker", "queue_offset", "body"]
# Retry bookkeeping a resent message starts without.
_RETRY_PROPERTIES = (props.DELAY_TIME_LEVEL, props.RETRY_TOPIC, props.ORIGIN_MESSAGE_ID, props.RECONSUME_TIME,
                     props.MAX_RECONSUME_TIMES, props.REAL_TOPIC, props.REAL_QUEUE_ID, props.TIMER_DELIVER_MS,
                     props.TIMER_DELAY_SEC, props.TIMER_DELAY_MS, "TIMER_OUT_MS")


@dataclass(frozen=True, slots=True)
class QueueOffsets:
    queue: MessageQueue
    min_offset: int
    max_offset: int
    committed: int | None


def register(subparsers) -> None:
    parser = subparsers.add_parser("dlq", help="list and resend a group's dead-letter messages",
                                   description=__doc__.split("\n\n")[0])
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = add_action(actions, "list", "the dead messages of a group", list_dead, "group")
    p.add_argument("--max", type=int, default=1000, help="list at most this many (default 1000)")
    p = add_action(actions, "resend", "send dead messages back to their original topic", resend, "group")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", help="the message to resend")
    which.add_argument("--all", action="store_true", help="resend every dead message of the group")


async def group_topic_offsets(admin: AsyncAdmin, topic: str, group: str | None = None) -> list[QueueOffsets]:
    """Min/max offsets (and ``group``'s committed offset) of every queue of ``topic``; [] when it has no route."""
    try:
        route = await admin.instance.route(topic, refresh=True)
    except TopicNotExistError:
        return []
    reader = AsyncPullConsumer(group or READER_GROUP, admin.config, instance=admin.instance)
    await reader.start()
    try:
        return [QueueOffsets(q, await reader.min_offset(q), await reader.max_offset(q),
                             await reader.committed(q) if group else None) for q in route.read_queues]
    finally:
        await reader.shutdown()


async def dead_messages(admin: AsyncAdmin, group: str, limit: int) -> list[tuple[str, MessageExt]]:
    """Up to ``limit`` (broker name, message) of ``%DLQ%<group>``, queue by queue, oldest first."""
    found: list[tuple[str, MessageExt]] = []
    reader = AsyncPullConsumer(READER_GROUP, admin.config, instance=admin.instance)
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


def dead_row(broker_name: str, msg: MessageExt) -> dict:
    return {"message_id": msg.msg_id, "origin_topic": msg.properties.get(props.RETRY_TOPIC),
            "origin_message_id": msg.properties.get(props.ORIGIN_MESSAGE_ID),
            "reconsume_times": msg.reconsume_times, "broker": broker_name,
            "queue_offset": msg.queue_offset, "store_timestamp_ms": msg.store_timestamp_ms, **body_fields(msg.body)}


def resent_copy(msg: MessageExt) -> Message:
    """The message to send back to its original topic (see the module docstring)."""
    origin = msg.properties.get(props.RETRY_TOPIC)
    if not origin:
        raise ClientError(f"dead message {msg.msg_id} has no RETRY_TOPIC: its original topic is unknown")
    properties = {k: v for k, v in msg.properties.items() if k not in _RETRY_PROPERTIES}
    return Message(topic=origin, body=msg.body, properties=properties, flag=msg.flag)


def matches(msg: MessageExt, wanted: str) -> bool:
    return wanted in (msg.msg_id, msg.offset_msg_id, msg.properties.get(props.ORIGIN_MESSAGE_ID))


def list_dead(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        rows = [dead_row(broker, m) for broker, m in await dead_messages(admin, args.group, args.max)]
        if not args.json:
            emit(f"group {args.group}: {len(rows)} dead message(s)")
        print_rows(args, rows, LIST_COLUMNS)

    return run_admin(args, action)


def resend(args) -> int:
    async def action(admin: AsyncAdmin) -> int:
        dead = [m for _, m in await dead_messages(admin, args.group, 1_000_000)]
        chosen = dead if args.all else [m for m in dead if matches(m, args.id)][:1]
        if not chosen:
            report(args, {"group": args.group, "resent": 0}, f"no dead message of group {args.group} "
                   f"{'' if args.all else f'with id {args.id}'}".rstrip())
            return 0 if args.all else 1
        async with AsyncProducer(admin.config, instance=admin.instance) as producer:
            for msg in chosen:
                copy = resent_copy(msg)
                result = await producer.send(copy)
                if args.json:
                    emit(json_line({"message_id": msg.msg_id, "topic": copy.topic,
                                    "queue_id": result.queue_id, "queue_offset": result.queue_offset}))
        if not args.json:
            emit(f"resent {len(chosen)} message(s) of group {args.group} to their original topics")
        return 0

    return run_admin(args, action)
