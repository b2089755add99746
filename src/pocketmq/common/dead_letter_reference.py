"""A dead letter that *references* a message instead of holding it. Pure.

POP revive writes one when a CK ends (its rewrite backoff is used up) for a message it could not read,
typically because the message lives on another broker group that stayed unreachable: nothing is lost
silently. References are kept apart from the dead letters consumers read: they go to the system topic
``REFERENCE_TOPIC`` (one queue on every broker), never to ``%DLQ%<group>``, so a ``%DLQ%<group>`` consumer only
ever gets real messages. The broker keeps trying to read the message (broker/pop/reference_resolver.py) and,
once it can, writes the real dead letter into ``%DLQ%<group>`` and closes the reference; ``pocketmq dlq list``
shows the references still open beside the group's dead letters, with their reason.

The reference topic is a log of events, each with the reference's JSON body below and the property
``PMQ_DLQ_REFERENCE_STATE``: ``open`` (revive wrote it), then ``resolved`` (the real dead letter is in
``%DLQ%<group>``), ``gone`` (the message no longer exists: retention, a deleted topic) or ``refused`` (the
dead letter can never be written). ``fold`` replays it. The property ``PMQ_DLQ_REFERENCE`` marks an entry (so
a business message that happens to carry such a JSON body is never mistaken for one)::

    {"topic": ..., "queueId": ..., "queueOffset": ..., "broker": ..., "group": ..., "reason": ...,
     "description": ..., "rewriteCount": ...}

``topic`` is the topic the CK named (a business topic or its pop retry topic), ``broker`` the broker group
that stores the message, ``reason`` the last read's ``ReadResult.reason`` and ``rewriteCount`` how many times
the CK was rewritten before it ended.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

REFERENCE_TOPIC = "rmq_sys_PMQ_DLQ_REFERENCES"
REFERENCE_PROPERTY = "PMQ_DLQ_REFERENCE"  # "true" on a reference entry
STATE_PROPERTY = "PMQ_DLQ_REFERENCE_STATE"
OUTCOME_PROPERTY = "PMQ_DLQ_REFERENCE_OUTCOME"  # why a closed reference closed
STATE_OPEN = "open"
STATE_RESOLVED = "resolved"
STATE_GONE = "gone"
STATE_REFUSED = "refused"
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

    @property
    def key(self) -> tuple[str, str, int, int, str]:
        """What the events of one reference share: where the message is and whose it is."""
        return self.broker_name, self.topic, self.queue_id, self.queue_offset, self.group

    def describe(self) -> str:
        """One line for listings: where the message is and why it could not be read."""
        return (
            f"{self.topic}/{self.queue_id}@{self.queue_offset} on {self.broker_name}: {self.reason} "
            f"after {self.rewrite_count} rewrite(s)"
        )


class Entry(Protocol):
    """An entry of the reference topic as read back (a ``MessageExt``)."""

    properties: dict[str, str]
    body: bytes


E = TypeVar("E", bound=Entry)


@dataclass(frozen=True, slots=True)
class ReferenceState(Generic[E]):
    reference: DeadLetterReference
    state: str  # STATE_OPEN, or how it closed
    outcome: str  # for a closed one: what happened
    entry: E  # the event that set the state


def fold(entries: Iterable[E]) -> dict[tuple[str, str, int, int, str], ReferenceState[E]]:
    """Each reference's latest state from the reference topic's entries in order; an entry that is no reference
    is skipped. A reference written again after it closed is open again."""
    states: dict[tuple[str, str, int, int, str], ReferenceState[E]] = {}
    for entry in entries:
        try:
            ref = DeadLetterReference.of_message(entry.properties, entry.body)
        except ValueError:
            continue
        if ref is not None:
            state = entry.properties.get(STATE_PROPERTY, STATE_OPEN)
            states[ref.key] = ReferenceState(ref, state, entry.properties.get(OUTCOME_PROPERTY, ""), entry)
    return states


def closing_properties(ref: DeadLetterReference, state: str, outcome: str) -> dict[str, str]:
    """The properties of the event that closes ``ref`` as ``state``."""
    return {**ref.properties(), STATE_PROPERTY: state, OUTCOME_PROPERTY: outcome}
