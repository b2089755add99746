"""Stored messages as JSON, for scripts (``--json``) and the web console's API.

``message_to_json``: ``message_id`` (the producer's UNIQ_KEY, else the broker's id), ``topic``, ``broker``,
``queue_id``, ``queue_offset``, ``tag``, ``keys`` (a list), ``properties`` (user properties only),
``born_timestamp_ms``, ``store_timestamp_ms``, ``body``: the text when the body is UTF-8, else its base64 with
``"body_encoding": "base64"``. ``message_detail_json`` adds the offset id, the system properties and how the
body reads (``body_text``: JSON pretty-printed, text, or a hex dump when it is binary).
"""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime

from pocketmq.common.message import MessageExt

HEX_BYTES_PER_LINE = 16
# Searched and translated in C: a body is up to megabytes, and the console renders it on a broker's event loop.
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PRINTABLE = bytes(b if 32 <= b < 127 else ord(".") for b in range(256))


def body_format(body: bytes) -> str:
    """How ``body`` reads: ``json``, ``text``, or ``hex`` when it is binary. Text with control characters other
    than line breaks and tabs is binary too: printed as it is, it would move a terminal's cursor or ring its
    bell."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "hex"
    if _CONTROL_CHARACTERS.search(text):
        return "hex"
    try:
        json.loads(text)
    except ValueError:
        return "text"
    return "json"


def body_text(body: bytes) -> tuple[str, str]:
    """(``body_format``, and the body so rendered: JSON pretty-printed, the text, or a hex dump)."""
    kind = body_format(body)
    if kind == "hex":
        return kind, hex_dump(body)
    text = body.decode("utf-8")
    return kind, json.dumps(json.loads(text), indent=2, ensure_ascii=False) if kind == "json" else text


def hex_dump(data: bytes) -> str:
    """Offset, hex bytes and the printable ASCII of each line of ``HEX_BYTES_PER_LINE`` bytes."""
    lines = []
    for start in range(0, len(data), HEX_BYTES_PER_LINE):
        chunk = data[start : start + HEX_BYTES_PER_LINE]
        shown = chunk.translate(_PRINTABLE).decode("ascii")
        lines.append(f"{start:08x}  {chunk.hex(' '):<{HEX_BYTES_PER_LINE * 3 - 1}}  {shown}")
    return "\n".join(lines)


def iso_time(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def message_detail_json(msg: MessageExt, broker_name: str) -> dict:
    """``message_to_json`` with the offset message id, the system properties and how the body reads."""
    user = msg.user_properties()
    return {
        **message_to_json(msg, broker_name),
        "offset_msg_id": msg.offset_msg_id,
        "reconsume_times": msg.reconsume_times,
        "body_size": len(msg.body),
        "body_format": body_format(msg.body),
        "system_properties": {k: v for k, v in sorted(msg.properties.items()) if k not in user},
    }


def body_preview(body: bytes, max_chars: int) -> str:
    """The start of the body on one line: its text, or ``hex:`` and its bytes when it is binary."""
    if body_format(body) == "hex":
        preview = "hex:" + body[:max_chars].hex()
    else:
        preview = " ".join(body.decode("utf-8").split())
    return preview if len(preview) <= max_chars else preview[: max_chars - 1] + "~"


def body_fields(body: bytes) -> dict:
    """``{"body": text}`` when ``body`` is UTF-8, else its base64 with ``"body_encoding": "base64"``."""
    try:
        return {"body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body": base64.b64encode(body).decode("ascii"), "body_encoding": "base64"}


def message_to_json(msg: MessageExt, broker_name: str | None = None) -> dict:
    return {
        "message_id": msg.msg_id,
        "topic": msg.topic,
        "broker": broker_name,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "tag": msg.tags,
        "keys": msg.keys,
        "properties": msg.user_properties(),
        "born_timestamp_ms": msg.born_timestamp_ms,
        "store_timestamp_ms": msg.store_timestamp_ms,
        **body_fields(msg.body),
    }
