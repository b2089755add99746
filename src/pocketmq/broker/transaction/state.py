"""The pending half messages of one broker and where their queues were read to (pure: records and ``now_ms`` in).

``PendingTable`` is rebuilt by reading the half queue and the op queue from the check progress (the consumer
offsets of ``CID_RMQ_SYS_TRANS``) and kept up by reading what is new in both, halves first:

- a half message read is *pending* unless an op record already ended it (``_early``: ended before it was read,
  which is the usual case for a commit right after the send);
- a resolution op ends the offsets it lists; a check mark sets a pending message's check count and the time of
  its last check (the mark's store time), so a restart or a slave taking over goes on with the same counts;
- an offset below ``half_until`` that is not pending has ended (or was never a half message).

Progress (``progress``): the half queue is done below its smallest pending offset; the op queue is needed from
the smallest ``PMQ_TRAN_OP_FROM`` of a pending message, or, for half messages not read yet, from where the op
queue ended before the last complete read of the half queue (``_op_floor``): an op record about a message is
always appended after the message, and the message after its ``PMQ_TRAN_OP_FROM`` was taken. So a restart that
reads both queues from there sees every op record about every message it finds pending.

Scheduling: a heap of (due ms, offset), one item per pending message, checked lazily when it comes up (the
message may have ended, or its count changed, meanwhile), so a round touches only what is due: memory and time
of a round are bounded by the messages due, not by all those pending.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from pocketmq.broker.transaction.decision import CheckSettings, Decision, HalfState, Verdict, decide, next_check_ms


class PendingHalf(HalfState):
    """A pending half message: its place, its real topic, and its check state."""

    __slots__ = ("queue_offset", "phys_offset", "op_from", "topic", "queue_id", "scheduled_ms")

    def __init__(
        self,
        queue_offset: int,
        phys_offset: int,
        topic: str,
        born_ms: int,
        stored_ms: int,
        *,
        op_from: int = 0,
        immunity_ms: int = 0,
        checks: int = 0,
        queue_id: int = 0,
    ):
        super().__init__(min(born_ms, stored_ms), stored_ms, immunity_ms, checks, 0)
        self.queue_offset = queue_offset
        self.phys_offset = phys_offset
        self.topic = topic
        self.queue_id = queue_id  # of the real topic
        self.op_from = op_from
        self.scheduled_ms = -1  # due time of its live heap item; -1: off the schedule (being checked or ended)

    def __repr__(self) -> str:
        return (
            f"<PendingHalf {self.topic} half@{self.queue_offset} phys={self.phys_offset} checks={self.checks} "
            f"last_check_ms={self.last_check_ms}>"
        )


@dataclass(slots=True)
class TopicPending:
    oldest_born_ms: int
    count: int = 0
    queues: Counter[int] = field(default_factory=Counter)


class Status:
    PENDING = "PENDING"
    RESOLVING = "RESOLVING"  # an END_TRANSACTION or the service is writing its end now
    RESOLVED = "RESOLVED"


class PendingTable:
    def __init__(self, half_from: int, op_from: int, settings: CheckSettings):
        self.pending: dict[int, PendingHalf] = {}  # half queue offset -> message, in offset order
        self.half_until = half_from  # next half queue offset to read
        self.op_until = op_from  # next op queue offset to read
        self._op_floor = op_from  # op queue end before the last complete read of the half queue
        self._op_end_at_read = op_from
        self._early: set[int] = set()  # offsets >= half_until already ended
        self._resolving: set[int] = set()
        self._heap: list[tuple[int, int]] = []
        self._settings = settings

    # -- reading the queues ----------------------------------------------------------------------------------------
    def begin_half_read(self, op_end: int) -> None:
        """A read of the half queue to its end starts; ``op_end``: the op queue's end now."""
        self._op_end_at_read = op_end

    def end_half_read(self) -> None:
        """The read reached the half queue's end: messages not read yet came after ``op_end`` of its start."""
        self._op_floor = max(self._op_floor, self._op_end_at_read)

    def add_half(self, half: PendingHalf) -> bool:
        """A half message read at ``half_until``; False when it had ended already."""
        offset = half.queue_offset
        self.half_until = max(self.half_until, offset + 1)
        if offset in self._early:
            self._early.discard(offset)
            return False
        self.pending[offset] = half
        self._schedule(half, next_check_ms(half, self._settings))
        return True

    def skip_half(self, queue_offset: int) -> None:
        """A record of the half queue that is not a half message (unreadable): nothing pends on it."""
        self.half_until = max(self.half_until, queue_offset + 1)
        self._early.discard(queue_offset)

    def apply_resolution(self, offsets: list[int]) -> None:
        for offset in offsets:
            if self.pending.pop(offset, None) is None and offset >= self.half_until:
                self._early.add(offset)

    def apply_check_mark(self, offset: int, checks: int, marked_ms: int) -> None:
        half = self.pending.get(offset)
        if half is not None:
            half.checks = max(half.checks, checks)
            half.last_check_ms = max(half.last_check_ms, marked_ms)

    # -- ending ----------------------------------------------------------------------------------------------------
    def status(self, offset: int) -> str:
        if offset in self._resolving:
            return Status.RESOLVING
        if offset in self.pending:
            return Status.PENDING
        if offset >= self.half_until and offset not in self._early:
            return Status.PENDING  # stored, not read by the service yet
        return Status.RESOLVED

    def begin_resolve(self, offset: int) -> bool:
        """Claim ``offset`` for one ending; False when it has ended or another ending is being written."""
        if self.status(offset) != Status.PENDING:
            return False
        self._resolving.add(offset)
        return True

    def end_resolve(self, offset: int, *, stored: bool) -> None:
        """The ending claimed by ``begin_resolve`` was written (``stored``) or not (the message stays pending)."""
        self._resolving.discard(offset)
        if not stored:
            half = self.pending.get(offset)
            if half is not None and half.scheduled_ms < 0:
                self._schedule(half, 0)  # decided again at the next round
            return
        if self.pending.pop(offset, None) is None and offset >= self.half_until:
            self._early.add(offset)

    # -- checking --------------------------------------------------------------------------------------------------
    def configure(self, settings: CheckSettings) -> None:
        """New settings (a dynamic config change): every message is scheduled again by them."""
        if settings == self._settings:
            return
        self._settings = settings
        self._heap = []
        for half in self.pending.values():
            half.scheduled_ms = next_check_ms(half, settings)
            self._heap.append((half.scheduled_ms, half.queue_offset))
        heapq.heapify(self._heap)

    def take_due(self, now_ms: int, limit: int) -> list[tuple[PendingHalf, Decision]]:
        """Up to ``limit`` pending messages whose check or discard is due at ``now_ms``, each with its decision;
        they are off the schedule until ``checked`` or ``end_resolve`` puts them back."""
        due: list[tuple[PendingHalf, Decision]] = []
        heap, settings = self._heap, self._settings
        while heap and len(due) < limit and heap[0][0] <= now_ms:
            at_ms, offset = heapq.heappop(heap)
            half = self.pending.get(offset)
            if half is None or at_ms != half.scheduled_ms:
                continue  # ended, or a stale item of a message scheduled again since
            half.scheduled_ms = -1
            if offset in self._resolving:
                continue  # being ended: back on the schedule if that fails (end_resolve)
            decision = decide(half, settings, now_ms)
            if decision.verdict is Verdict.WAIT:
                self._schedule(half, decision.at_ms)
                continue
            due.append((half, decision))
        return due

    def checked(self, half: PendingHalf, now_ms: int) -> None:
        """``half`` was checked at ``now_ms`` (counted whether a producer got it or not, as RocketMQ counts)."""
        half.checks += 1
        half.last_check_ms = now_ms
        self._schedule(half, next_check_ms(half, self._settings))

    def postpone(self, half: PendingHalf, at_ms: int) -> None:
        """Back on the schedule at ``at_ms`` (a write of its check mark or discard failed)."""
        self._schedule(half, at_ms)

    def _schedule(self, half: PendingHalf, at_ms: int) -> None:
        half.scheduled_ms = at_ms
        heapq.heappush(self._heap, (at_ms, half.queue_offset))

    def next_due_ms(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def unresolved(self) -> Iterator[PendingHalf]:
        """Every pending message not being ended, in offset order (a slave acting as master escapes them all)."""
        for offset, half in list(self.pending.items()):
            if offset in self.pending and offset not in self._resolving:
                yield half

    # -- progress and counts ---------------------------------------------------------------------------------------
    def progress(self) -> tuple[int, int]:
        """(half queue offset, op queue offset) a restart may read from (see the module doc)."""
        half_progress = next(iter(self.pending), self.half_until)
        op_progress = min((h.op_from for h in self.pending.values()), default=self._op_floor)
        return half_progress, min(op_progress, self._op_floor, self.op_until)

    def counts_by_topic(self) -> Counter[str]:
        return Counter(h.topic for h in self.pending.values())

    def by_topic(self) -> dict[str, TopicPending]:
        """Per real topic: how many are pending, per queue, and the oldest born time (one pass)."""
        found: dict[str, TopicPending] = {}
        for half in self.pending.values():
            entry = found.get(half.topic)
            if entry is None:
                entry = found[half.topic] = TopicPending(half.born_ms)
            entry.count += 1
            entry.queues[half.queue_id] += 1
            entry.oldest_born_ms = min(entry.oldest_born_ms, half.born_ms)
        return found

    def __len__(self) -> int:
        return len(self.pending)

    def __repr__(self) -> str:
        return (
            f"<PendingTable pending={len(self.pending)} half_until={self.half_until} op_until={self.op_until} "
            f"early={len(self._early)} resolving={len(self._resolving)}>"
        )
