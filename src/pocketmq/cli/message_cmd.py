"""``pocketmq message query|show|consume-directly|recall``: find, read and act on one message.

- ``query TOPIC --key K | --id ID | --offset [BROKER:]QUEUE:OFFSET | --time FROM..TO [--max N]``: the messages of
  the topic with that key (the brokers' key index; ``--time`` narrows it), with that message id (the
  broker's offset id or the producer's id), at that queue offset, or stored in that time range (the earliest
  ``--max``, default 32). Times are epoch milliseconds or ISO-8601 (``2026-05-01T09:00``, local time unless it
  names a zone); either end of a range may be left out. One row per message; nothing found prints nothing.
- ``show ID [--topic T]``: one message in full: where it is, its times, its properties, and its body as text,
  pretty-printed JSON, or a hex dump when it is binary. An offset message id is found on its broker alone; the
  producer's id needs ``--topic``.
- ``consume-directly ID --group G --client CLIENT_ID [--topic T]``: hand the message to that online push
  consumer's listener once, and print what the listener returned (its offset and the group's progress are
  untouched: a test of the listener). Client ids are listed by ``pocketmq group consumers G``.
- ``trace ID``: the trace of one message (docs/trace.md): each step of its life in time order, with its time,
  what happened, who did it (a producer, a consumer client, a group, the broker's revive) and where (the
  broker, topic, queue and offset); the steps the brokers recorded and those of clients that trace. ``ID`` is
  the producer's message id (or an offset message id, read first). Nothing traced prints nothing.
- ``recall HANDLE``: cancel a delayed message before it is due. ``HANDLE`` is the recall handle its send
  returned (``pocketmq send --delay-ms N`` prints it; the official RocketMQ 5 clients' send receipts carry it
  as ``recall_handle``). The handle names the topic and the broker; the broker answers with the message id, or
  refuses a message already due (too late) and a handle it did not issue. A second recall of the same message
  succeeds again.
"""

from __future__ import annotations

import asyncio
import time

from pocketmq.cli.existence import require_group
from pocketmq.cli.message_view import message_detail_text
from pocketmq.cli.output import (
    add_action,
    client_config,
    emit,
    json_line,
    print_rows,
    report,
    run_admin,
)
from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.consumer_admin import ConsumerAdmin
from pocketmq.client.message_lookup import DEFAULT_MAX_MESSAGES, FoundMessage, MessageLookup
from pocketmq.client.message_trace import message_trace
from pocketmq.client.producer import AsyncProducer
from pocketmq.client.recall import recall_handle_target
from pocketmq.common.errors import BadRequestError
from pocketmq.ops.message_json import body_preview, iso_time, message_detail_json, message_to_json
from pocketmq.ops.message_query import find_messages, one_message
from pocketmq.ops.time_text import parse_time_range

QUERY_COLUMNS = ["broker", "queue_id", "queue_offset", "message_id", "tag", "keys", "stored", "body"]
BODY_PREVIEW_CHARS = 40
TRACE_COLUMNS = ["time", "step", "actor", "source", "where", "details"]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "message", help="find, read and act on messages", description=__doc__.split("\n\n")[0]
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = add_action(actions, "query", "find messages of a topic by key, id, queue offset or time", query, "topic")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--key", help="a key the producer gave the message (KEYS)")
    how.add_argument("--id", dest="msg_id", help="the broker's offset message id or the producer's id")
    how.add_argument("--offset", metavar="[BROKER:]QUEUE:OFFSET", help="a queue offset (the broker when several)")
    p.add_argument("--time", metavar="FROM..TO", help="stored in this time range (with --key: narrows it)")
    p.add_argument(
        "--max", type=int, default=DEFAULT_MAX_MESSAGES, help=f"at most N messages (default {DEFAULT_MAX_MESSAGES})"
    )
    p = add_action(actions, "show", "one message in full: properties and body", show, "msg_id")
    p.add_argument("--topic", help="the topic, needed for a producer's message id")
    p = add_action(
        actions, "consume-directly", "hand a message to one online push consumer's listener", consume_directly, "msg_id"
    )
    p.add_argument("--group", required=True, help="the consumer group")
    p.add_argument("--client", required=True, help="the client id (pocketmq group consumers GROUP)")
    p.add_argument("--topic", help="the topic, needed for a producer's message id")
    add_action(actions, "trace", "the trace of one message: each step of its life", trace, "msg_id")
    add_action(actions, "recall", "cancel a delayed message before it is due", recall, "handle")


