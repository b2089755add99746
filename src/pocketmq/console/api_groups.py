"""``/api/groups``: the subscription groups, and per group its consumers online, lag per queue, POP state
(in flight, waiting to revive, CK rewrites and endings), retry and DLQ backlogs; reset its offsets of a topic
to a time (RocketMQ's RESET_CONSUMER_CLIENT_OFFSET to online push consumers, else the stored offsets)."""

from __future__ import annotations

import time

from aiohttp import web

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.consumer_admin import ConsumerAdmin
from pocketmq.client.replies import check_topic
from pocketmq.common.errors import BadRequestError
from pocketmq.common.topic import dlq_topic, retry_topic
from pocketmq.console.login import admin_of
from pocketmq.console.requests import flag, json_body, str_field
from pocketmq.ops.consume_stats import POP_FIELDS, group_row, offset_rows, reset_rows
from pocketmq.ops.dead_letters import group_topic_offsets
from pocketmq.ops.time_text import parse_time_ms
from pocketmq.protocol.consumer_admin_headers import RESET_TO_EARLIEST, RESET_TO_LATEST

routes = web.RouteTableDef()

TOTALS = ["lag", *POP_FIELDS]


def consumer_rows(by_broker: dict[str, dict], gray: dict[str, dict]) -> list[dict]:
    """One row per online client (a client connected to several brokers is listed once)."""
    gray_ids = {
        str(client.get("clientId")): bool(client.get("gray"))
        for answer in gray.values()
        for client in answer.get("clients") or []
    }
    rows: dict[str, dict] = {}
    for broker, body in sorted(by_broker.items()):
        subscriptions = sorted(
            f"{s.get('topic')}:{s.get('subString') or '*'}" for s in (body.get("subscriptionTable") or {}).values()
        )
        for conn in body.get("connectionSet") or []:
            client_id = conn["clientId"]
            row = rows.setdefault(
                client_id,
                {
                    "client_id": client_id,
                    "address": conn.get("clientAddr"),
                    "language": conn.get("language"),
                    "version": conn.get("version"),
                    "model": body.get("messageModel"),
                    "consume_type": body.get("consumeType"),
                    "subscriptions": subscriptions,
                    "gray": gray_ids.get(client_id, False),
                    "brokers": [],
                },
            )
            row["brokers"].append(broker)
    return list(rows.values())


async def backlog(admin: AsyncAdmin, topic: str, group: str) -> int:
    """Messages stored in one of the group's own topics (its retry topic or DLQ): 0 when it has none."""
    return sum(q.max_offset - q.min_offset for q in await group_topic_offsets(admin, topic))


async def group_detail(admin: AsyncAdmin, group: str, topic: str | None) -> dict:
    config = await admin.describe_group(group)  # 404 for an unknown group
    offsets = offset_rows(await admin.consume_stats(group, topic))
    consumer_admin = ConsumerAdmin(admin)
    consumers = consumer_rows(await consumer_admin.connections(group), await admin.gray_clients(group))
    return {
        **group_row(config),
        "totals": {name: sum(row[name] for row in offsets) for name in TOTALS},
        "retry_messages": await backlog(admin, retry_topic(group), group),
        "dlq_messages": await backlog(admin, dlq_topic(group), group),
        "offsets": offsets,
        "consumers": consumers,
    }


@routes.get("/api/groups")
async def list_groups(request: web.Request) -> web.Response:
    admin = await admin_of(request)
    groups = await admin.list_groups()
    return web.json_response({"groups": [group_row(groups[name]) for name in sorted(groups)]})


@routes.get("/api/groups/{group}")
async def describe(request: web.Request) -> web.Response:
    topic = request.query.get("topic") or None
    if topic is not None:
        check_topic(topic)
    admin = await admin_of(request)
    return web.json_response(await group_detail(admin, request.match_info["group"], topic))


def reset_target_ms(body: dict) -> int:
    """The time to reset to: ``time`` (epoch ms or ISO-8601), or ``to`` = ``earliest`` / ``latest``."""
    to = str_field(body, "to")
    when = body.get("time")
    if (to is None) == (when is None or when == ""):
        raise BadRequestError("name either time (epoch ms or ISO-8601) or to (earliest or latest)")
    if to is not None:
        targets = {"earliest": RESET_TO_EARLIEST, "latest": RESET_TO_LATEST}
        if to not in targets:
            raise BadRequestError(f"to {to!r}: expected earliest or latest")
        return targets[to]
    timestamp_ms = parse_time_ms(str(when))
    if timestamp_ms > int(time.time() * 1000) + 86_400_000:
        raise BadRequestError(f"time {when!r} is in the future")
    return timestamp_ms


@routes.post("/api/groups/{group}/reset-offset")
async def reset_offset(request: web.Request) -> web.Response:
    group = request.match_info["group"]
    body = await json_body(request)
    topic = str_field(body, "topic", required=True)
    assert topic is not None
    check_topic(topic)
    timestamp_ms = reset_target_ms(body)
    admin = await admin_of(request)
    await admin.describe_group(group)  # an unknown group or topic changes nothing
    await admin.describe_topic(topic)
    by_broker = await ConsumerAdmin(admin).reset_offset(group, topic, timestamp_ms, force=not flag(body, "only_back"))
    rows = reset_rows(by_broker)
    return web.json_response({"group": group, "topic": topic, "timestamp_ms": timestamp_ms, "offsets": rows})
