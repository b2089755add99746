"""One stored message shown to a person (``pocketmq message show``, ``message query``): where it is, its times,
its properties, and its body as text, pretty-printed when it is JSON, else as a hex dump."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pocketmq.cli.output import message_to_json
from pocketmq.common.message import MessageExt

HEX_BYTES_PER_LINE = 16


def body_text(body: bytes) -> tuple[str, str]:
    """(``json``, ``text`` or ``hex``, and the body so rendered). Text with control characters other than line
    breaks and tabs is binary too: printed as it is, it would move a terminal's cursor or ring its bell."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "hex", hex_dump(body)
    if any(ord(c) < 32 and c not in "\n\r\t" or c == "\x7f" for c in text):
        return "hex", hex_dump(body)
    try:
        return "json", json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return "text", text


def hex_dump(data: bytes) -> str:
    """Offset, hex bytes and the printable ASCII of each line of ``HEX_BYTES_PER_LINE`` bytes."""
    lines = []
    for start in range(0, len(data), HEX_BYTES_PER_LINE):
        chunk = data[start : start + HEX_BYTES_PER_LINE]
        shown = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {chunk.hex(' '):<{HEX_BYTES_PER_LINE * 3 - 1}}  {shown}")
    return "\n".join(lines)


def iso_time(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def message_detail_json(msg: MessageExt, broker_name: str) -> dict:
    """``message_to_json`` with the offset message id, the system properties and how the body reads."""
    kind, _ = body_text(msg.body)
    user = msg.user_properties()
    return {
        **message_to_json(msg, broker_name),
        "offset_msg_id": msg.offset_msg_id,
        "reconsume_times": msg.reconsume_times,
        "body_size": len(msg.body),
        "body_format": kind,
        "system_properties": {k: v for k, v in sorted(msg.properties.items()) if k not in user},
    }


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


def body_preview(body: bytes, max_chars: int) -> str:
    """The start of the body on one line: its text, or ``hex:`` and its bytes when it is binary."""
    kind, _ = body_text(body)
    if kind == "hex":
        preview = "hex:" + body[:max_chars].hex()
    else:
        preview = " ".join(body.decode("utf-8").split())
    return preview if len(preview) <= max_chars else preview[: max_chars - 1] + "~"
