"""``/api/topics``: list (type, queues, permission, gray ratio, brokers), describe (each queue's min and max
offsets), create, update and delete. Changes go to every master, as ``pocketmq topic`` makes them."""

from __future__ import annotations

from aiohttp import web

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.replies import check_topic
from pocketmq.common.errors import BadRequestError, TopicNotExistError
from pocketmq.common.topic import MessageType, TopicConfig, is_system_topic
from pocketmq.console.login import admin_of
from pocketmq.console.requests import flag, float_field, int_field, json_body, str_field

routes = web.RouteTableDef()


def _message_type(body: dict, *, default: str | None) -> MessageType | None:
    text = str_field(body, "type") or default
    if text is None:
        return None
    try:
        return MessageType.parse(text)
    except ValueError:
        raise BadRequestError(f"type {text!r}: expected one of {', '.join(t.value for t in MessageType)}") from None


def _topic_row(name: str, per_broker: dict[str, TopicConfig], system: bool) -> dict:
    first = next(iter(per_broker.values()))
    return {
        "topic": name,
        "type": first.message_type.value,
        "queues": first.write_queue_nums,
        "read_queues": first.read_queue_nums,
        "perm": first.perm,
        "order": first.order,
        "gray_queue_ratio": first.gray_queue_ratio,
        "brokers": sorted(per_broker),
        "system": system,
    }


async def topic_rows(admin: AsyncAdmin, *, include_system: bool) -> list[dict]:
    """One row per topic over every master (one request per master: fast with thousands of topics)."""
    by_topic: dict[str, dict[str, TopicConfig]] = {}
    for broker, configs in sorted((await admin.topic_configs()).items()):
        for name, config in configs.items():
            by_topic.setdefault(name, {})[broker] = config
    hidden: set[str] = set()
    if not include_system:
        info = await admin.cluster_info()
        hidden = set(info.cluster_addr_table) | set(info.broker_addr_table)
    rows = []
    for name in sorted(by_topic):
        system = is_system_topic(name)
        if include_system or not (system or name in hidden):
            rows.append(_topic_row(name, by_topic[name], system))
    return rows


async def topic_detail(admin: AsyncAdmin, topic: str) -> dict:
    check_topic(topic)
    status = await admin.describe_topic(topic)
    queues = [
        {
            "broker": q.queue.broker_name,
            "queue_id": q.queue.queue_id,
            "min_offset": q.min_offset,
            "max_offset": q.max_offset,
            "messages": q.max_offset - q.min_offset,
        }
        for q in status.queues
    ]
    return {
        "topic": topic,
        "write_queues": status.write_queue_count,
        "read_queues": status.read_queue_count,
        "messages": status.message_count,
        "queues": queues,
    }


@routes.get("/api/topics")
async def list_topics(request: web.Request) -> web.Response:
    admin = await admin_of(request)
    include_system = flag(dict(request.query), "all")
    return web.json_response({"topics": await topic_rows(admin, include_system=include_system)})


@routes.get("/api/topics/{topic}")
async def describe(request: web.Request) -> web.Response:
    return web.json_response(await topic_detail(await admin_of(request), request.match_info["topic"]))


@routes.post("/api/topics")
async def create(request: web.Request) -> web.Response:
    body = await json_body(request)
    topic = str_field(body, "topic", required=True)
    assert topic is not None
    check_topic(topic)
    queues = int_field(body, "queues", default=8, minimum=1)
    assert queues is not None
    message_type = _message_type(body, default="mixed")
    assert message_type is not None
    gray = float_field(body, "gray_queue_ratio")
    admin = await admin_of(request)
    if topic in await admin.list_topics():
        raise BadRequestError(f"topic {topic!r} exists already (PUT /api/topics/{topic} changes it)")
    brokers = await admin.create_topic(
        topic, queues=queues, message_type=message_type, gray_queue_ratio=gray, cluster=str_field(body, "cluster")
    )
    return web.json_response(
        {"topic": topic, "brokers": brokers, "queues": queues, "type": message_type.value, "gray_queue_ratio": gray},
        status=201,
    )


@routes.put("/api/topics/{topic}")
async def update(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    check_topic(topic)
    body = await json_body(request)
    queues = int_field(body, "queues", minimum=1)
    message_type = _message_type(body, default=None)
    gray = float_field(body, "gray_queue_ratio")
    if queues is None and message_type is None and gray is None:
        raise BadRequestError("name what changes: queues, type or gray_queue_ratio")
    admin = await admin_of(request)
    if topic not in await admin.list_topics():
        raise TopicNotExistError(f"topic {topic!r} does not exist (POST /api/topics creates it)")
    brokers = await admin.update_topic(
        topic,
        queues=queues,
        message_type=message_type,
        gray_queue_ratio=gray,
        cluster=str_field(body, "cluster"),
        force=flag(body, "force"),
    )
    changed = {"queues": queues, "type": message_type and message_type.value, "gray_queue_ratio": gray}
    return web.json_response(
        {"topic": topic, "brokers": brokers, **{k: v for k, v in changed.items() if v is not None}}
    )


@routes.delete("/api/topics/{topic}")
async def delete(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    check_topic(topic)
    admin = await admin_of(request)
    if topic not in await admin.list_topics():
        raise TopicNotExistError(f"topic {topic!r} does not exist (nothing deleted)")
    brokers = await admin.delete_topic(topic, cluster=request.query.get("cluster") or None)
    return web.json_response({"topic": topic, "brokers": brokers, "deleted": True})
