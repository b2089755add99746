"""The console's HTML pages: each a skeleton whose live parts htmx loads from ``/fragments/...`` and polls
again every few seconds. The fragments call the same functions as the JSON API, so a page shows what the API
answers. Forms send to the JSON API (static/console.js)."""

from __future__ import annotations

import asyncio
import time
from html import escape
from urllib.parse import quote

from aiohttp import web

from pocketmq.client.admin import BrokerAddress
from pocketmq.client.message_lookup import MessageLookup
from pocketmq.client.message_trace import message_trace
from pocketmq.common.message import MessageExt
from pocketmq.console.api_cluster import cluster_brokers
from pocketmq.console.api_groups import group_detail
from pocketmq.console.api_messages import message_view
from pocketmq.console.api_topics import topic_detail, topic_rows
from pocketmq.console.errors import status_of
from pocketmq.console.history import History
from pocketmq.console.html import api_form, fragment, line_chart, live, page, table
from pocketmq.console.login import admin_of
from pocketmq.console.requests import str_field
from pocketmq.ops.broker_settings import DYNAMIC_FIELDS
from pocketmq.ops.consume_stats import group_row
from pocketmq.ops.dead_letters import dead_row, known_group_dead_messages
from pocketmq.ops.message_json import body_text
from pocketmq.ops.message_query import find_messages, one_message
from pocketmq.ops.time_text import parse_time_range

routes = web.RouteTableDef()
HISTORY_KEY = web.AppKey("history", History)

BROKER_COLUMNS = ["broker", "broker_id", "address", "role", "version", "uptime", "put", "got", "topics", "groups",
                  "max_lag_bytes", "breakers", "disk_used", "error"]  # fmt: skip
# A page of thousands of rows is slow to draw and to read: the topics page lists this many and has a filter.
MAX_LISTED_TOPICS = 200
TOPIC_COLUMNS = ["topic", "type", "queues", "read_queues", "gray_queue_ratio", "brokers"]
QUEUE_COLUMNS = ["broker", "queue_id", "min_offset", "max_offset", "messages"]
GROUP_COLUMNS = ["group", "retry_max_times", "retry_queue_nums", "fifo", "consume_enable"]
OFFSET_COLUMNS = ["topic", "broker", "queue_id", "consumer_offset", "broker_offset", "lag", "in_flight",
                  "waiting_to_revive", "retried", "dead_lettered", "ck_rewrites", "ck_endings"]  # fmt: skip
CONSUMER_COLUMNS = ["client_id", "address", "language", "model", "consume_type", "gray", "subscriptions"]
MESSAGE_COLUMNS = ["message_id", "broker", "queue_id", "queue_offset", "tag", "keys", "stored", "body"]
DEAD_COLUMNS = ["message_id", "kind", "origin_topic", "reconsume_times", "broker", "queue_offset", "body"]
TRACE_COLUMNS = ["time", "step", "actor", "source", "topic", "queue_id", "queue_offset", "details"]
# A row shows the start of its body, rendered from the body's first bytes alone: a hex dump or a pretty-print
# of a 4 MiB body takes seconds, on the broker's own event loop, and a list has dozens of them.
ROW_BODY_CHARS = 80
ROW_BODY_BYTES = 1024


def row_body(body: bytes) -> str:
    """The start of ``body`` as the message page shows it (``body_text``), from its first ``ROW_BODY_BYTES``."""
    head = body[:ROW_BODY_BYTES]
    if len(body) > ROW_BODY_BYTES:
        # the cut may split a character: drop its first bytes, else a UTF-8 text would read as binary
        text = head.decode("utf-8", errors="ignore").encode("utf-8")
        head = text if head.startswith(text) and len(head) - len(text) < 4 else head
    return body_text(head)[1][:ROW_BODY_CHARS]


def dead_letter_rows(dead: list[tuple[str, MessageExt]]) -> list[dict]:
    """The rows of ``GET /api/dead-letters/GROUP`` (a reference named as one), each body cut to its start."""
    rows = []
    for broker, msg in dead:
        row = dead_row(broker, msg)
        row["body"] = row_body(msg.body) if row["kind"] == "message" else row["body"][:ROW_BODY_CHARS]
        rows.append(row)
    return rows


def _iso(ms: int | None) -> str | None:
    return None if ms is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


@routes.get("/")
async def index(request: web.Request) -> web.Response:
    raise web.HTTPFound("/cluster")


# -- cluster ----------------------------------------------------------------------------------------------------
@routes.get("/cluster")
async def cluster_page(request: web.Request) -> web.Response:
    return page("Cluster", "cluster", live("cluster-live", "/fragments/cluster"))


