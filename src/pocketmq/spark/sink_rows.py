"""Pure logic of the ``pocketmq`` sink: input columns, rows turned into messages, idempotency keys, placement.

Input columns (any others fail the query at start, naming them):

| column          | type                              | meaning                                              |
|-----------------|-----------------------------------|------------------------------------------------------|
| `body`          | binary or string (required)       | the message body; a string is encoded as UTF-8       |
| `topic`         | string                            | destination; the sink option ``topic`` overrides it  |
| `keys`          | string (space-separated) or array | RocketMQ's KEYS (indexed by the broker)              |
| `tags`          | string                            | the message's tag                                    |
| `message_group` | string                            | FIFO group: same group, same queue, in order         |
| `properties`    | map<string,string>                | user properties (system names are refused)           |

Idempotency key (the message's UNIQ_KEY, 32 upper-case hex digits like any RocketMQ message id)::

    blake2b-128( write_id | batch_id | partition_id | content_digest | occurrence )

``write_id`` is the streaming query's id (stable across restarts) or, for a batch write, an id drawn once
when the write is planned; ``content_digest`` covers everything the message carries (topic, body, keys,
tags, group, properties) and ``occurrence`` counts earlier identical rows in the same partition. A replayed
micro-batch or a retried task produces the same keys for the same rows *whatever their order inside the
partition* (a shuffle may deliver them in another order), so the broker's idempotent send (property
``PMQ_IDEMPOTENT=true``, see broker/messages.py) stores each row once.

Placement: the broker de-duplicates per (topic, key) in its own store, so a replay must reach the same
broker. The queue is a pure function of the message and the topic's writable queues: the message group's
Java hash (the same queue any RocketMQ producer picks for that group), else the key's leading bits.
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pocketmq.client.queue_select import java_string_hash
from pocketmq.common import properties as props
from pocketmq.common.errors import IllegalMessageError
from pocketmq.common.message import Message
from pocketmq.common.topic import topic_name_problem
from pocketmq.spark.options import OptionError

IDEMPOTENT_PROPERTY = props.IDEMPOTENT  # the broker's switch for UNIQ_KEY de-duplication (broker/messages.py)
SINK_COLUMNS = ("body", "topic", "keys", "tags", "message_group", "properties")
_STRING_TYPES = ("string",)
_COLUMN_TYPES = {  # Spark simpleString() forms accepted per column
    "body": ("binary", "string"),
    "topic": _STRING_TYPES,
    "keys": ("string", "array<string>"),
    "tags": _STRING_TYPES,
    "message_group": _STRING_TYPES,
    "properties": ("map<string,string>",),
}


@dataclass(frozen=True, slots=True)
class SinkLayout:
    """Which sink columns the input has (their positions in a row), checked once on the driver."""

    columns: tuple[str, ...]
    default_topic: str | None  # the sink option ``topic``: overrides the column

    def index(self, column: str) -> int | None:
        return self.columns.index(column) if column in self.columns else None


def sink_layout(column_types: Sequence[tuple[str, str]], default_topic: str | None) -> SinkLayout:
    """Check the input's (name, Spark simpleString type) pairs; fails naming the offending column."""
    names = [name for name, _ in column_types]
    unknown = [n for n in names if n not in SINK_COLUMNS]
    if unknown:
        raise OptionError(
            "columns",
            f"unknown input column(s) {', '.join(unknown)}: the pocketmq sink takes "
            f"{', '.join(SINK_COLUMNS)} (select or rename columns first)",
        )
    if "body" not in names:
        raise OptionError("columns", "the input has no 'body' column (binary or string), which the sink needs")
    for name, type_text in column_types:
        if type_text not in _COLUMN_TYPES[name]:
            raise OptionError(
                "columns", f"column {name!r} is {type_text}; the sink takes {' or '.join(_COLUMN_TYPES[name])}"
            )
    if default_topic is None and "topic" not in names:
        raise OptionError("topic", "required: give the option 'topic' or a 'topic' column")
    return SinkLayout(tuple(names), default_topic)


