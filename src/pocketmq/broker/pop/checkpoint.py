"""Pop checkpoints (CK) and ack records: what a pop promised and what consumers acknowledged.

A CK is written for every pop of a (topic, queue): it names the popped messages by queue offset and says
when they come back (``revive_time_ms = pop_time_ms + invisible_time_ms``) unless acked. ACK records name one
acked message (or several: the acks of one CK that arrived in one loop turn) of one CK. Both travel as JSON bodies of messages in the revive
topic ``rmq_sys_REVIVE_LOG_<cluster>``, so they are as durable as any message and survive restarts.

The JSON keeps RocketMQ's one- or two-letter field names (``PopCheckPoint`` / ``AckMsg``), so a RocketMQ
user reading the revive topic recognises them:

    CK   so start offset, d per-message offset deltas from so, n count, pt pop time ms, it invisible time ms,
         bm bitmap of acked messages (bit i = message i), q queue id, t topic, c group, bn broker name,
         rp rewrite count (a *string*, as RocketMQ writes it), plus PocketMQ's rq (revive queue id) and
         ra (reconsume times of this delivery; written when not 0, by staged queues' in-place redeliveries)
    ACK  ao acked offset, aol acked offsets (batch), so, c, t, q, pt, bn: the key of the CK they belong to

A CK and its ACKs are paired by ``ck_key`` (topic, group, queue id, start offset, pop time, broker name).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

MAX_MESSAGES_PER_CK = 32
_MAX_REWRITE_PARSE = 127  # RocketMQ reads an unparsable rp as "many"


def ck_key(topic: str, group: str, queue_id: int, start_offset: int, pop_time_ms: int, broker_name: str) -> str:
    return f"{topic}@{group}@{queue_id}@{start_offset}@{pop_time_ms}@{broker_name}"


@dataclass(frozen=True, slots=True)
class PopCheckpoint:
    topic: str  # the topic popped from: a business topic or its pop retry topic
    group: str
    queue_id: int
    start_offset: int
    offset_deltas: tuple[int, ...]  # queue offset of message i = start_offset + offset_deltas[i]
    pop_time_ms: int
    invisible_time_ms: int
    broker_name: str
    revive_queue_id: int = 0
    ack_bitmap: int = 0
    rewrite_count: int = 0
    attempt: int = 0  # reconsume times of this delivery; staged queues redeliver in place (broker/pop/staged.py)

    def __post_init__(self):
        if not 0 < len(self.offset_deltas) <= MAX_MESSAGES_PER_CK:
            raise ValueError(f"a CK holds 1..{MAX_MESSAGES_PER_CK} messages, not {len(self.offset_deltas)}")
        if self.invisible_time_ms < 0 or self.start_offset < 0:
            raise ValueError("a CK's offsets and invisible time are not negative")

    @classmethod
    def of_offsets(
        cls,
        topic: str,
        group: str,
        queue_id: int,
        queue_offsets: list[int],
        pop_time_ms: int,
        invisible_time_ms: int,
        broker_name: str,
        revive_queue_id: int = 0,
        attempt: int = 0,
    ) -> PopCheckpoint:
        start = queue_offsets[0]
        return cls(
            topic,
            group,
            queue_id,
            start,
            tuple(o - start for o in queue_offsets),
            pop_time_ms,
            invisible_time_ms,
            broker_name,
            revive_queue_id,
            attempt=attempt,
        )

    @property
    def key(self) -> str:
        return ck_key(self.topic, self.group, self.queue_id, self.start_offset, self.pop_time_ms, self.broker_name)

    @property
    def count(self) -> int:
        return len(self.offset_deltas)

    @property
    def revive_time_ms(self) -> int:
        return self.pop_time_ms + self.invisible_time_ms

    @property
    def queue_offsets(self) -> list[int]:
        return [self.start_offset + d for d in self.offset_deltas]

    def index_of(self, queue_offset: int) -> int | None:
        delta = queue_offset - self.start_offset
        try:
            return self.offset_deltas.index(delta)
        except ValueError:
            return None

    def is_acked(self, index: int) -> bool:
        return bool(self.ack_bitmap >> index & 1)

    @property
    def all_acked(self) -> bool:
        return self.ack_bitmap == (1 << self.count) - 1

    def ack_of(self, queue_offsets) -> AckRecord:
        """The ACK record of some of this CK's messages."""
        return AckRecord(
            self.topic,
            self.group,
            self.queue_id,
            self.start_offset,
            self.pop_time_ms,
            self.broker_name,
            tuple(queue_offsets),
        )

    def unacked_offsets(self) -> list[int]:
        return [self.start_offset + d for i, d in enumerate(self.offset_deltas) if not self.is_acked(i)]

    def with_acks(self, queue_offsets) -> PopCheckpoint:
        """This CK with the messages at ``queue_offsets`` marked acked; offsets not in it are ignored."""
        bitmap = self.ack_bitmap
        for offset in queue_offsets:
            index = self.index_of(offset)
            if index is not None:
                bitmap |= 1 << index
        return self if bitmap == self.ack_bitmap else replace(self, ack_bitmap=bitmap)

    def single(self, queue_offset: int, *, invisible_time_ms: int, rewrite_count: int) -> PopCheckpoint:
        """A one-message CK for ``queue_offset`` with this CK's pop time (a rewrite keeps the pop time)."""
        return PopCheckpoint(
            self.topic,
            self.group,
            self.queue_id,
            queue_offset,
            (0,),
            self.pop_time_ms,
            invisible_time_ms,
            self.broker_name,
            self.revive_queue_id,
            0,
            rewrite_count,
        )

    def to_json(self) -> bytes:
        obj = {
            "so": self.start_offset,
            "d": list(self.offset_deltas),
            "n": self.count,
            "pt": self.pop_time_ms,
            "it": self.invisible_time_ms,
            "bm": self.ack_bitmap,
            "q": self.queue_id,
            "t": self.topic,
            "c": self.group,
            "bn": self.broker_name,
            "rp": str(self.rewrite_count),
            "rq": self.revive_queue_id,
        }
        if self.attempt:
            obj["ra"] = self.attempt
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> PopCheckpoint:
        obj = json.loads(data)
        start = int(obj["so"])
        deltas = obj.get("d") or list(range(int(obj["n"])))  # RocketMQ's old form: so + i
        return cls(
            topic=str(obj["t"]),
            group=str(obj["c"]),
            queue_id=int(obj["q"]),
            start_offset=start,
            offset_deltas=tuple(int(d) for d in deltas),
            pop_time_ms=int(obj["pt"]),
            invisible_time_ms=int(obj["it"]),
            broker_name=str(obj.get("bn") or ""),
            revive_queue_id=int(obj.get("rq", 0)),
            ack_bitmap=int(obj.get("bm", 0)),
            rewrite_count=_parse_rewrite_count(obj.get("rp")),
            attempt=int(obj.get("ra", 0)),
        )