@routes.get("/fragments/cluster")
async def cluster_fragment(request: web.Request) -> web.Response:
    brokers = await cluster_brokers(await admin_of(request))
    history = request.app[HISTORY_KEY]
    rows, put, got = [], {}, {}
    for b in brokers:
        key = f"{b['broker']}/{b['broker_id']}"
        if "error" not in b:
            history.add(f"put:{key}", b["put"] or 0)
            history.add(f"got:{key}", b["got"] or 0)
            put[key], got[key] = history.rates(f"put:{key}"), history.rates(f"got:{key}")
        rows.append(
            {
                **b,
                "key": key,
                "max_lag_bytes": (b.get("replication") or {}).get("max_lag_bytes"),
                "breakers": " ".join(f"{k}={v}" for k, v in sorted((b.get("breakers") or {}).items())) or None,
                "disk_used": None
                if (b.get("disk") or {}).get("used_ratio") is None
                else f"{b['disk']['used_ratio']:.1%}",
            }
        )
    produce = {f"{k} put": v for k, v in put.items()}
    consume = {f"{k} got": v for k, v in got.items()}
    return fragment(
        table("brokers", BROKER_COLUMNS, rows, row_key="key")
        + line_chart("produce-rate", "produce rate", produce, "msg/s")
        + line_chart("consume-rate", "consume rate", consume, "msg/s")
    )


# -- topics -----------------------------------------------------------------------------------------------------
@routes.get("/topics")
async def topics_page(request: web.Request) -> web.Response:
    create = api_form(
        "topic-create",
        "POST",
        "/api/topics",
        '<input name="topic" id="topic-create-name" placeholder="topic" required>'
        '<input name="queues" id="topic-create-queues" type="number" min="1" value="8">'
        '<select name="type" id="topic-create-type"><option>mixed</option><option>normal</option>'
        "<option>fifo</option><option>delay</option><option>transaction</option></select>"
        '<input name="gray_queue_ratio" id="topic-create-gray" placeholder="gray ratio (optional)">',
        "Create topic",
    )
    search = (
        '<input id="topic-filter" name="q" type="search" placeholder="filter topics" '
        'hx-get="/fragments/topics" hx-target="#topics-live" hx-trigger="input changed delay:300ms">'
    )
    return page("Topics", "topics", create + search + live("topics-live", "/fragments/topics", 10))


@routes.get("/fragments/topics")
async def topics_fragment(request: web.Request) -> web.Response:
    """The topics whose name holds ``q``, the first ``MAX_LISTED_TOPICS`` of them (the count says how many)."""
    needle = request.query.get("q", "")
    rows = [r for r in await topic_rows(await admin_of(request), include_system=False) if needle in r["topic"]]
    shown = rows[:MAX_LISTED_TOPICS]
    for row in shown:
        row["brokers"] = ",".join(row["brokers"])
    html = table("topics", TOPIC_COLUMNS, shown, row_key="topic", links={"topic": "/topics/{value}"})
    more = f" (the first {len(shown)}: filter to find the others)" if len(shown) < len(rows) else ""
    return fragment(f'<p id="topic-count" data-count="{len(rows)}">{len(rows)} topics{more}</p>' + html)