def row_to_message(row: Sequence[Any], layout: SinkLayout) -> Message:
    """One input row (values in ``layout.columns`` order) as a message; raises IllegalMessageError."""
    values = dict(zip(layout.columns, row))
    topic = layout.default_topic or values.get("topic")
    if not topic:
        raise IllegalMessageError("a row has no topic (null 'topic' column and no 'topic' option)")
    if problem := topic_name_problem(topic):
        raise IllegalMessageError(f"row topic: {problem}")
    body = values["body"]
    if body is None:
        raise IllegalMessageError(f"a row for topic {topic!r} has a null body")
    properties = dict(values.get("properties") or {})
    reserved = sorted(name for name in properties if name in props.SYSTEM_PROPERTY_NAMES or name == IDEMPOTENT_PROPERTY)
    if reserved:
        raise IllegalMessageError(
            f"property name(s) {', '.join(reserved)} are reserved; use the matching "
            f"column (keys, tags, message_group) or another name"
        )
    keys = values.get("keys")
    return Message.create(
        topic,
        body if isinstance(body, str) else bytes(body),
        tags=values.get("tags") or None,
        keys=list(keys) if isinstance(keys, (list, tuple)) else (keys or None),
        properties=properties,
        message_group=values.get("message_group") or None,
    )


def content_digest(message: Message) -> bytes:
    """A digest of everything a message carries (not its UNIQ_KEY); fields are length-prefixed."""
    digest = hashlib.blake2b(digest_size=16)
    fields = [message.topic.encode(), message.body]
    fields += [
        f"{name}\x01{value}".encode()
        for name, value in sorted(message.properties.items())
        if name not in (props.UNIQ_KEY, IDEMPOTENT_PROPERTY)
    ]
    for data in fields:
        digest.update(struct.pack(">I", len(data)))
        digest.update(data)
    return digest.digest()


class KeyMinter:
    """Idempotency keys of one task (one write id, batch id and partition); see the module docstring."""

    def __init__(self, write_id: str, batch_id: int, partition_id: int):
        self._prefix = f"{write_id}|{batch_id}|{partition_id}|".encode()
        self._seen: Counter[bytes] = Counter()

    def key(self, message: Message) -> str:
        digest = content_digest(message)
        occurrence = self._seen[digest]
        self._seen[digest] += 1
        return (
            hashlib.blake2b(self._prefix + digest + struct.pack(">Q", occurrence), digest_size=16).hexdigest().upper()
        )

    def stamp(self, message: Message) -> Message:
        """Set the message's UNIQ_KEY and ask the broker to de-duplicate on it."""
        message.properties[props.UNIQ_KEY] = self.key(message)
        message.properties[IDEMPOTENT_PROPERTY] = "true"
        return message


def queue_index(message: Message, queue_count: int, *, sequence: int) -> int:
    """Index of the message's queue among its topic's ``queue_count`` writable queues (in route order):
    the group's queue, else from the idempotency key, else (no key: idempotence off) round robin by
    ``sequence``."""
    if queue_count <= 0:
        raise IllegalMessageError(f"topic {message.topic!r} has no writable queue")
    group = message.message_group
    if group is not None:
        return abs(java_string_hash(group)) % queue_count
    if message.properties.get(IDEMPOTENT_PROPERTY) == "true":
        return int(message.properties[props.UNIQ_KEY][:8], 16) % queue_count
    return sequence % queue_count


def chunk_messages(messages: Sequence[Message], *, max_count: int, max_bytes: int) -> list[list[Message]]:
    """Consecutive runs of ``messages`` that fit one batch send (order kept, never an empty run)."""
    chunks: list[list[Message]] = []
    current: list[Message] = []
    size = 0
    for message in messages:
        cost = message_wire_bytes(message)
        if current and (len(current) >= max_count or size + cost > max_bytes):
            chunks.append(current)
            current, size = [], 0
        current.append(message)
        size += cost
    if current:
        chunks.append(current)
    return chunks


def message_wire_bytes(message: Message) -> int:
    """A message's size inside a batch body: RocketMQ's batch record is 22 bytes of header fields (total
    size, magic, body CRC, flag, body length, properties length) around the body and the properties."""
    return 22 + len(message.body) + len(props.encode_properties(message.properties).encode())
