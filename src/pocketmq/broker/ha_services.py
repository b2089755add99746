"""The master's service state a slave copies with its metadata (HA_SYNC_METADATA), beyond topics, groups and
consumer offsets: what a slave needs to start acting as master where its master stopped (docs/ha.md).

Snapshot fields (each the content of the master's metadata file of that state; a master of an older
PocketMQ sends none of them, and a slave skips what is missing)::

    "stageOffsets": consumer_stage_offsets.json   {"stageOffsetTable": [...]}
    "popFifo":      pop_fifo.json                 {"queues": {"group@topic@queueId": OrderlyQueue JSON}}
    "popStages":    pop_stages.json               {"popStageTable": [...]}
    "timer":        {"progressOffset": smallest timer queue offset still pending on the master,
                     "physOffset": the master's commit log end when it said so}

How the slave applies them:

- stage offsets move forward only, by each queue's commit offset (as consumer offsets do), also while the slave
  acts: what staged consumers committed on it while the master was away is kept;
- the FIFO POP state and the staged-POP registrations are the acting services' own: while the slave does not
  act they are replaced by the master's (and saved to the slave's files, so a restarted slave has them); while
  it acts they are its own and the sync leaves them alone;
- the timer progress, while the slave does not act, moves the slave's timer forward (``TimerService.advance_to``)
  once the slave's commit log reaches the ``physOffset`` that came with it: only then does the replica hold the
  deliveries and tombstones of every timer below it. A progress the log has not reached yet waits for a later
  sync (``TimerProgressGate``); so the slave's progress lags the master's by one or two sync intervals.

``parse_service_state`` is pure and checks everything before anything changes; ``ServiceStateFollower`` applies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.pop.fifo import FifoPopState, parse_fifo_state
from pocketmq.broker.pop.staged import PopStageRegistry, parse_pop_stages
from pocketmq.broker.stage_offsets import StageOffsetManager, parse_stage_offsets

if TYPE_CHECKING:
    from pocketmq.broker.timer.service import TimerService
    from pocketmq.store.message_store import MessageStore


@dataclass(frozen=True, slots=True)
class ServiceTables:
    """Where a broker keeps that state (None: this broker has no such part, e.g. in a unit test); a broker builds
    its own with its services (``broker.wiring``)."""

    stage_offsets: StageOffsetManager | None = None
    pop_fifo: FifoPopState | None = None
    pop_stages: PopStageRegistry | None = None
    timer: TimerService | None = None
    store: MessageStore | None = None  # its commit log end


def service_state_snapshot(tables: ServiceTables) -> dict:
    """The master's fields of the metadata snapshot (see the module doc)."""
    snapshot: dict = {}
    if tables.stage_offsets is not None:
        snapshot["stageOffsets"] = tables.stage_offsets.to_json()
    if tables.pop_fifo is not None:
        snapshot["popFifo"] = tables.pop_fifo.to_json()
    if tables.pop_stages is not None:
        snapshot["popStages"] = tables.pop_stages.to_json()
    if tables.timer is not None and tables.store is not None:
        snapshot["timer"] = {
            "progressOffset": tables.timer.progress_offset(),
            "physOffset": tables.store.max_phys_offset,
        }
    return snapshot


@dataclass(frozen=True, slots=True)
class ServiceState:
    """A parsed snapshot; None where the master sent nothing."""

    stage_offsets: dict | None = None
    pop_fifo: dict | None = None
    pop_stages: dict | None = None
    timer: tuple[int, int] | None = None  # (progress offset, master phys offset)


def parse_service_state(snapshot: dict) -> ServiceState:
    """ValueError when a field is there and does not parse."""

    def field(name, parse):
        return None if snapshot.get(name) is None else parse(snapshot[name])

    def timer(obj) -> tuple[int, int]:
        try:
            return int(obj["progressOffset"]), int(obj["physOffset"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"timer progress does not parse: {exc!r}") from None

    return ServiceState(
        field("stageOffsets", parse_stage_offsets),
        field("popFifo", parse_fifo_state),
        field("popStages", parse_pop_stages),
        field("timer", timer),
    )


@dataclass(frozen=True, slots=True)
class ServiceStateChanges:
    stage_offsets_moved: int = 0
    pop_fifo_replaced: bool = False
    pop_stages_replaced: bool = False
    timer_progress_moved: bool = False
    skipped_acting: bool = False  # the slave acts: its FIFO state, stages and timer are its own

    @property
    def any(self) -> bool:
        return bool(
            self.stage_offsets_moved or self.pop_fifo_replaced or self.pop_stages_replaced or self.timer_progress_moved
        )


class TimerProgressGate:
    """Holds a master's timer progress until the replica's commit log reaches the phys offset it came with.

    ``offer`` returns the progress to apply now, or None. One progress waits at a time (the oldest); later
    ones are taken when they are reachable at once, so under steady traffic a progress is applied one sync
    after it arrived."""

    def __init__(self) -> None:
        self.waiting: tuple[int, int] | None = None  # (progress offset, master phys offset)

    def offer(self, progress_offset: int, master_phys_offset: int, replica_phys_offset: int) -> int | None:
        ready = []
        if self.waiting is not None and self.waiting[1] <= replica_phys_offset:
            ready.append(self.waiting[0])
            self.waiting = None
        if master_phys_offset <= replica_phys_offset:
            ready.append(progress_offset)
        elif self.waiting is None:
            self.waiting = (progress_offset, master_phys_offset)
        return max(ready) if ready else None

    def __repr__(self) -> str:
        return f"<TimerProgressGate waiting={self.waiting}>"


class ServiceStateFollower:
    """The slave side: applies parsed snapshots to its tables; ``acting`` says whether it acts as master now."""

    def __init__(self, tables: ServiceTables, acting: Callable[[], bool]):
        self._tables = tables
        self._acting = acting
        self._timer_gate = TimerProgressGate()

    def apply(self, state: ServiceState) -> ServiceStateChanges:
        t = self._tables
        moved = 0
        if state.stage_offsets is not None and t.stage_offsets is not None:
            moved = t.stage_offsets.merge_forward(state.stage_offsets)
        if self._acting():
            return ServiceStateChanges(stage_offsets_moved=moved, skipped_acting=True)
        fifo = stages = timer = False
        if state.pop_fifo is not None and t.pop_fifo is not None:
            fifo = t.pop_fifo.replace(state.pop_fifo)
            if fifo:
                t.pop_fifo.persist()
        if state.pop_stages is not None and t.pop_stages is not None:
            stages = t.pop_stages.replace(state.pop_stages)
        if state.timer is not None and t.timer is not None and t.store is not None:
            progress = self._timer_gate.offer(*state.timer, t.store.max_phys_offset)
            timer = progress is not None and t.timer.advance_to(progress)
        return ServiceStateChanges(moved, fifo, stages, timer)

    def __repr__(self) -> str:
        return f"<ServiceStateFollower acting={self._acting()} {self._timer_gate!r}>"
