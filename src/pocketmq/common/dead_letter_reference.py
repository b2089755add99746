"""A dead letter that *references* a message instead of holding it. Pure.

POP revive writes one into ``%DLQ%<group>`` when a CK ends (its rewrite backoff is used up) for a message it
could not read, typically because the message lives on another broker group that stayed unreachable: nothing
is lost silently, and ``pocketmq dlq resend`` can still fetch the real message once its broker is back.

The entry's body is the JSON below; the property ``PMQ_DLQ_REFERENCE`` marks it (so a business message that
happens to carry such a JSON body is never mistaken for one)::

    {"topic": ..., "queueId": ..., "queueOffset": ..., "broker": ..., "group": ..., "reason": ...,
     "description": ..., "rewriteCount": ...}

``topic`` is the topic the CK named (a business topic or its pop retry topic), ``broker`` the broker group
that stores the message, ``reason`` the last read's ``ReadResult.reason`` and ``rewriteCount`` how many times
the CK was rewritten before it ended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

REFERENCE_PROPERTY = "PMQ_DLQ_REFERENCE"  # "true" on a reference entry
ORIGIN_BROKER_PROPERTY = "PMQ_DLQ_ORIGIN_BROKER"
REWRITE_COUNT_PROPERTY = "PMQ_DLQ_REWRITE_COUNT"


@dataclass(frozen=True, slots=True)
class DeadLetterReference:
    topic: str
    queue_id: int
    queue_offset: int
    broker_name: str
    group: str
    reason: str
    description: str = ""
    rewrite_count: int = 0

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "topic": self.topic,
                "queueId": self.queue_id,
                "queueOffset": self.queue_offset,
                "broker": self.broker_name,
                "group": self.group,
                "reason": self.reason,
                "description": self.description,
                "rewriteCount": self.rewrite_count,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> DeadLetterReference:
        """ValueError when ``data`` is not a reference body."""
        try:
            obj = json.loads(data)
            return cls(
                topic=str(obj["topic"]),
                queue_id=int(obj["queueId"]),
                queue_offset=int(obj["queueOffset"]),
                broker_name=str(obj["broker"]),
                group=str(obj["group"]),
                reason=str(obj["reason"]),
                description=str(obj.get("description", "")),
                rewrite_count=int(obj.get("rewriteCount", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:  # JSONDecodeError is a ValueError
            raise ValueError(f"not a dead-letter reference: {exc}") from exc

    @classmethod
    def of_message(cls, properties: dict[str, str], body: bytes) -> DeadLetterReference | None:
        """The reference a DLQ entry holds, or None for an entry that holds a real message."""
        if properties.get(REFERENCE_PROPERTY) != "true":
            return None
        return cls.from_json(body)

    def properties(self) -> dict[str, str]:
        """What marks the entry, besides the usual dead-letter properties."""
        return {
            REFERENCE_PROPERTY: "true",
            ORIGIN_BROKER_PROPERTY: self.broker_name,
            REWRITE_COUNT_PROPERTY: str(self.rewrite_count),
        }

    def describe(self) -> str:
        """One line for listings: where the message is and why it could not be read."""
        return (
            f"{self.topic}/{self.queue_id}@{self.queue_offset} on {self.broker_name}: {self.reason} "
            f"after {self.rewrite_count} rewrite(s)"
        )
