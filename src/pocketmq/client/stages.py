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

Durable progress: ``advance_commit(commit_offset)`` folds the messages below the committed consumer offset
into each sequence's ``base`` (the stage offset *at that queue offset*). Messages above it that already ran are
delivered again after a restart and get the same sequence numbers, so a restored (commit offset, bases) pair is
always consistent; storing the pair per queue is what ``StageOffsetRecord`` is for. The prototype kept the
counter per topic; here every queue has its own.

Pure and single-threaded (the consumer's event loop); ids are queue offsets.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pocketmq.common.stages import check_definitions, stage_end, stage_index

StageKey = tuple[str | None, str | None]  # (strategy id, stage group); strategy None: plain concurrency
PLAIN_CONCURRENT: StageKey = (None, None)
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
    definitions: list[int]
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
    """The stage state of one queue. ``definitions_for(strategy)`` gives a strategy's stage sizes;
    ``initial`` the durable stage offsets (from a ``StageOffsetRecord``); ``reset(key, offset)`` may replace a
    sequence's starting stage offset (the listener's ``reset_current_stage_offset_if_need``)."""

    def __init__(
        self,
        definitions_for: Callable[[str | None], list[int]],
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
            definitions = [] if key[0] is None else check_definitions(self._definitions_for(key[0]))
            start = self._initial.get(key, 0)
            if self._reset is not None:
                replaced = self._reset(key, start)
                start = start if replaced is None else replaced
            seq = self._sequences[key] = _Sequence(definitions, start, start, start)
        return seq

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
            if item.seq < stage_end(sequence.definitions, sequence.completed) and item.not_before_ms <= now_ms:
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
            item = self._running[offset]
            where = (item.key, stage_index(self._sequences[item.key].definitions, item.seq))
            batch = filling.get(where)
            if batch is None or len(batch) >= batch_size:
                if len(batches) >= free_calls:  # no call left for it: it waits for the next round
                    self._pending[offset] = self._running.pop(offset)
                    continue
                batch = filling[where] = []
                batches.append(batch)
            batch.append(offset)
        return batches

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
        offsets.update({k: s.base for k, s in self._sequences.items() if k[0] is not None})
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
