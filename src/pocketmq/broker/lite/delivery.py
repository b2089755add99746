"""Ordered delivery of lite topics to consumer groups: per (group, parent, lite topic), which messages are in
flight and up to where the group is done. A pure core: times come in as ``now_ms``.

A lite topic is consumed in order by each group (one queue, as RocketMQ's lite topics): while any of its
messages is in flight (received, not acked, invisible time not over) the group gets no newer one of it. When an
invisible time ends, the unacked messages come again with their attempt count raised. ``committed`` is the
parent offset below which the group is done (the first in-flight offset, else one past the last delivered):
it is what survives a restart (``LiteOffsets``); in-flight state does not, so a restart redelivers what was
in flight, as a revive would.

Receipt handles: ``L <token> <parent queue offset> <parent> <lite topic>``. The token is random per delivery,
so a handle cannot be guessed, and one from before a redelivery no longer acks (INVALID_RECEIPT_HANDLE).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from pocketmq.broker.lite.index import LiteQueue
from pocketmq.common.errors import InvalidReceiptHandleError

HANDLE_PREFIX = "L "


@dataclass(frozen=True, slots=True)
class LiteReceipt:
    token: str
    queue_offset: int
    parent: str
    lite_topic: str

    def encode(self) -> str:
        return f"{HANDLE_PREFIX}{self.token} {self.queue_offset} {self.parent} {self.lite_topic}"

    @classmethod
    def decode(cls, text: str) -> LiteReceipt:
        parts = text.split(" ")
        if len(parts) != 5 or parts[0] != HANDLE_PREFIX.strip() or not parts[2].isdigit():
            raise InvalidReceiptHandleError(f"not a lite receipt handle: {text!r}")
        return cls(parts[1], int(parts[2]), parts[3], parts[4])


def is_lite_handle(text: str) -> bool:
    return text.startswith(HANDLE_PREFIX)


@dataclass(slots=True)
class _InFlight:
    token: str
    deadline_ms: int
    attempt: int  # 1 on the first delivery


@dataclass(slots=True)
class Cursor:
    """One group's progress on one lite topic."""

    delivered_to: int  # one past the last parent offset handed out
    in_flight: dict[int, _InFlight] = field(default_factory=dict)

    @property
    def committed(self) -> int:
        return min(self.in_flight) if self.in_flight else self.delivered_to


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message to hand out: where it is and its receipt."""

    receipt: LiteReceipt
    attempt: int


class LiteDeliveries:
    """The cursors of every (group, parent, lite topic) a consumer read."""

    def __init__(self) -> None:
        self._cursors: dict[tuple[str, str, str], Cursor] = {}

    def cursor(self, group: str, parent: str, lite_topic: str, start: int) -> Cursor:
        key = (group, parent, lite_topic)
        cursor = self._cursors.get(key)
        if cursor is None:
            cursor = self._cursors[key] = Cursor(start)
        return cursor

    def existing(self, group: str, parent: str, lite_topic: str) -> Cursor | None:
        return self._cursors.get((group, parent, lite_topic))

    @staticmethod
    def take(
        parent: str, lite_topic: str, cursor: Cursor, queue: LiteQueue, max_count: int, now_ms: int, invisible_ms: int
    ) -> list[Delivery]:
        """What ``cursor`` hands out now (at most ``max_count``): its in-flight messages whose invisible time
        ended (again, attempt + 1) or, when none is in flight, the next messages of ``queue``."""
        deadline = now_ms + invisible_ms
        if cursor.in_flight:
            due = sorted(o for o, f in cursor.in_flight.items() if f.deadline_ms <= now_ms)[:max_count]
            out = []
            for offset in due:
                entry = cursor.in_flight[offset]
                entry.token, entry.deadline_ms, entry.attempt = secrets.token_hex(6), deadline, entry.attempt + 1
                out.append(Delivery(LiteReceipt(entry.token, offset, parent, lite_topic), entry.attempt))
            return out
        out = []
        for offset in queue.offsets_from(cursor.delivered_to, max_count):
            token = secrets.token_hex(6)
            cursor.in_flight[offset] = _InFlight(token, deadline, 1)
            cursor.delivered_to = offset + 1
            out.append(Delivery(LiteReceipt(token, offset, parent, lite_topic), 1))
        return out

    def _entry(self, group: str, receipt: LiteReceipt) -> tuple[Cursor, _InFlight]:
        cursor = self._cursors.get((group, receipt.parent, receipt.lite_topic))
        entry = cursor.in_flight.get(receipt.queue_offset) if cursor is not None else None
        if cursor is None or entry is None or not secrets.compare_digest(entry.token, receipt.token):
            raise InvalidReceiptHandleError("the lite receipt handle is stale (acked or delivered again) or unknown")
        return cursor, entry

    def ack(self, group: str, receipt: LiteReceipt) -> None:
        cursor, _ = self._entry(group, receipt)
        del cursor.in_flight[receipt.queue_offset]

    def change_invisible(self, group: str, receipt: LiteReceipt, now_ms: int, invisible_ms: int) -> LiteReceipt:
        _, entry = self._entry(group, receipt)
        entry.token, entry.deadline_ms = secrets.token_hex(6), now_ms + invisible_ms
        return LiteReceipt(entry.token, receipt.queue_offset, receipt.parent, receipt.lite_topic)

    def attempt_of(self, group: str, receipt: LiteReceipt) -> int:
        return self._entry(group, receipt)[1].attempt

    def next_deadline_ms(self, group: str, parent: str, lite_topics) -> int | None:
        """The earliest invisible-time end among ``group``'s in-flight messages of ``lite_topics``."""
        deadlines = [
            f.deadline_ms
            for lite in lite_topics
            if (cursor := self._cursors.get((group, parent, lite))) is not None
            for f in cursor.in_flight.values()
        ]
        return min(deadlines) if deadlines else None

    def committed(self) -> dict[tuple[str, str, str], int]:
        return {key: cursor.committed for key, cursor in self._cursors.items()}

    def restore(self, committed: dict[tuple[str, str, str], int]) -> None:
        for key, offset in committed.items():
            self._cursors[key] = Cursor(offset)

    def forget_lite(self, parent: str, lite_topic: str) -> None:
        for key in [k for k in self._cursors if k[1] == parent and k[2] == lite_topic]:
            del self._cursors[key]
