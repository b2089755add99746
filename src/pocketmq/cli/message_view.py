"""One stored message shown to a person (``pocketmq message show``): where it is, its times, its properties, and
its body as text, pretty-printed when it is JSON, else as a hex dump (pocketmq/ops/message_json.py)."""

from __future__ import annotations

from pocketmq.common.message import MessageExt
from pocketmq.ops.message_json import body_text, iso_time, message_detail_json


def message_detail_text(msg: MessageExt, broker_name: str) -> str:
    detail = message_detail_json(msg, broker_name)
    kind, body = body_text(msg.body)
    fields = [
        ("message id", detail["message_id"]),
        ("offset id", detail["offset_msg_id"]),
        ("topic", msg.topic),
        ("queue", f"{broker_name}/{msg.queue_id}@{msg.queue_offset}"),
        ("tag", msg.tags or "-"),
        ("keys", ",".join(msg.keys) or "-"),
        ("born", iso_time(msg.born_timestamp_ms)),
        ("stored", iso_time(msg.store_timestamp_ms)),
        ("reconsume times", msg.reconsume_times),
        ("body size", f"{len(msg.body)} bytes ({kind})"),
    ]
    width = max(len(name) for name, _ in fields)
    lines = [f"{name + ':':<{width + 1}} {value}" for name, value in fields]
    for title, props in (("properties", detail["properties"]), ("system properties", detail["system_properties"])):
        lines.append(f"{title}:" + ("" if props else " -"))
        lines += [f"  {k}={v}" for k, v in sorted(props.items())]
    lines += ["body:", body]
    return "\n".join(lines)
