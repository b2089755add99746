"""The revive ledger: which CKs of one revive queue are still open, and from where a restart must re-read.

CK and ACK records are appended to a revive queue as consumers pop and ack. The revive service reads that
queue in order and feeds every record to the ledger, which pairs ACKs with their CKs by ``ck_key``. A CK is
*closed* when every message of it is acked, or when revive has handled it (revived, rewritten or ended:
``close``). ``due(now_ms)`` lists the open CKs whose revive time has come, oldest revive offset first.

Open CKs wait in a heap keyed by revive time, so ``due`` and ``next_revive_time_ms`` cost a few heap steps per
CK coming due, not a look at every open CK: revive asks them each time it wakes, which is as often as CKs come
due (``revive.ReviveService``). A CK whose time came moves from the heap to the *due* set, where it stays until
closed (revive may leave it for later: held by an ack, waiting after a failed write, handled elsewhere). Closed
CKs leave the heap lazily; it is rebuilt when more than half of it is closed CKs, so it stays within twice
the open CKs.

Unlike RocketMQ, CKs are not timer messages that surface near their revive time: they are appended at once
and the ledger keeps every open CK in memory (bounded by the messages in flight, which the pop path bounds).
That is what lets ``commit_offset`` be exact: it is the revive offset of the oldest open CK (or the next
offset to read when none is open), so a restart re-reads from there and rebuilds exactly the open CKs and the
acks that came after them; no acked message comes back and no un-acked one is lost because of the restart.

An ACK whose CK is not open (already revived, or its CK precedes the committed offset) is an *orphan* and is
ignored: the message was already handed back to the retry path, and acking it again changes nothing.

Revive and acks meet on open CKs across suspension points: a revive pass picks its due CKs, then reads their
messages and writes their retry copies before it closes them; an ack checks its handle, then writes its ACK
record and waits for a slave before it answers. Either one alone decides a message: a CK revive *picked*
(``pick`` until ``release``) is not open to acks (``open_checkpoint`` says None: its retry copy may be written
already, so an ack answered OK would be followed by a delivery), and a CK with acks being written (``hold``
until ``unhold``) is not due (revive leaves it for a later pass, when its ACK records are read).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint


@dataclass(slots=True)
class _OpenCk:
    checkpoint: PopCheckpoint
    revive_offset: int


@dataclass(frozen=True, slots=True)
class QueuePopState:
    """Messages of one (group, topic, queue) under open CKs, for ``group describe``."""

    in_flight: int  # popped, not acked, still invisible
    waiting_to_revive: int  # popped, not acked, past their invisible time


_COMPACT_MIN = 1024  # a heap smaller than this is never rebuilt


class ReviveLedger:
    def __init__(self, start_offset: int = 0):
        self._open: dict[str, _OpenCk] = {}
        # (revive time, revive offset, entry) of open CKs not due yet, and closed ones not dropped yet: an item
        # counts while its entry is the open one of its key (the revive offset, unique, breaks ties)
        self._waiting: list[tuple[int, int, _OpenCk]] = []
        self._due: dict[str, _OpenCk] = {}  # open CKs whose revive time came, by key
        # (group, topic, queue id) -> keys of its open CKs: staged pops read a queue's in-flight messages here
        self._by_queue: dict[tuple[str, str, int], set[str]] = defaultdict(set)
        self._next_offset = start_offset  # the next revive offset to read
        self.orphan_acks = 0
        self._picked: set[str] = set()  # CKs a revive pass is handing back: refused to acks
        self._held: Counter[str] = Counter()  # CKs with acks being written: not due

    @property
    def next_offset(self) -> int:
        return self._next_offset

    def _advance(self, revive_offset: int) -> None:
        if revive_offset < self._next_offset:
            raise ValueError(f"revive records are read in order: {revive_offset} < {self._next_offset}")
        self._next_offset = revive_offset + 1

    def on_checkpoint(self, ck: PopCheckpoint, revive_offset: int) -> None:
        self._advance(revive_offset)
        if not ck.all_acked:
            entry = self._open[ck.key] = _OpenCk(ck, revive_offset)
            self._due.pop(ck.key, None)
            heapq.heappush(self._waiting, (ck.revive_time_ms, revive_offset, entry))
            self._by_queue[(ck.group, ck.topic, ck.queue_id)].add(ck.key)
            if len(self._waiting) > _COMPACT_MIN and len(self._waiting) > 2 * len(self._open):
                self._compact()

    def on_ack(self, ack: AckRecord, revive_offset: int) -> None:
        self._advance(revive_offset)
        self.apply_ack(ack)

    def apply_ack(self, ack: AckRecord) -> None:
        """Apply an ACK that has no record in this revive queue (a slave acting as master keeps its ACKs beside
        its replica: broker.acting_progress)."""
        entry = self._open.get(ack.ck_key)
        if entry is None:
            self.orphan_acks += 1
            return
        entry.checkpoint = entry.checkpoint.with_acks(ack.acked_offsets)
        if entry.checkpoint.all_acked:
            self.close(ack.ck_key)

    def skip(self, revive_offset: int) -> None:
        """A record that is neither CK nor ACK (or unreadable) still moves the read position."""
        self._advance(revive_offset)

    def due(
        self, now_ms: int, limit: int | None = None, skip: Callable[[PopCheckpoint], bool] | None = None
    ) -> list[PopCheckpoint]:
        """Open CKs past their revive time, oldest first; ``skip`` leaves out CKs another service hands back."""
        waiting, open_ = self._waiting, self._open
        while waiting and waiting[0][0] <= now_ms:
            entry = heapq.heappop(waiting)[2]
            key = entry.checkpoint.key
            if open_.get(key) is entry:
                self._due[key] = entry
        entries = sorted(
            (
                e
                for e in self._due.values()
                if e.checkpoint.revive_time_ms <= now_ms
                and e.checkpoint.key not in self._held
                and not (skip is not None and skip(e.checkpoint))
            ),
            key=lambda e: e.revive_offset,
        )
        return [e.checkpoint for e in entries[:limit]]

    def next_revive_time_ms(self) -> int | None:
        """The earliest revive time of the open CKs ``due`` has not listed yet (those past it are in ``due``)."""
        waiting, open_ = self._waiting, self._open
        while waiting and open_.get(waiting[0][2].checkpoint.key) is not waiting[0][2]:
            heapq.heappop(waiting)  # closed since it was pushed
        return waiting[0][0] if waiting else None

    def _compact(self) -> None:
        self._waiting = [item for item in self._waiting if self._open.get(item[2].checkpoint.key) is item[2]]
        heapq.heapify(self._waiting)

    def close(self, key: str) -> None:
        entry = self._open.pop(key, None)
        self._due.pop(key, None)
        if entry is not None:
            ck = entry.checkpoint
            keys = self._by_queue[(ck.group, ck.topic, ck.queue_id)]
            keys.discard(key)
            if not keys:
                del self._by_queue[(ck.group, ck.topic, ck.queue_id)]

    def is_open(self, key: str) -> bool:
        return key in self._open

    def open_checkpoint(self, key: str) -> PopCheckpoint | None:
        """The open CK of ``key`` with the acks read so far, or None (never seen, closed, or picked by revive)."""
        entry = self._open.get(key)
        return entry.checkpoint if entry is not None and key not in self._picked else None

    def pick(self, keys: Iterable[str]) -> None:
        """A revive pass hands these CKs back: no ack of them is taken until ``release``."""
        self._picked.update(keys)

    def release(self, keys: Iterable[str]) -> None:
        """The pass is done with these CKs (closed, or kept open after a failed write: acks are taken again)."""
        self._picked.difference_update(keys)

    def hold(self, key: str) -> None:
        """An ack of this CK is being written: revive leaves it alone until ``unhold``."""
        self._held[key] += 1

    def unhold(self, key: str) -> None:
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]

    def open_of_queue(self, group: str, topic: str, queue_id: int) -> list[PopCheckpoint]:
        """The open CKs (with the acks read so far) of one (group, topic, queue)."""
        keys = self._by_queue.get((group, topic, queue_id), ())
        return [self._open[key].checkpoint for key in keys]

    def commit_offset(self) -> int:
        """Where a restart must start reading so that every open CK is read again."""
        return min((e.revive_offset for e in self._open.values()), default=self._next_offset)

    def __len__(self) -> int:
        return len(self._open)

    def pop_state(self, now_ms: int) -> dict[tuple[str, str, int], QueuePopState]:
        """(group, topic, queue id) -> un-acked messages in flight and waiting to revive."""
        counts: dict[tuple[str, str, int], list[int]] = defaultdict(lambda: [0, 0])
        for entry in self._open.values():
            ck = entry.checkpoint
            unacked = len(ck.unacked_offsets())
            counts[(ck.group, ck.topic, ck.queue_id)][ck.revive_time_ms <= now_ms] += unacked
        return {key: QueuePopState(v[0], v[1]) for key, v in counts.items()}

    def __repr__(self) -> str:
        return (
            f"<ReviveLedger open={len(self._open)} next_offset={self._next_offset} "
            f"commit_offset={self.commit_offset()} orphan_acks={self.orphan_acks}>"
        )
