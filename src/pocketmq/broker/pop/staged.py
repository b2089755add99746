"""Staged POP (docs/staged.md, "POP form"): the pop engine's path for a (group, topic) with stage definitions.

A consumer (the SDK's ``StagedSimpleConsumer``, or any client once the definitions are registered) registers
stage sizes for a (group, topic) with REGISTER_POP_STAGES; from then on every pop of that group on that topic
goes through ``StagedPop``, the staged pop mode (``pop/mode.py``), and ``stage_gate.decide`` says what may leave
each queue: messages of the queue's current stage only (all of them at once, to many consumers), expired ones
again in place, dead letters past the max attempts. The topic's pop retry topic (messages revived before the
registration) is popped the normal way (``pop/normal.py``), and so are acks and changes of invisible time: a
staged message is in flight under a CK like any other. An ack may end a stage, so it wakes the waiting pops.

What is durable, and why a restart resumes exactly:

- the registration (definitions and each queue's origin) in ``<data_dir>/config/pop_stages.json``, written
  at once whenever it changes (rarely: registration, a queue first seen);
- the messages in flight: the open CKs of the revive log (``ReviveLedger.open_of_queue``) with their attempt
  (``ra``). A redelivery appends the new CK before the ACK of the old one, so a crash between the two leaves
  the message in flight twice (delivered once more), never in flight nowhere;
- the next offset to pop: the consumer offset (committed after the CK is stored, as every pop).

Revive leaves these CKs alone (``handled_elsewhere``): a plain revive would copy the message to the retry
topic, out of its queue and its stage. Unregistering hands the open CKs back to revive.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pocketmq.broker.json_table import PersistedJsonTable
from pocketmq.broker.pop import copies
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.mode import TIME_RECHECK_MS
from pocketmq.broker.pop.normal import NormalPop
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.receive import PoppedQueue, PopResult, Receive
from pocketmq.broker.pop.revive_queue import ReviveQueue
from pocketmq.broker.pop.stage_gate import InFlight, decide
from pocketmq.broker.pop.start_offset import start_offset
from pocketmq.common.errors import BadRequestError, InvalidReceiptHandleError, NotReplicatedError
from pocketmq.common.record import decode_record, record_queue_offset
from pocketmq.common.stages import check_definitions
from pocketmq.runtime.files import load_json
from pocketmq.store.api import GetStatus

if TYPE_CHECKING:
    from pocketmq.broker.write_path import PopWrites, WritePathSwitch

log = logging.getLogger(__name__)


@dataclass(slots=True)
class StagedTopic:
    """The stage definitions of a (group, topic) and where each queue's sequence starts (queue offsets)."""

    definitions: list[int]
    origins: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"stageDefinitions": self.definitions, "origins": {str(q): o for q, o in sorted(self.origins.items())}}

    @classmethod
    def from_json(cls, obj: dict) -> StagedTopic:
        return cls(check_definitions(obj["stageDefinitions"]), {int(q): int(o) for q, o in obj["origins"].items()})


