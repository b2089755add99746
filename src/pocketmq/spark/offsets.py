"""Queue positions and their JSON form: what Spark stores in ``checkpoint/offsets/N``.

A position is the *next* queue offset to read (end exclusive, as Kafka's), per queue. On the wire to Spark
it is ``{topic: {"broker:qid": next_offset}}`` with topics and queues in one fixed order and string keys:
Spark compares offsets as JSON text, so equal positions must serialise identically.

An ``OffsetSpec`` is what ``startingOffsets`` / ``endingOffsets`` / ``startingTimestamp`` ask for;
``resolve_spec`` turns it into positions given the queues' bounds (fetched by the caller).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

EARLIEST = -2  # in a JSON spec, as in Kafka: "from the queue's first retained message"
LATEST = -1  # "from the queue's end"


@dataclass(frozen=True, slots=True, order=True)
class QueueId:
    """One queue of one topic on one broker; orders by topic, broker, then queue id as a number."""

    topic: str
    broker: str
    queue_id: int

    @property
    def key(self) -> str:
        """The queue's key inside its topic's JSON object."""
        return f"{self.broker}:{self.queue_id}"

    @classmethod
    def from_key(cls, topic: str, key: str) -> QueueId:
        broker, sep, qid = key.rpartition(":")
        if not sep or not broker or not qid.isdigit():
            raise ValueError(f'queue key {key!r} of topic {topic!r} is not "broker:queueId"')
        return cls(topic, broker, int(qid))

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker}:{self.queue_id}"


@dataclass(frozen=True, slots=True)
class QueueBounds:
    """A queue's retained range: ``min_offset`` is its first retained message, ``max_offset`` the next to be
    written (so the queue holds ``[min_offset, max_offset)``)."""

    min_offset: int
    max_offset: int


def to_offset_json(positions: Mapping[QueueId, int]) -> dict[str, dict[str, int]]:
    """Positions as Spark stores them; insertion order is sorted so ``json.dumps`` is canonical."""
    result: dict[str, dict[str, int]] = {}
    for queue in sorted(positions):
        result.setdefault(queue.topic, {})[queue.key] = int(positions[queue])
    return result


def from_offset_json(offset: Mapping | str | None) -> dict[QueueId, int]:
    """Inverse of ``to_offset_json``; also accepts the JSON text. Raises ValueError on anything malformed."""
    if offset is None:
        return {}
    if isinstance(offset, str):
        offset = json.loads(offset)
    if not isinstance(offset, Mapping):
        raise ValueError(f"offsets must be a JSON object, got {type(offset).__name__}")
    positions: dict[QueueId, int] = {}
    for topic, queues in offset.items():
        if not isinstance(queues, Mapping):
            raise ValueError(f'offsets of topic {topic!r} must be an object of "broker:queueId": offset')
        for key, value in queues.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"offset of {topic!r} {key!r} must be an integer, got {value!r}")
            positions[QueueId.from_key(topic, key)] = value
    return positions


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """``earliest``, ``latest``, ``specific`` (per-queue offsets, EARLIEST/LATEST allowed) or ``timestamp``."""

    kind: str
    specific: Mapping[QueueId, int] = field(default_factory=dict)
    timestamp_ms: int | None = None

    @classmethod
    def at_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        return cls("timestamp", timestamp_ms=timestamp_ms)

    def topics(self) -> set[str]:
        return {queue.topic for queue in self.specific}


def parse_offset_spec(text: str) -> OffsetSpec:
    """Parse ``earliest``, ``latest`` or a JSON object ``{topic: {"broker:qid": offset}}`` (offset >= 0, or
    -2 for earliest, -1 for latest). Raises ValueError saying what is wrong."""
    stripped = text.strip()
    if stripped.lower() in ("earliest", "latest"):
        return OffsetSpec(stripped.lower())
    try:
        parsed = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{text!r} is neither earliest, latest nor valid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    specific = from_offset_json(parsed)
    for queue, offset in specific.items():
        if offset < EARLIEST:
            raise ValueError(f"offset {offset} of {queue} is negative (use -2 for earliest, -1 for latest)")
    return OffsetSpec("specific", specific=specific)


def resolve_spec(
    spec: OffsetSpec,
    queues: list[QueueId],
    bounds: Mapping[QueueId, QueueBounds],
    *,
    unnamed: int,
    timestamp_offsets: Mapping[QueueId, int] | None = None,
) -> dict[QueueId, int]:
    """Positions for ``queues`` under ``spec``. A queue a ``specific`` spec does not name gets ``unnamed``
    (EARLIEST or LATEST). ``timestamp_offsets`` are the broker's answers for a ``timestamp`` spec.
    Explicit offsets are kept as given: the data-loss check judges them against the bounds later."""
    positions: dict[QueueId, int] = {}
    for queue in queues:
        if spec.kind == "timestamp":
            if timestamp_offsets is None or queue not in timestamp_offsets:
                raise ValueError(f"no offset for timestamp {spec.timestamp_ms} of {queue}")
            positions[queue] = timestamp_offsets[queue]
            continue
        wanted = {"earliest": EARLIEST, "latest": LATEST}.get(spec.kind)
        if wanted is None:
            wanted = spec.specific.get(queue, unnamed)
        if wanted == EARLIEST:
            positions[queue] = bounds[queue].min_offset
        elif wanted == LATEST:
            positions[queue] = bounds[queue].max_offset
        else:
            positions[queue] = wanted
    return positions


def unknown_queues(spec: OffsetSpec, queues: list[QueueId]) -> list[QueueId]:
    """Queues a ``specific`` spec names that the subscribed topics do not have."""
    known = set(queues)
    return sorted(queue for queue in spec.specific if queue not in known)
