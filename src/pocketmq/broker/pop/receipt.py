"""Receipt handles: what a consumer gives back to ack or to change the invisible time of a popped message.

PocketMQ's handle is RocketMQ's ``extraInfo`` (the POP_CK property) with the commit log offset appended, as
RocketMQ 5's proxy does, and the topic in front so that an ack needs nothing else::

    <topic> <start offset> <pop time ms> <invisible time ms> <revive queue id> <retry flag> <broker name>
    <queue id> <queue offset> <phys offset>

separated by single spaces. ``retry_flag`` is 0 for a message popped from its topic and 1 for one popped
from the pop retry topic. A handle is *expired* when ``pop_time_ms + invisible_time_ms <= now_ms``; the
broker still checks it against its CKs (a handle that parses is not proof that it is ours).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pocketmq.common.topic import topic_name_problem

_FIELDS = 10


class InvalidReceiptHandle(ValueError):
    """Garbage, or a handle of another broker or topic: the v2 INVALID_RECEIPT_HANDLE."""


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    topic: str
    start_offset: int  # the CK's start offset
    pop_time_ms: int
    invisible_time_ms: int
    revive_queue_id: int
    retry_flag: int
    broker_name: str
    queue_id: int
    queue_offset: int
    phys_offset: int

    @property
    def revive_time_ms(self) -> int:
        return self.pop_time_ms + self.invisible_time_ms

    def expired(self, now_ms: int) -> bool:
        return self.revive_time_ms <= now_ms

    @property
    def extra_info(self) -> str:
        """RocketMQ's extraInfo of the handle (what remoting ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME name)."""
        return (
            f"{self.start_offset} {self.pop_time_ms} {self.invisible_time_ms} {self.revive_queue_id} "
            f"{self.retry_flag} {self.broker_name} {self.queue_id} {self.queue_offset}"
        )

    def encode(self) -> str:
        return " ".join(
            str(v)
            for v in (
                self.topic,
                self.start_offset,
                self.pop_time_ms,
                self.invisible_time_ms,
                self.revive_queue_id,
                self.retry_flag,
                self.broker_name,
                self.queue_id,
                self.queue_offset,
                self.phys_offset,
            )
        )

    def at_offset(self, queue_offset: int) -> ReceiptHandle:
        """The handle of another message of the same pop (a batch ack names one CK and a set of offsets)."""
        if queue_offset < self.start_offset:
            raise InvalidReceiptHandle("the receipt handle's offset is before its checkpoint")
        return ReceiptHandle(
            self.topic,
            self.start_offset,
            self.pop_time_ms,
            self.invisible_time_ms,
            self.revive_queue_id,
            self.retry_flag,
            self.broker_name,
            self.queue_id,
            queue_offset,
            0,
        )

    def changed(self, pop_time_ms: int, invisible_time_ms: int, revive_queue_id: int) -> ReceiptHandle:
        """The handle after a change of invisible time: the message's own one-message CK (it starts at the
        message's offset) with the new pop time and invisible time."""
        return replace(
            self,
            start_offset=self.queue_offset,
            pop_time_ms=pop_time_ms,
            invisible_time_ms=invisible_time_ms,
            revive_queue_id=revive_queue_id,
        )

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        parts = text.split(" ") if isinstance(text, str) else []
        if len(parts) != _FIELDS:
            raise InvalidReceiptHandle(f"a receipt handle has {_FIELDS} fields, this one {len(parts)}")
        topic, broker_name = parts[0], parts[6]
        if topic_name_problem(topic) or not broker_name:
            raise InvalidReceiptHandle("the receipt handle names no valid topic and broker")
        try:
            numbers = [int(p) for i, p in enumerate(parts) if i not in (0, 6)]
        except ValueError:
            raise InvalidReceiptHandle("the receipt handle has a field that is not a number") from None
        if any(n < 0 for n in numbers) or numbers[4] not in (0, 1):
            raise InvalidReceiptHandle("the receipt handle has an out-of-range field")
        start, pop_time, invisible, revive_qid, retry_flag, queue_id, queue_offset, phys_offset = numbers
        if queue_offset < start:
            raise InvalidReceiptHandle("the receipt handle's offset is before its checkpoint")
        return cls(
            topic, start, pop_time, invisible, revive_qid, retry_flag, broker_name, queue_id, queue_offset, phys_offset
        )
