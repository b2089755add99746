"""``/api/dead-letters/{group}``: a group's dead letters (``%DLQ%<group>`` and its dead-letter references),
one of them in full, and its resend to that group only (through the group's retry topic, as ``pocketmq dlq
resend`` sends it: the other groups of the topic do not get it again)."""

from __future__ import annotations

from aiohttp import web

from pocketmq.client.producer import AsyncProducer
from pocketmq.common.errors import BadRequestError
from pocketmq.common.message import MessageExt
from pocketmq.console.api_messages import message_view
from pocketmq.console.errors import NotFound
from pocketmq.console.login import admin_of
from pocketmq.console.requests import int_field
from pocketmq.ops.dead_letters import ReferenceResolver, dead_row, known_group_dead_messages, matches, reference_of
from pocketmq.ops.dlq_target import redelivery

routes = web.RouteTableDef()

DEFAULT_MAX = 100
MAX_LIMIT = 10_000


async def _dead_letter(request: web.Request) -> tuple[str, MessageExt]:
    group, msg_id = request.match_info["group"], request.match_info["msg_id"]
    admin = await admin_of(request)
    for broker, msg in await known_group_dead_messages(admin, group, 1, keep=lambda msg: matches(msg, msg_id)):
        return broker, msg
    raise NotFound(f"group {group} has no dead message {msg_id}")


@routes.get("/api/dead-letters/{group}")
async def list_dead(request: web.Request) -> web.Response:
    max_messages = int_field(dict(request.query), "max", default=DEFAULT_MAX, minimum=1)
    assert max_messages is not None
    if max_messages > MAX_LIMIT:
        raise BadRequestError(f"max must be at most {MAX_LIMIT}")
    group = request.match_info["group"]
    dead = await known_group_dead_messages(await admin_of(request), group, max_messages)
    return web.json_response({"group": group, "messages": [dead_row(broker, msg) for broker, msg in dead]})


@routes.get("/api/dead-letters/{group}/{msg_id}")
async def show(request: web.Request) -> web.Response:
    broker, msg = await _dead_letter(request)
    return web.json_response({**message_view(msg, broker), "dead_letter": dead_row(broker, msg)})


@routes.post("/api/dead-letters/{group}/{msg_id}/resend")
async def resend(request: web.Request) -> web.Response:
    """Resend one dead message to its group only; 409 when it is a reference whose message cannot be read."""
    group = request.match_info["group"]
    _, msg = await _dead_letter(request)
    admin = await admin_of(request)
    ref = reference_of(msg)
    if ref is None:
        copy = redelivery(msg, group, to_topic=False)
    else:
        config = admin.config
        async with ReferenceResolver(config.namesrv_addrs, config.ssl_context(), config.credentials) as resolver:
            resolved = await resolver.resolve(ref, to_topic=False)
        if isinstance(resolved, dict):
            return web.json_response(
                {"error": {"type": "UnresolvedReference", "message": resolved["description"]}, **resolved},
                status=409,
            )
        copy = resolved
    async with AsyncProducer(admin.config, instance=admin.instance) as producer:
        result = await producer.send(copy)
    return web.json_response(
        {
            "message_id": msg.msg_id,
            "group": group,
            "topic": copy.topic,
            "queue_id": result.queue_id,
            "queue_offset": result.queue_offset,
        }
    )