def _parse_rewrite_count(value) -> int:
    if value is None:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return _MAX_REWRITE_PARSE


@dataclass(frozen=True, slots=True)
class AckRecord:
    """Acks of some messages of one CK (one offset for an ack, several for a batch ack)."""

    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time_ms: int
    broker_name: str
    acked_offsets: tuple[int, ...] = field(default=())

    @property
    def ck_key(self) -> str:
        return ck_key(self.topic, self.group, self.queue_id, self.start_offset, self.pop_time_ms, self.broker_name)

    def to_json(self) -> bytes:
        obj = {
            "so": self.start_offset,
            "c": self.group,
            "t": self.topic,
            "q": self.queue_id,
            "pt": self.pop_time_ms,
            "bn": self.broker_name,
        }
        if len(self.acked_offsets) == 1:
            obj["ao"] = self.acked_offsets[0]
        else:
            obj["aol"] = list(self.acked_offsets)
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes | str, default_broker_name: str = "") -> AckRecord:
        """``default_broker_name`` stands in for a missing ``bn`` (RocketMQ #8981: the broker's own name)."""
        obj = json.loads(data)
        offsets = obj.get("aol")
        acked = tuple(int(o) for o in offsets) if offsets is not None else (int(obj["ao"]),)
        return cls(
            topic=str(obj["t"]),
            group=str(obj["c"]),
            queue_id=int(obj["q"]),
            start_offset=int(obj["so"]),
            pop_time_ms=int(obj["pt"]),
            broker_name=str(obj.get("bn") or default_broker_name),
            acked_offsets=acked,
        )