class PopStageRegistry(PersistedJsonTable):
    """(group, topic) -> ``StagedTopic``; every change is written at once (changes are rare, and a lost one
    would move a sequence's origin)."""

    def __init__(self, path: Path):
        super().__init__(path)
        self._table: dict[tuple[str, str], StagedTopic] = {}
        # Told of every change made here (a registration, a queue's first origin, an unregistration, a group
        # deleted): a slave acting as master keeps them for its master (broker.acting_services).
        self._watcher: Callable[[tuple[str, str], StagedTopic | None], None] | None = None

    def watch(self, watcher: Callable[[tuple[str, str], StagedTopic | None], None] | None) -> None:
        """Call ``watcher`` with (group, topic) and the new entry (None: removed) after every change made
        through ``put`` or ``remove_group``; None stops it."""
        self._watcher = watcher

    def _changed(self, key: tuple[str, str], staged: StagedTopic | None) -> None:
        if self._watcher is not None:
            self._watcher(key, staged)

    def load(self) -> None:
        self._table.update(parse_pop_stages(load_json(self._path, {})))
        log.info("event=pop_stages_loaded entries=%d path=%s", len(self._table), self._path)

    def replace(self, table: dict[tuple[str, str], StagedTopic]) -> bool:
        """Make the table equal to ``table`` (a master's, for its slave: broker.ha_services) and save it;
        returns whether it changed."""
        with self._lock:
            if self._table == table:
                return False
            self._table = dict(table)
            self._dirty = True
        self.persist()
        return True

    def merge_missing(self, table: dict[tuple[str, str], StagedTopic]) -> int:
        """Add the registrations and queue origins of ``table`` (an acting slave's, handed back to its master)
        that this table lacks, and save; what it has stays (its own registration is never overwritten by an
        older copy). Returns how many (group, topic) entries changed."""
        changed = 0
        with self._lock:
            for key, theirs in table.items():
                mine = self._table.get(key)
                if mine is None:
                    self._table[key] = StagedTopic(list(theirs.definitions), dict(theirs.origins))
                    changed += 1
                elif not theirs.origins.keys() <= mine.origins.keys():
                    self._table[key] = StagedTopic(mine.definitions, {**theirs.origins, **mine.origins})
                    changed += 1
            self._dirty = self._dirty or changed > 0
        self.persist()
        return changed

    def apply_changes(self, changes: dict[tuple[str, str], StagedTopic | None]) -> int:
        """Take ``changes`` (made on an acting slave while this broker was away: newer than what it has) over
        its own entries: each replaces or removes the entry of its (group, topic); saves; returns how many
        entries changed."""
        changed = 0
        with self._lock:
            for key, theirs in changes.items():
                if self._table.get(key) == theirs:
                    continue
                if theirs is None:
                    del self._table[key]
                else:
                    self._table[key] = StagedTopic(list(theirs.definitions), dict(theirs.origins))
                changed += 1
            self._dirty = self._dirty or changed > 0
        self.persist()
        return changed

    def get(self, group: str, topic: str) -> StagedTopic | None:
        return self._table.get((group, topic))

    def handled_elsewhere(self, ck: PopCheckpoint) -> bool:
        """For revive: a staged queue's CKs come back in place through the gate, not as retry copies."""
        return (ck.group, ck.topic) in self._table

    def put(self, group: str, topic: str, staged: StagedTopic | None) -> None:
        with self._lock:
            if staged is None:
                self._table.pop((group, topic), None)
            else:
                self._table[(group, topic)] = staged
            self._dirty = True
        self.persist()
        self._changed((group, topic), staged)

    def remove_group(self, group: str) -> None:
        with self._lock:
            removed = [key for key in self._table if key[0] == group]
            for key in removed:
                del self._table[key]
            self._dirty = self._dirty or bool(removed)
        self.persist()
        for key in removed:
            self._changed(key, None)

    def _document_locked(self) -> dict:
        return {"popStageTable": [{"group": g, "topic": t, **s.to_json()} for (g, t), s in sorted(self._table.items())]}

    def __repr__(self) -> str:
        return f"<PopStageRegistry entries={len(self._table)}>"


def parse_pop_stages(document: dict) -> dict[tuple[str, str], StagedTopic]:
    """(group, topic) -> ``StagedTopic`` of a ``PopStageRegistry.to_json`` document; ValueError when it does not
    parse."""
    try:
        return {
            (entry["group"], entry["topic"]): StagedTopic.from_json(entry)
            for entry in document.get("popStageTable", [])
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"staged POP registrations do not parse: {exc!r}") from None


