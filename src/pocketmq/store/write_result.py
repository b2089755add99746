"""Typed writes: what a background service's write (a retry copy, a dead letter, a timer delivery, an escaped
write) can tell its caller, as ``common.read_result`` does for reads.

- ``STORED``: the store (or another group's master) has it.
- ``TRANSIENT``: not written this time for a reason that may pass: the disk is full or the store read-only,
  remote escape is off, its target is unreachable or busy. The caller keeps its state (a CK open, a timer
  pending) and tries again after a backoff (``broker.write_backoff``).
- ``PERMANENT``: the message itself can never be written: its topic name is too long (``%RETRY%<group>_<topic>``
  over 127 characters), its properties are over 32,767 bytes, a store or a remote master refused it as
  illegal. Retrying cannot help: the caller writes a dead letter with the reason at once, and moves on.

``write_problem`` finds the permanent problems without writing (pure), so one bad message is set aside before
it can refuse the batch it would have travelled in. The types live beside the store, whose put results they
classify (``of_put``), so the broker's services and the escape bridge (``cluster.escape``) share them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pocketmq.common.message import MessageExt
from pocketmq.common.properties import encode_properties
from pocketmq.common.record import MAX_PROPERTIES_BYTES
from pocketmq.common.topic import topic_name_problem
from pocketmq.store.api import PutResult, PutStatus

_PERMANENT_PUTS = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})


class WriteStatus(enum.Enum):
    STORED = "STORED"
    TRANSIENT = "TRANSIENT"
    PERMANENT = "PERMANENT"


@dataclass(frozen=True, slots=True)
class WriteResult:
    status: WriteStatus
    reason: str = ""  # one word for logs, metrics and dead-letter properties: a PutStatus or an escape reason
    description: str = ""

    @classmethod
    def transient(cls, reason: str, description: str = "") -> WriteResult:
        return cls(WriteStatus.TRANSIENT, reason, description)

    @classmethod
    def permanent(cls, reason: str, description: str = "") -> WriteResult:
        return cls(WriteStatus.PERMANENT, reason, description)

    @property
    def stored(self) -> bool:
        return self.status is WriteStatus.STORED

    @property
    def is_permanent(self) -> bool:
        return self.status is WriteStatus.PERMANENT

    def __str__(self) -> str:
        return f"{self.reason}: {self.description}" if self.description else self.reason


STORED = WriteResult(WriteStatus.STORED)


def of_put(result: PutResult) -> WriteResult:
    """A store's answer to one put (every result of a batch is the same: a batch is all or nothing)."""
    if result.status.stored:
        return STORED
    if result.status in _PERMANENT_PUTS:
        return WriteResult.permanent(result.status.value, result.reason)
    return WriteResult.transient(result.status.value, result.reason)


def of_puts(results: list[PutResult]) -> WriteResult:
    """The answer to a batch put: stored, or the first refusal."""
    refused = next((r for r in results if not r.status.stored), None)
    return STORED if refused is None else of_put(refused)


def write_problem(msg: MessageExt) -> str | None:
    """Why ``msg`` can never be stored anywhere (its topic name, the size of its properties), or None."""
    problem = topic_name_problem(msg.topic)
    if problem:
        return f"{problem} ({len(msg.topic)})"
    size = len(encode_properties(msg.properties).encode())
    if size > MAX_PROPERTIES_BYTES:
        return f"properties are {size} bytes, more than {MAX_PROPERTIES_BYTES}"
    return None
