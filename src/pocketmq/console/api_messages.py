"""``/api/messages``: find a topic's messages by key, message id, queue offset or store time; one message in
full (properties, body as text, pretty-printed JSON or a hex dump); its trace (docs/trace.md)."""

from __future__ import annotations

import time

from aiohttp import web

from pocketmq.client.message_lookup import DEFAULT_MAX_MESSAGES, MessageLookup
from pocketmq.client.message_trace import message_trace
from pocketmq.client.replies import check_topic
from pocketmq.common.errors import BadRequestError
from pocketmq.common.message import MessageExt
from pocketmq.console.login import admin_of
from pocketmq.console.requests import int_field, str_field
from pocketmq.ops.message_json import body_text, message_detail_json, message_to_json
from pocketmq.ops.message_query import find_messages, one_message
from pocketmq.ops.time_text import parse_time_range

routes = web.RouteTableDef()

MAX_MESSAGES_LIMIT = 1000


def message_view(msg: MessageExt, broker_name: str) -> dict:
    """``message_detail_json`` with the body as people read it: ``body_view`` (JSON pretty-printed, text, or a
    hex dump) in the format ``body_format`` names."""
    _, shown = body_text(msg.body)
    return {**message_detail_json(msg, broker_name), "body_view": shown}


@routes.get("/api/messages")
async def query(request: web.Request) -> web.Response:
    params = dict(request.query)
    topic = str_field(params, "topic", required=True)
    assert topic is not None
    check_topic(topic)
    max_messages = int_field(params, "max", default=DEFAULT_MAX_MESSAGES, minimum=1)
    assert max_messages is not None
    if max_messages > MAX_MESSAGES_LIMIT:
        raise BadRequestError(f"max must be at most {MAX_MESSAGES_LIMIT}")
    time_text = params.get("time")
    time_range = parse_time_range(time_text, int(time.time() * 1000)) if time_text else None
    ways = [name for name in ("key", "id", "offset", "time") if params.get(name)]
    if not ways or len([w for w in ways if w != "time"]) > 1:
        raise BadRequestError("name one of key, id or offset (time narrows a key), or a time range alone")
    admin = await admin_of(request)
    await admin.describe_topic(topic)  # 404 for an unknown topic, rather than an empty answer
    found = await find_messages(
        admin,
        topic,
        key=params.get("key") or None,
        msg_id=params.get("id") or None,
        offset=params.get("offset") or None,
        time_range=time_range,
        max_messages=max_messages,
    )
    return web.json_response({"messages": [message_to_json(f.message, f.broker_name) for f in found]})


@routes.get("/api/messages/{msg_id}")
async def show(request: web.Request) -> web.Response:
    topic = request.query.get("topic") or None
    if topic is not None:
        check_topic(topic)
    found = await one_message(await admin_of(request), request.match_info["msg_id"], topic)
    return web.json_response(message_view(found.message, found.broker_name))


@routes.get("/api/messages/{msg_id}/trace")
async def trace(request: web.Request) -> web.Response:
    async with MessageLookup(await admin_of(request)) as lookup:
        steps = await message_trace(lookup, request.match_info["msg_id"])
    return web.json_response({"message_id": request.match_info["msg_id"], "steps": [s.to_json() for s in steps]})
