"""RocketMQ's tables keyed by message queue, as fastjson writes and reads them.

Java's ``Map<MessageQueue, V>`` (a reset's ``offsetTable``, a consumer's running info ``mqTable``) goes on the
wire with the queue object as the key: ``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}``, which
is not JSON. PocketMQ writes such tables that way where RocketMQ's own peers read them (a Java push consumer
told to reset its offsets, ``mqadmin`` reading the answer), and reads them from them (a Java client's running
info).

``loads`` parses JSON in which an object's keys may be any value: an object whose keys are all strings is a
dict, one with other keys a list of ``{"key": k, "value": v}``. ``queue_entries`` turns a queue-keyed table in
either that form or PocketMQ's list of ``{topic, brokerName, queueId, ...}`` into the list form.
"""

from __future__ import annotations

import json
from typing import Any

from pocketmq.common.message import MessageQueue
from pocketmq.protocol.remoting_headers import MAX_JSON_BODY_DEPTH

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


def dumps_queue_table(table: dict[MessageQueue, Any]) -> str:
    """``table`` as fastjson writes a ``Map<MessageQueue, V>`` (its fields sorted by name, as fastjson sorts them)."""
    items = (
        json.dumps({"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}, separators=(",", ":"))
        + ":"
        + json.dumps(value, separators=(",", ":"))
        for mq, value in sorted(table.items())
    )
    return "{" + ",".join(items) + "}"


def dumps_with_queue_tables(obj: dict, tables: dict[str, dict[MessageQueue, Any]]) -> bytes:
    """The JSON object ``obj`` with the queue-keyed ``tables`` as more fields, written as fastjson writes them."""
    fields = [json.dumps(obj, separators=(",", ":"))[1:-1]] if obj else []
    fields += [f"{json.dumps(name)}:{dumps_queue_table(table)}" for name, table in tables.items()]
    return ("{" + ",".join(fields) + "}").encode()


def queue_entries(table: Any, value_name: str) -> list[dict]:
    """A queue-keyed table as ``[{topic, brokerName, queueId, ...}]``: a value that is an object is merged in,
    any other value is named ``value_name``. ValueError for a table of neither form."""
    if isinstance(table, dict) and not table:
        return []
    if not isinstance(table, list):
        raise ValueError(f"a message queue table is a list, not {type(table).__name__}")
    entries = []
    for item in table:
        if not isinstance(item, dict):
            raise ValueError("a message queue table entry is an object")
        if "key" in item and isinstance(item["key"], dict):  # fastjson's form, as ``loads`` returns it
            key, value = item["key"], item.get("value")
            entry = {"topic": key["topic"], "brokerName": key["brokerName"], "queueId": int(key["queueId"])}
            entry.update(value if isinstance(value, dict) else {value_name: value})
            entries.append(entry)
        else:
            entries.append(item)
    return entries


def loads(data: bytes | str) -> Any:
    """Parse ``data`` as JSON whose object keys may be any value (module docstring); ValueError if it is not."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    value, pos = _value(text, _skip(text, 0), 0)
    if _skip(text, pos) != len(text):
        raise ValueError(f"extra data at character {pos}")
    return value


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def _expect(text: str, pos: int, char: str) -> int:
    if not text.startswith(char, pos):
        raise ValueError(f"expected {char!r} at character {pos}")
    return pos + 1


def _value(text: str, pos: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_JSON_BODY_DEPTH:  # a peer's body must not exhaust the stack
        raise ValueError(f"nested deeper than {MAX_JSON_BODY_DEPTH}")
    if text.startswith("{", pos):
        return _object(text, _skip(text, pos + 1), depth + 1)
    if text.startswith("[", pos):
        return _array(text, _skip(text, pos + 1), depth + 1)
    return _DECODER.raw_decode(text, pos)


def _object(text: str, pos: int, depth: int) -> tuple[Any, int]:
    pairs = []
    if text.startswith("}", pos):
        return {}, pos + 1
    while True:
        key, pos = _value(text, pos, depth)
        pos = _skip(text, _expect(text, _skip(text, pos), ":"))
        value, pos = _value(text, pos, depth)
        pairs.append((key, value))
        pos = _skip(text, pos)
        if not text.startswith(",", pos):
            break
        pos = _skip(text, pos + 1)
    pos = _expect(text, pos, "}")
    if all(isinstance(key, str) for key, _ in pairs):
        return dict(pairs), pos
    return [{"key": key, "value": value} for key, value in pairs], pos


def _array(text: str, pos: int, depth: int) -> tuple[list, int]:
    items: list = []
    if text.startswith("]", pos):
        return items, pos + 1
    while True:
        item, pos = _value(text, pos, depth)
        items.append(item)
        pos = _skip(text, pos)
        if not text.startswith(",", pos):
            break
        pos = _skip(text, pos + 1)
    return items, _expect(text, pos, "]")
