"""``pocketmq group consumers|reset-offset``: a group's online consumers, and moving its offsets.

- ``consumers GROUP``: one row per online client (per broker it is connected to): client id, address,
  protocol (remoting, or gRPC for the official 5.x clients), language, version, and from a remoting client (GET_CONSUMER_RUNNING_INFO, answered by push consumers) how it
  consumes and the queues it holds; ``--json`` adds the whole running info (``running_info``), or the error a
  client gave. A group with no consumer online is an error.
- ``reset-offset GROUP TOPIC --to-time T | --to-earliest | --to-latest``: every broker of the topic stores the
  group's new offset of each queue (the first message stored at or after T; the oldest; past the newest) and
  tells the group's online push consumers, which pull from it at once; consumers offline start there when
  they come back. ``--only-back`` leaves a queue the group has not reached T on yet where it is.
"""

from __future__ import annotations

import asyncio

from pocketmq.cli.existence import require_group
from pocketmq.cli.output import add_action, print_rows, run_admin
from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.consumer_admin import ConsumerAdmin
from pocketmq.common.errors import ClientError, PocketMQError
from pocketmq.ops.consume_stats import reset_rows
from pocketmq.ops.time_text import parse_time_ms
from pocketmq.protocol.consumer_admin_headers import RESET_TO_EARLIEST, RESET_TO_LATEST

CONSUMER_COLUMNS = ["client_id", "broker", "address", "protocol", "language", "version", "model", "queues", "consumed"]
RESET_COLUMNS = ["topic", "broker", "queue_id", "offset", "consumers_notified"]


def add_actions(actions) -> None:
    """The group actions of this module, on ``pocketmq group``'s sub-parsers."""
    add_action(actions, "consumers", "a group's online consumers and their running info", consumers, "group")
    p = add_action(
        actions, "reset-offset", "move a group's offsets of a topic to a time", reset_offset, "group", "topic"
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-time", metavar="T", help="epoch milliseconds or ISO-8601 (local time unless zoned)")
    where.add_argument("--to-earliest", action="store_true", help="the oldest message still stored")
    where.add_argument("--to-latest", action="store_true", help="past the newest message (skip the backlog)")
    p.add_argument("--only-back", action="store_true", help="never move a queue forward")


def consumers(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        consumer_admin = ConsumerAdmin(admin)
        by_broker = await consumer_admin.connections(args.group)
        if not by_broker:
            await require_group(admin, args.group)
            raise ClientError(f"no consumer of group {args.group} is online")
        rows = [
            {
                "client_id": conn["clientId"],
                "broker": broker,
                "address": conn.get("clientAddr"),
                "protocol": conn.get("protocol", "remoting"),
                "language": conn.get("language"),
                "version": conn.get("version"),
                "model": body.get("messageModel"),
                **({"subscriptions": subscriptions_of(body)} if args.json else {}),
            }
            for broker, body in by_broker.items()
            for conn in body.get("connectionSet") or []
        ]
        # Only remoting push consumers answer GET_CONSUMER_RUNNING_INFO (gRPC clients have no remoting channel).
        client_ids = sorted({row["client_id"] for row in rows if row["protocol"] == "remoting"})
        answers = await asyncio.gather(
            *(consumer_admin.running_info(args.group, cid) for cid in client_ids), return_exceptions=True
        )
        infos = dict(zip(client_ids, answers))
        for row in rows:
            if row["client_id"] not in infos:
                continue
            info = infos[row["client_id"]]
            if isinstance(info, BaseException):
                if not isinstance(info, PocketMQError):
                    raise info
                row["running_info_error"] = str(info)
                continue
            row["queues"] = len(info.get("mqTable") or [])
            row["consumed"] = (info.get("properties") or {}).get("consumedTotal")
            if args.json:
                row["running_info"] = info
        print_rows(args, rows, CONSUMER_COLUMNS)

    return run_admin(args, action)


def subscriptions_of(connections: dict) -> dict[str, dict[str, str]]:
    """Topic -> filter of a broker's GET_CONSUMER_CONNECTION_LIST answer."""
    return {
        topic: {"type": sub.get("expressionType", "TAG"), "expression": sub.get("subString", "*")}
        for topic, sub in (connections.get("subscriptionTable") or {}).items()
    }


def reset_offset(args) -> int:
    if args.to_earliest:
        timestamp_ms = RESET_TO_EARLIEST
    elif args.to_latest:
        timestamp_ms = RESET_TO_LATEST
    else:
        timestamp_ms = parse_time_ms(args.to_time)

    async def action(admin: AsyncAdmin) -> None:
        await require_group(admin, args.group)
        by_broker = await ConsumerAdmin(admin).reset_offset(
            args.group, args.topic, timestamp_ms, force=not args.only_back
        )
        print_rows(args, reset_rows(by_broker), RESET_COLUMNS)

    return run_admin(args, action)
