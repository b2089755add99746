"""Messages as the layers above the store see them.

``Message`` is what a producer sends; ``MessageExt`` is a stored message as it comes back from the broker,
with where it is (queue id, queue offset, phys offset) and when and by whom it was born and stored.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from pocketmq.common import properties as props

# sys_flag bits (RocketMQ MessageSysFlag)
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_PREPARED = 0x4
SYSFLAG_TRANSACTION_COMMIT = 0x8
SYSFLAG_TRANSACTION_ROLLBACK = 0xC
SYSFLAG_BORNHOST_V6 = 0x1 << 4
SYSFLAG_STOREHOST_V6 = 0x1 << 5


@dataclass(slots=True)
class Message:
    """A message as sent: topic, body, user and system properties, and RocketMQ's int ``flag``."""

    topic: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0

    @classmethod
    def create(
        cls,
        topic: str,
        body: bytes | str,
        *,
        tags: str | None = None,
        keys: list[str] | str | None = None,
        properties: dict[str, str] | None = None,
        message_group: str | None = None,
        priority: int | None = None,
        lite_topic: str | None = None,
        flag: int = 0,
    ):
        """A message with its common fields set by name; a ``str`` body is encoded as UTF-8."""
        msg = cls(
            topic=topic,
            body=body.encode() if isinstance(body, str) else bytes(body),
            properties=dict(properties or {}),
            flag=flag,
        )
        msg.tags = tags
        msg.keys = keys
        if message_group is not None:
            msg.properties[props.SHARDING_KEY] = message_group
        msg.priority = priority
        if lite_topic is not None:
            msg.properties[props.LITE_TOPIC] = lite_topic
        return msg

    @property
    def tags(self) -> str | None:
        return self.properties.get(props.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        _set_or_clear(self.properties, props.TAGS, value)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(props.KEYS, "")
        return [k for k in raw.split(" ") if k]

    @keys.setter
    def keys(self, value: list[str] | str | None) -> None:
        if isinstance(value, str):
            value = [value]
        _set_or_clear(self.properties, props.KEYS, " ".join(value) if value else None)

    @property
    def uniq_key(self) -> str | None:
        """The producer-assigned message id (RocketMQ's UNIQ_KEY property)."""
        return self.properties.get(props.UNIQ_KEY)

    @property
    def message_group(self) -> str | None:
        return self.properties.get(props.SHARDING_KEY)

    @property
    def priority(self) -> int | None:
        """A priority message's level (``_SYS_MSG_PRIORITY_``, higher first), None when it has none or it is not
        a non-negative integer."""
        text = self.properties.get(props.PRIORITY)
        return int(text) if text is not None and text.isascii() and text.isdigit() else None

    @priority.setter
    def priority(self, value: int | None) -> None:
        if value is not None and value < 0:
            raise ValueError(f"priority {value} is negative")
        _set_or_clear(self.properties, props.PRIORITY, None if value is None else str(value))

    @property
    def lite_topic(self) -> str | None:
        """The lite topic of a message to a LITE parent topic (docs/lite.md)."""
        return self.properties.get(props.LITE_TOPIC)

    @property
    def delay_level(self) -> int:
        try:
            return int(self.properties.get(props.DELAY_TIME_LEVEL, "0"))
        except ValueError:
            return 0

    def user_properties(self) -> dict[str, str]:
        return {k: v for k, v in self.properties.items() if k not in props.SYSTEM_PROPERTY_NAMES}


@dataclass(slots=True)
class MessageExt(Message):
    """A stored message: where it sits and its store metadata. Hosts are ``(ipv4, port)`` pairs."""

    queue_id: int = 0
    queue_offset: int = 0
    phys_offset: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_timestamp_ms: int = 0
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size: int = 0

    @property
    def offset_msg_id(self) -> str:
        """The broker-side id: store host IPv4 + port + phys offset, 32 upper-case hex digits."""
        return make_offset_msg_id(self.store_host, self.phys_offset)

    @property
    def msg_id(self) -> str:
        """The id users see: the producer's UNIQ_KEY when present, else the broker-side id."""
        return self.uniq_key or self.offset_msg_id

    def decompressed_body(self) -> bytes:
        """The body as the producer wrote it (4.x clients zlib-compress bodies of 4 KiB and more)."""
        if self.sys_flag & SYSFLAG_COMPRESSED:
            return zlib.decompress(self.body)
        return self.body

    def decompress(self) -> MessageExt:
        """This message with its body as the producer wrote it, no longer marked compressed (it is shown)."""
        if self.sys_flag & SYSFLAG_COMPRESSED:
            self.body = zlib.decompress(self.body)
            self.sys_flag &= ~SYSFLAG_COMPRESSED
        return self


def make_offset_msg_id(store_host: tuple[str, int], phys_offset: int) -> str:
    ip = bytes(int(part) for part in store_host[0].split("."))
    return (ip + store_host[1].to_bytes(4, "big") + phys_offset.to_bytes(8, "big", signed=True)).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[tuple[str, int], int]:
    """Inverse of ``make_offset_msg_id``; raises ValueError on anything that is not 32 hex digits."""
    if len(msg_id) != 32:
        raise ValueError(f"offset message id must be 32 hex digits, got {len(msg_id)} characters")
    raw = bytes.fromhex(msg_id)
    host = ".".join(str(b) for b in raw[:4])
    port = int.from_bytes(raw[4:8], "big")
    return (host, port), int.from_bytes(raw[8:16], "big", signed=True)


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}/{self.queue_id}"


def _set_or_clear(properties: dict[str, str], name: str, value: str | None) -> None:
    if value is None or value == "":
        properties.pop(name, None)
    else:
        properties[name] = value