def found_row(found: FoundMessage) -> dict:
    msg = found.message
    return {
        "broker": found.broker_name,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "message_id": msg.msg_id,
        "tag": msg.tags,
        "keys": ",".join(msg.keys) or None,
        "stored": iso_time(msg.store_timestamp_ms),
        "body": body_preview(msg.body, BODY_PREVIEW_CHARS),
    }


def query(args) -> int:
    if args.max < 1:
        raise BadRequestError("--max must be at least 1")
    time_range = parse_time_range(args.time, int(time.time() * 1000)) if args.time else None

    async def action(admin: AsyncAdmin) -> None:
        found = await find_messages(
            admin, args.topic, key=args.key, msg_id=args.msg_id, offset=args.offset, time_range=time_range,
            max_messages=args.max,
        )  # fmt: skip
        if args.json:
            for f in found:
                emit(json_line(message_to_json(f.message, f.broker_name)))
        elif found:
            print_rows(args, [found_row(f) for f in found], QUERY_COLUMNS)

    return run_admin(args, action)


def show(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        found = await one_message(admin, args.msg_id, args.topic)
        if args.json:
            emit(json_line(message_detail_json(found.message, found.broker_name)))
        else:
            emit(message_detail_text(found.message, found.broker_name))

    return run_admin(args, action)


def consume_directly(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        await require_group(admin, args.group)
        found = await one_message(admin, args.msg_id, args.topic)
        msg = found.message
        result = await ConsumerAdmin(admin).consume_directly(
            args.group, args.client, found.broker_name, msg.offset_msg_id
        )
        outcome = {"message_id": msg.msg_id, "group": args.group, "client": args.client, **_direct_result(result)}
        report(
            args,
            outcome,
            f"{msg.msg_id} consumed by {args.client}: {outcome['result']} in {outcome['spent_ms']} ms"
            + (f" ({outcome['remark']})" if outcome["remark"] else ""),
        )

    return run_admin(args, action)


def _direct_result(result: dict) -> dict:
    return {
        "result": result.get("consumeResult"),
        "remark": result.get("remark") or "",
        "spent_ms": result.get("spentTimeMills"),
        "orderly": result.get("order"),
    }


def trace(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        async with MessageLookup(admin) as lookup:
            steps = await message_trace(lookup, args.msg_id)
        rows = [step.to_json() for step in steps]
        if args.json:
            for row in rows:
                emit(json_line(row))
        elif rows:
            print_rows(args, [_trace_row(row) for row in rows], TRACE_COLUMNS)

    return run_admin(args, action)


def _trace_row(row: dict) -> dict:
    where = row["topic"] or ""
    if row.get("queue_id", -1) >= 0:
        where += f" {row['queue_id']}:{row['queue_offset']}"
    details = " ".join(f"{k}={v}" for k, v in row["details"].items() if v not in ("", None))
    return {"time": iso_time(row["time_ms"]), "step": row["step"], "actor": row["actor"], "source": row["source"],
            "where": where, "details": details}  # fmt: skip


def recall(args) -> int:
    topic, broker_name = recall_handle_target(args.handle)

    async def main() -> str:
        async with AsyncProducer(client_config(args)) as producer:
            return await producer.recall_message(topic, args.handle)

    message_id = asyncio.run(main())
    if args.json:
        emit(json_line({"message_id": message_id, "topic": topic, "broker": broker_name, "recalled": True}))
    else:
        emit(f"recalled {message_id} of {topic}@{broker_name}")
    return 0