@routes.get("/topics/{topic}")
async def topic_page(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    url = f"/api/topics/{quote(topic, safe='')}"
    forms = api_form(
        "topic-update",
        "PUT",
        url,
        '<input name="queues" id="topic-update-queues" type="number" min="1" placeholder="queues">'
        '<input name="gray_queue_ratio" id="topic-update-gray" placeholder="gray ratio">',
        "Update",
    ) + api_form("topic-delete", "DELETE", url, "", "Delete topic", confirm=f"Delete topic {topic} and its messages?")
    body = live("topic-live", f"/fragments/topics/{quote(topic, safe='')}") + forms
    return page(f"Topic {topic}", "topics", body)


@routes.get("/fragments/topics/{topic}")
async def topic_fragment(request: web.Request) -> web.Response:
    detail = await topic_detail(await admin_of(request), request.match_info["topic"])
    history = request.app[HISTORY_KEY]
    key = f"topic:{detail['topic']}"
    history.add(key, sum(q["max_offset"] for q in detail["queues"]))
    summary = (
        f'<p id="topic-summary" data-messages="{detail["messages"]}" data-queues="{len(detail["queues"])}">'
        f"{detail['messages']} messages stored in {len(detail['queues'])} queues</p>"
    )
    for q in detail["queues"]:
        q["key"] = f"{q['broker']}/{q['queue_id']}"
    chart = line_chart("topic-produce-rate", "produce rate", {"put": history.rates(key)}, "msg/s")
    return fragment(summary + table("queues", QUEUE_COLUMNS, detail["queues"], row_key="key") + chart)


# -- groups -----------------------------------------------------------------------------------------------------
@routes.get("/groups")
async def groups_page(request: web.Request) -> web.Response:
    return page("Groups", "groups", live("groups-live", "/fragments/groups", 10))


@routes.get("/fragments/groups")
async def groups_fragment(request: web.Request) -> web.Response:
    groups = await (await admin_of(request)).list_groups()
    rows = [group_row(groups[name]) for name in sorted(groups)]
    return fragment(table("groups", GROUP_COLUMNS, rows, row_key="group", links={"group": "/groups/{value}"}))


@routes.get("/groups/{group}")
async def group_page(request: web.Request) -> web.Response:
    group = request.match_info["group"]
    reset = api_form(
        "group-reset",
        "POST",
        f"/api/groups/{quote(group, safe='')}/reset-offset",
        '<input name="topic" id="group-reset-topic" placeholder="topic" required>'
        '<input name="time" id="group-reset-time" placeholder="time: epoch ms or 2026-05-01T09:00">',
        "Reset offsets to this time",
        confirm=f"Move group {group}'s offsets?",
    )
    return page(f"Group {group}", "groups", live("group-live", f"/fragments/groups/{quote(group, safe='')}") + reset)


@routes.get("/fragments/groups/{group}")
async def group_fragment(request: web.Request) -> web.Response:
    detail = await group_detail(await admin_of(request), request.match_info["group"], None)
    history = request.app[HISTORY_KEY]
    key = f"group:{detail['group']}"
    history.add(f"{key}:lag", detail["totals"]["lag"])
    history.add(f"{key}:consumed", sum(r["consumer_offset"] for r in detail["offsets"]))
    totals = "".join(
        f'<span class="total" data-total="{name}" data-value="{value}">{name}: {value}</span>'
        for name, value in [*detail["totals"].items(), ("retry_messages", detail["retry_messages"]),
                            ("dlq_messages", detail["dlq_messages"]), ("consumers", len(detail["consumers"]))]
    )  # fmt: skip
    for row in detail["offsets"]:
        row["key"] = f"{row['topic']}/{row['broker']}/{row['queue_id']}"
    for row in detail["consumers"]:
        row["subscriptions"] = " ".join(row["subscriptions"])
    return fragment(
        f'<p id="group-totals">{totals}</p>'
        + line_chart("group-lag", "lag", {"lag": history.values(f"{key}:lag")}, "msgs")
        + line_chart("group-consume-rate", "consume rate", {"consumed": history.rates(f"{key}:consumed")}, "msg/s")
        + "<h2>Consumers</h2>"
        + table("consumers", CONSUMER_COLUMNS, detail["consumers"], row_key="client_id")
        + "<h2>Queues</h2>"
        + table("offsets", OFFSET_COLUMNS, detail["offsets"], row_key="key")
    )


# -- messages ---------------------------------------------------------------------------------------------------
@routes.get("/messages")
async def messages_page(request: web.Request) -> web.Response:
    q = request.query
    form = (
        '<form id="message-search" method="get" action="/messages">'
        + "".join(
            f'<input name="{name}" id="message-search-{name}" placeholder="{hint}" value="{escape(q.get(name, ""))}">'
            for name, hint in [
                ("topic", "topic"),
                ("key", "key"),
                ("id", "message id"),
                ("offset", "[broker:]queue:offset"),
                ("time", "from..to"),
            ]
        )  # fmt: skip
        + '<button type="submit" id="message-search-submit">Find</button></form>'
    )
    results = ""
    if q.get("topic"):
        time_range = parse_time_range(q["time"], int(time.time() * 1000)) if q.get("time") else None
        found = await find_messages(
            await admin_of(request),
            q["topic"],
            key=q.get("key") or None,
            msg_id=q.get("id") or None,
            offset=q.get("offset") or None,
            time_range=time_range,
        )
        rows = [
            {
                "message_id": f.message.msg_id,
                "broker": f.broker_name,
                "queue_id": f.message.queue_id,
                "queue_offset": f.message.queue_offset,
                "tag": f.message.tags,
                "keys": ",".join(f.message.keys),
                "stored": _iso(f.message.store_timestamp_ms),
                "body": row_body(f.message.body),
            }
            for f in found
        ]
        link = "/messages/{value}?topic=" + quote(q["topic"], safe="")
        results = f'<p id="message-count" data-count="{len(rows)}">{len(rows)} messages</p>' + table(
            "messages", MESSAGE_COLUMNS, rows, row_key="message_id", links={"message_id": link}
        )
    return page("Messages", "messages", form + results)


def _message_detail_html(view: dict) -> str:
    fields = [("message_id", "message id"), ("offset_msg_id", "offset id"), ("topic", "topic"),
              ("broker", "broker"), ("queue_id", "queue"), ("queue_offset", "offset"), ("tag", "tag"),
              ("reconsume_times", "reconsume times"), ("body_size", "body size"), ("body_format", "body format")]  # fmt: skip
    rows = "".join(
        f'<tr><th>{label}</th><td data-field="{name}">{escape(str(view.get(name)))}</td></tr>' for name, label in fields
    )
    props = "".join(
        f'<tr data-key="{escape(k)}"><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>'
        for k, v in sorted({**view["properties"], **view["system_properties"]}.items())
    )
    return (
        f'<table id="message-fields">{rows}</table><h2>Properties</h2><table id="message-properties">{props}</table>'
        f'<h2>Body</h2><pre id="message-body" data-format="{view["body_format"]}">{escape(view["body_view"])}</pre>'
    )


@routes.get("/messages/{msg_id}")
async def message_page(request: web.Request) -> web.Response:
    msg_id = request.match_info["msg_id"]
    found = await one_message(await admin_of(request), msg_id, request.query.get("topic") or None)
    view = message_view(found.message, found.broker_name)
    trace = live("message-trace", f"/fragments/messages/{quote(msg_id, safe='')}/trace", 10)
    return page(f"Message {msg_id}", "messages", _message_detail_html(view) + "<h2>Trace</h2>" + trace)


@routes.get("/fragments/messages/{msg_id}/trace")
async def trace_fragment(request: web.Request) -> web.Response:
    async with MessageLookup(await admin_of(request)) as lookup:
        steps = [s.to_json() for s in await message_trace(lookup, request.match_info["msg_id"])]
    for i, step in enumerate(steps):
        step["n"] = i
        step["time"] = _iso(step["time_ms"])
        step["details"] = " ".join(f"{k}={v}" for k, v in step["details"].items() if v not in ("", None))
    return fragment(table("trace", TRACE_COLUMNS, steps, row_key="n"))


# -- dead letters -----------------------------------------------------------------------------------------------
@routes.get("/dead-letters")
async def dead_letters_page(request: web.Request) -> web.Response:
    group = str_field(dict(request.query), "group")
    form = (
        '<form id="dead-letters-pick" method="get" action="/dead-letters">'
        f'<input name="group" id="dead-letters-group" placeholder="group" value="{escape(group or "")}">'
        '<button type="submit" id="dead-letters-submit">Show</button></form>'
    )
    if not group:
        return page("Dead letters", "dead-letters", form)
    rows = dead_letter_rows(await known_group_dead_messages(await admin_of(request), group, 100))

    def resend(msg_id: str) -> str:
        return api_form(
            f"resend-{escape(msg_id)}",
            "POST",
            f"/api/dead-letters/{quote(group, safe='')}/{quote(msg_id, safe='')}/resend",
            "",
            "Resend to this group",
            confirm="Resend this message to the group?",
        )

    html = f'<p id="dead-count" data-count="{len(rows)}">{len(rows)} dead messages of {escape(group)}</p>' + table(
        "dead-letters", DEAD_COLUMNS, rows, row_key="message_id", extra=resend
    )
    return page("Dead letters", "dead-letters", form + html)


# -- config -----------------------------------------------------------------------------------------------------
def broker_settings_html(broker: BrokerAddress, settings: dict[str, str] | BaseException) -> str:
    """A broker's settings (``#config-BROKER-ID``), or the reason it did not give them."""
    label = f"{broker.broker_name}/{broker.broker_id}"
    head = f"<h2>{escape(label)} <small>{escape(broker.addr)}</small></h2>"
    if isinstance(settings, BaseException):
        status = status_of(settings) if isinstance(settings, Exception) else 500
        return (
            head + f'<p class="refused" data-status="{status}">{escape(str(settings) or type(settings).__name__)}</p>'
        )
    rows = []
    for key in sorted(settings):
        dynamic = key in DYNAMIC_FIELDS
        rows.append(f'<tr data-key="{escape(key)}" data-dynamic="{str(dynamic).lower()}"><th>{escape(key)}</th>'
                    f'<td data-field="value">{escape(settings[key])}</td></tr>')  # fmt: skip
    return head + f'<table id="config-{escape(broker.broker_name)}-{broker.broker_id}">{"".join(rows)}</table>'


@routes.get("/config")
async def config_page(request: web.Request) -> web.Response:
    admin = await admin_of(request)
    brokers = await admin.brokers()
    # one broker down (or refusing this user) takes its own section, not the page
    answers = await asyncio.gather(*(admin.broker_config(b.addr) for b in brokers), return_exceptions=True)
    parts = [broker_settings_html(broker, answer) for broker, answer in zip(brokers, answers)]
    options = "".join(f"<option>{escape(name)}</option>" for name in sorted(DYNAMIC_FIELDS))
    change = api_form(
        "config-set",
        "PUT",
        "/api/config",
        f'<select name="key" id="config-set-key">{options}</select>'
        '<input name="value" id="config-set-value" placeholder="value" required>',
        "Change on every broker",
        confirm="Change this setting on every broker?",
    )
    return page("Config", "config", change + "".join(parts))
