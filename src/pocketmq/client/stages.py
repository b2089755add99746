"""Staged concurrency (RocketMQ's RIP-22, never merged upstream): order between stages, concurrency inside one.

A *staged sequence* is the messages of one queue that share a (strategy id, stage group) key, in queue-offset
order. Its stage definitions are stage sizes, e.g. ``[10, 20, 70]``: messages 0-9 of the sequence are stage 0,
10-29 stage 1, 30-99 stage 2, and everything after the last stage one unbounded concurrent stage. ``[]`` is
plain concurrency; all ones is orderly consumption.

The *stage offset* of a sequence counts its messages completed so far. A message's sequence number (its
place in the sequence) is fixed when it arrives: the stage offset at the committed consumer position plus
its arrival order after it. Rules enforced by ``QueueStageScheduler.ready``:

- a message may start only while its sequence number is below the end of the stage the stage offset is in,
  so no message of stage k+1 starts before every message of stage k completed;
- inside a stage, messages start in offset order up to the free pool slots the caller offers;
- a failed message goes back to pending, not before ``retry_at_ms``; the rest of its stage keeps running,
  the next stage waits (the stage offset cannot reach the stage end without it).

Definitions change: ``reload()`` reads every strategy's definitions again (the consumer calls it at each
rebalance). A sequence whose definitions changed takes the new ones, and the reset hook may then move its stage
offset: the whole numbering of the sequence moves by the same amount (completed, waiting and running messages,
and the durable base alike), so every rule above still holds and a stored record stays consistent. Definitions
the caller refuses (``definitions_for`` gives None) hold the sequence's messages back until a reload gives
valid ones.

Durable progress: ``advance_commit(commit_offset)`` folds the messages below the committed consumer offset
into each sequence's ``base`` (the stage offset *at that queue offset*). Messages above it that already ran are
delivered again after a restart and get the same sequence numbers, so a restored (commit offset, bases) pair is
always consistent; storing the pair per queue is what ``StageOffsetRecord`` is for. The prototype kept the
counter per topic; here every queue has its own.

Pure and single-threaded (the consumer's event loop); ids are queue offsets.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pocketmq.common.stages import check_definitions, stage_end, stage_index

StageKey = tuple[str | None, str | None]  # (strategy id, stage group); strategy None: plain concurrency
PLAIN_CONCURRENT: StageKey = (None, None)
# A strategy's stage sizes, validated by the caller; None: refused (its messages wait for a reload)
DefinitionsFor = Callable[[str], list[int] | None]
__all__ = [
    "PLAIN_CONCURRENT",
    "QueueStageScheduler",
    "StageKey",
    "StageOffsetRecord",
    "check_definitions",
    "stage_end",
    "stage_index",
]


@dataclass
class StageOffsetRecord:
    """The durable stage progress of one queue: stage offsets valid at ``commit_offset`` (a queue offset)."""

    commit_offset: int
    stage_offsets: dict[StageKey, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "commitOffset": self.commit_offset,
            "stageOffsets": [
                {"strategy": s, "stageGroup": g, "stageOffset": n}
                for (s, g), n in sorted(self.stage_offsets.items(), key=repr)
            ],
        }

    @classmethod
    def from_json(cls, obj: dict) -> StageOffsetRecord:
        offsets = {
            (e.get("strategy"), e.get("stageGroup")): int(e["stageOffset"]) for e in obj.get("stageOffsets") or []
        }
        return cls(int(obj["commitOffset"]), offsets)


@dataclass
class _Sequence:
    definitions: list[int] | None  # None: refused, nothing of the sequence starts
    base: int  # stage offset at the committed consumer offset
    completed: int  # stage offset now
    next_seq: int
    uncommitted: deque[int] = field(default_factory=deque)  # queue offsets given a seq, not yet below the commit


@dataclass
class _Pending:
    key: StageKey
    seq: int
    not_before_ms: float = 0.0


class QueueStageScheduler:
    """The stage state of one queue. ``definitions_for(strategy)`` gives a strategy's stage sizes (None:
    refused); ``initial`` the durable stage offsets (from a ``StageOffsetRecord``); ``reset(key, offset)`` may
    replace a sequence's stage offset whenever the sequence takes definitions: when it is first seen and when
    they change (the listener's ``reset_current_stage_offset_if_need``)."""

    def __init__(
        self,
        definitions_for: DefinitionsFor,
        initial: dict[StageKey, int] | None = None,
        reset: Callable[[StageKey, int], int | None] | None = None,
    ):
        self._definitions_for = definitions_for
        self._initial = dict(initial or {})
        self._reset = reset
        self._sequences: dict[StageKey, _Sequence] = {}
        self._pending: dict[int, _Pending] = {}
        self._running: dict[int, _Pending] = {}

    def _sequence(self, key: StageKey) -> _Sequence:
        seq = self._sequences.get(key)
        if seq is None:
            start = self._initial.get(key, 0)
            seq = self._sequences[key] = _Sequence(None, start, start, start)
            if key[0] is None:
                seq.definitions = []
            else:
                self._take_definitions(key, seq, self._definitions_for(key[0]))
        return seq

    def _take_definitions(self, key: StageKey, seq: _Sequence, definitions: list[int] | None) -> None:
        seq.definitions = definitions
        if definitions is None or self._reset is None:
            return
        replaced = self._reset(key, seq.completed)
        if replaced is not None and replaced != seq.completed:
            self._renumber(key, seq, replaced - seq.completed)

    def _renumber(self, key: StageKey, seq: _Sequence, delta: int) -> None:
        """Move the sequence's whole numbering by ``delta``: relative places stay, so every rule holds."""
        seq.base += delta
        seq.completed += delta
        seq.next_seq += delta
        for item in itertools.chain(self._pending.values(), self._running.values()):
            if item.key == key:
                item.seq += delta

    def reload(self) -> list[StageKey]:
        """Read every staged sequence's definitions again; those that changed (or were refused and are valid
        now) are taken, with the reset hook. Returns the keys of the sequences that took new definitions."""
        taken = []
        for key, seq in self._sequences.items():
            if key[0] is None:
                continue
            definitions = self._definitions_for(key[0])
            if definitions is not None and definitions != seq.definitions:
                self._take_definitions(key, seq, definitions)
                taken.append(key)
        return taken

    def add(self, offset: int, key: StageKey) -> None:
        if offset in self._pending or offset in self._running:
            return
        sequence = self._sequence(key)
        self._pending[offset] = _Pending(key, sequence.next_seq)
        sequence.next_seq += 1
        sequence.uncommitted.append(offset)

    def ready(self, free_slots: int, now_ms: float) -> list[int]:
        """Offsets that may start now (moved to running), at most ``free_slots``, lowest offsets first."""
        started: list[int] = []
        for offset in sorted(self._pending):
            if len(started) >= free_slots:
                break
            item = self._pending[offset]
            sequence = self._sequences[item.key]
            if (
                sequence.definitions is not None
                and item.not_before_ms <= now_ms
                and item.seq < stage_end(sequence.definitions, sequence.completed)
            ):
                started.append(offset)
        for offset in started:
            self._running[offset] = self._pending.pop(offset)
        return started

    def ready_batches(self, free_calls: int, batch_size: int, now_ms: float) -> list[list[int]]:
        """What may start now as at most ``free_calls`` listener calls of at most ``batch_size`` messages each
        (moved to running); the messages of one call share a sequence and a stage, lowest offsets first."""
        batches: list[list[int]] = []
        filling: dict[tuple[StageKey, int], list[int]] = {}
        for offset in self.ready(free_calls * batch_size, now_ms):
            where = self.place(offset)
            batch = filling.get(where)
            if batch is None or len(batch) >= batch_size:
                if len(batches) >= free_calls:  # no call left for it: it waits for the next round
                    self._pending[offset] = self._running.pop(offset)
                    continue
                batch = filling[where] = []
                batches.append(batch)
            batch.append(offset)
        return batches

    def place(self, offset: int) -> tuple[StageKey, int]:
        """The sequence and stage index of a started message (``len(definitions)``: the unbounded last stage)."""
        item = self._running[offset]
        return item.key, stage_index(self._sequences[item.key].definitions or [], item.seq)

    def complete(self, offset: int) -> None:
        item = self._running.pop(offset)
        self._sequences[item.key].completed += 1

    def fail(self, offset: int, retry_at_ms: float) -> None:
        """A failure: retried locally not before ``retry_at_ms``; its stage cannot end without it."""
        item = self._running.pop(offset)
        item.not_before_ms = retry_at_ms
        self._pending[offset] = item

    def next_retry_ms(self) -> float | None:
        """The earliest time a held-back failure becomes startable (None: no failure waits)."""
        waits = [p.not_before_ms for p in self._pending.values() if p.not_before_ms > 0]
        return min(waits) if waits else None

    def advance_commit(self, commit_offset: int) -> StageOffsetRecord:
        """Fold messages below ``commit_offset`` (all done) into the bases; the record to store durably."""
        for sequence in self._sequences.values():
            while sequence.uncommitted and sequence.uncommitted[0] < commit_offset:
                sequence.uncommitted.popleft()
                sequence.base += 1
        offsets = dict(self._initial)
        # A base below 0 only after a reset to fewer than the messages completed above the commit point: a
        # replay after a restart numbers those from 0 (they ran once already: at least once).
        offsets.update({k: max(s.base, 0) for k, s in self._sequences.items() if k[0] is not None})
        offsets.pop(PLAIN_CONCURRENT, None)
        return StageOffsetRecord(commit_offset, offsets)

    def stage_offset(self, key: StageKey) -> int:
        return self._sequence(key).completed

    @property
    def running_count(self) -> int:
        return len(self._running)

    @property
    def pending_count(self) -> int:
        return len(self._pending)