class StagedPop:
    """The staged pop mode (``PopService.staged``): the async shell around ``stage_gate.decide``."""

    reads_retry_topic: bool = True
    recheck_ms: int | None = TIME_RECHECK_MS  # a stage's messages come back in place when their invisible time passes

    def __init__(
        self,
        *,
        registry: PopStageRegistry,
        store,
        topics,
        offsets,
        revive_queues: list[ReviveQueue],
        write_path: WritePathSwitch,
        plain: NormalPop,
        notify: Callable[[str], None],
        count: Callable[[str, str, int, str, int], None],
    ):
        self.registry = registry
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._revive_queues = revive_queues
        # CKs, their ACKs and dead letters go through ``writes``, as normal POP's: on a slave acting as master
        # they escape to another group (``escaped_in_flight`` then shows the gate what it cannot read here).
        self._write_path = write_path
        self._plain = plain
        self._notify = notify  # wakes the pops waiting on a topic
        self._locks: dict[tuple[str, str, int], asyncio.Lock] = {}
        # revive's counts of (group, topic, queue id, "retried" | "dead_lettered"), which group describe shows:
        # a staged queue's redeliveries are its retries
        self._count = count

    @property
    def writes(self) -> PopWrites:
        """Where CK/ACK records and dead letters go now (``broker.write_path``)."""
        return self._write_path.current.pop

    def is_staged(self, group: str, topic: str) -> bool:
        return self.registry.get(group, topic) is not None

    # -- registration ---------------------------------------------------------------------------------------------
    def register(self, group: str, topic: str, definitions: list[int], *, restart: bool = False) -> StagedTopic:
        """Stage ``topic`` for ``group``. A first registration (or ``restart``: a new sale) starts every queue's
        sequence at the group's next offset to pop; a later one keeps the origins and replaces the definitions."""
        try:
            definitions = check_definitions(definitions)
        except ValueError as exc:
            raise BadRequestError(str(exc)) from None
        topic_config = self._topics.require(topic)
        old = self.registry.get(group, topic)
        origins = {} if old is None or restart else dict(old.origins)
        for queue_id in range(topic_config.read_queue_nums):
            origins.setdefault(queue_id, self._next_offset(group, topic, queue_id))
        staged = StagedTopic(definitions, origins)
        self.registry.put(group, topic, staged)
        log.info(
            "event=pop_stages_registered group=%s topic=%s definitions=%s restart=%s",
            group,
            topic,
            definitions,
            restart,
        )
        return staged

    def unregister(self, group: str, topic: str) -> bool:
        if self.registry.get(group, topic) is None:
            return False
        self.registry.put(group, topic, None)
        return True

    def _next_offset(self, group: str, topic: str, queue_id: int) -> int:
        committed = self._offsets.query(group, topic, queue_id)
        return self._store.min_queue_offset(topic, queue_id) if committed is None else committed

    # -- pop ----------------------------------------------------------------------------------------------------------
    async def pop_queue(
        self, receive: Receive, topic: str, queue_id: int, wanted: int, result: PopResult
    ) -> PoppedQueue | None:
        """What one pop takes from a staged queue: a ``PoppedQueue`` (new messages of the current stage, or
        expired ones again) or None."""
        group, keep, max_attempts = receive.request.group, receive.keep, receive.max_attempts
        staged = self.registry.get(group, topic)
        if staged is None:  # the pop retry topic, or a registration removed while this pass was under way
            return await self._plain.pop_queue(receive, topic, queue_id, wanted, result)
        next_offset = start_offset(self._store, self._offsets, group, topic, queue_id, receive.request.init_mode)
        origin = staged.origins.get(queue_id)
        if origin is None:  # a queue added to the topic after the registration
            staged.origins[queue_id] = origin = next_offset
            self.registry.put(group, topic, staged)
        # Wait for the lock (a pop holds it for one store append): consumers of one staged queue share it,
        # and skipping it as the plain path does would send them to sleep until the poll time ends.
        async with self._locks.setdefault((group, topic, queue_id), asyncio.Lock()):
            while True:
                in_flight, holders = self._in_flight(group, topic, queue_id)
                decision = decide(
                    staged.definitions,
                    origin,
                    list(in_flight.values()),
                    next_offset,
                    result.pop_time_ms,
                    wanted,
                    max_attempts,
                )
                if decision.dead_letters:
                    await self._dead_letter(group, topic, queue_id, decision.dead_letters, in_flight, holders)
                    continue
                if decision.redeliver:
                    records = await self._redeliver(group, topic, queue_id, decision, holders, result)
                    if not records:
                        return None
                    self._count(group, topic, queue_id, "retried", len(records))
                    return PoppedQueue(
                        topic,
                        queue_id,
                        record_queue_offset(records[0]),
                        records,
                        retry=False,
                        reconsume_times=decision.redeliver_attempt,
                    )
                records = await self._fresh(group, topic, queue_id, decision, result, keep)
                if not records:
                    return None
                return PoppedQueue(topic, queue_id, record_queue_offset(records[0]), records, retry=False)

    def _in_flight(self, group: str, topic: str, queue_id: int):
        """Offset -> ``InFlight`` from the open CKs of the queue, and the (revive queue, CK)s holding each (none
        for a CK that escaped: its ack goes with the consumer's, through the write path)."""
        by_offset: dict[int, InFlight] = {}
        holders: dict[int, list[tuple[ReviveQueue, PopCheckpoint]]] = {}
        open_cks: list[tuple[ReviveQueue | None, PopCheckpoint]] = []
        for queue in self._revive_queues:
            queue.catch_up()  # acks, changes and this pop's own writes
            open_cks += [(queue, ck) for ck in queue.ledger.open_of_queue(group, topic, queue_id)]
        open_cks += [(None, ck) for ck in self.writes.escaped_in_flight(group, topic, queue_id)]
        for holder, ck in open_cks:
            for offset in ck.unacked_offsets():
                seen = by_offset.get(offset)
                # In two open CKs only after a crash between a redelivery's two writes: the later wins.
                by_offset[offset] = InFlight(
                    offset,
                    max(ck.revive_time_ms, seen.deadline_ms if seen else 0),
                    max(ck.attempt, seen.attempt if seen else 0),
                )
                if holder is not None:
                    holders.setdefault(offset, []).append((holder, ck))
        return by_offset, holders

    async def _close(self, offsets, holders) -> None:
        """ACK every open CK of this broker's revive queues holding ``offsets`` (through the write path: an acting
        slave keeps them in its side file)."""
        acked: dict[tuple[int, str], tuple[ReviveQueue, PopCheckpoint, list[int]]] = {}
        for offset in offsets:
            for queue, ck in holders.get(offset, ()):
                acked.setdefault((queue.queue_id, ck.key), (queue, ck, []))[2].append(offset)
        by_queue: dict[int, tuple[ReviveQueue, list[AckRecord]]] = {}
        for queue, ck, done in acked.values():
            by_queue.setdefault(queue.queue_id, (queue, []))[1].append(ck.ack_of(done))
        for queue, acks in by_queue.values():
            try:
                await self.writes.acks(queue, acks)
            except NotReplicatedError:
                pass  # stored here; a slave lacking it sees the message in two CKs, and the later one wins

    def _read(self, topic: str, queue_id: int, offset: int) -> bytes | None:
        got = self._store.get_messages(topic, queue_id, offset, 1)
        if got.status is GetStatus.FOUND and got.records and record_queue_offset(got.records[0]) == offset:
            return got.records[0]
        return None

    async def _dead_letter(self, group, topic, queue_id, offsets, in_flight, holders) -> None:
        letters = []
        for offset in offsets:
            record = self._read(topic, queue_id, offset)
            if record is None:
                log.warning(
                    "event=staged_dead_letter_unreadable group=%s topic=%s queue=%d offset=%d",
                    group,
                    topic,
                    queue_id,
                    offset,
                )
                continue
            msg = decode_record(record)[0]
            msg.reconsume_times = in_flight[offset].attempt
            letters.append(copies.dead_letter(msg, group, copies.REASON_MAX_ATTEMPTS))
        if letters:  # the letters first: a crash before the ACK dead-letters again, never loses
            await self.writes.put_messages(letters)
        await self._close(offsets, holders)
        self._count(group, topic, queue_id, "dead_lettered", len(letters))

    async def _redeliver(self, group, topic, queue_id, decision, holders, result) -> list[bytes]:
        records: list[bytes] = []
        gone: list[int] = []
        for offset in decision.redeliver:
            record = self._read(topic, queue_id, offset)
            if record is None:
                gone.append(offset)
            else:
                records.append(record)
        if gone:  # removed by retention: nothing to hand out, it is done
            log.warning(
                "event=staged_redelivery_gone group=%s topic=%s queue=%d offsets=%s", group, topic, queue_id, gone
            )
            await self._close(gone, holders)
        if not records:
            return []
        queue = self._revive_queues[result.revive_queue_id]
        ck = result.checkpoint(
            group, topic, queue_id, [record_queue_offset(r) for r in records], decision.redeliver_attempt
        )
        if queue.ledger.is_open(ck.key):
            return []  # the old CK's key (a 0 ms invisible time, popped again in its millisecond): next pop
        result.revive_queue_id = await self.writes.checkpoint(queue, ck)  # the new CK first: never in no CK
        await self._close(ck.queue_offsets, holders)
        return records

    async def _fresh(self, group, topic, queue_id, decision, result, keep) -> list[bytes]:
        start, end = decision.fresh_from, decision.fresh_end
        if end <= start:
            return []
        got = self._store.get_messages(
            topic, queue_id, start, end - start, tag_filter=keep.tags_code, record_filter=keep.record
        )
        if got.status is GetStatus.OFFSET_OVERFLOW_BADLY:
            self._offsets.reset(group, topic, queue_id, got.max_offset)
            return []
        if got.status not in (
            GetStatus.FOUND,
            GetStatus.NO_MATCHED_MESSAGE,
            GetStatus.MESSAGE_WAS_REMOVING,
            GetStatus.OFFSET_TOO_SMALL,
        ):
            return []
        # A filtered read may scan past the stage end: what lies there waits for its stage.
        records = [r for r in got.records if record_queue_offset(r) < end]
        next_offset = (
            got.next_begin_offset if got.status is GetStatus.OFFSET_TOO_SMALL else min(got.next_begin_offset, end)
        )
        if records:
            ck = result.checkpoint(group, topic, queue_id, [record_queue_offset(r) for r in records])
            result.revive_queue_id = await self.writes.checkpoint(self._revive_queues[result.revive_queue_id], ck)
            result.rest_num += max(got.max_offset - next_offset, 0)
        self._offsets.commit(group, topic, queue_id, next_offset)
        return records

    # -- handles ------------------------------------------------------------------------------------------------------
    def hold_handle(self, group: str, handle: ReceiptHandle) -> AbstractContextManager[None]:
        return self._plain.hold_handle(group, handle)

    async def ack(self, group: str, handles: list[ReceiptHandle]) -> list[InvalidReceiptHandleError | None]:
        outcome, topics = await self._plain.close(group, handles)
        for topic in topics:
            self._notify(topic)  # the ack may end a stage: pops waiting for the next one go now
        return outcome

    async def change_invisible(
        self, group: str, handle: ReceiptHandle, invisible_ms: int, now_ms: int
    ) -> ReceiptHandle:
        return await self._plain.change_invisible(group, handle, invisible_ms, now_ms)

    def __repr__(self) -> str:
        return f"<StagedPop {self.registry!r}>"
