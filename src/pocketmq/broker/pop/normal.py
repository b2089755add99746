"""Normal POP: a queue's messages handed out under a CK, acked against it; revive takes back what is not acked.

**Pop** of one (group, topic, queue), under the queue's lock (``pop_locks``: a pop finding it held skips the
queue): read up to ``wanted`` messages from the group's offset (``start_offset``), append a CK naming them to
the pass's revive queue (through ``writes``: an acting slave escapes it), then commit the next offset: the
consumer offset advances at pop time, once the CK is stored. A read that finds nothing to hand out moves the
offset past filtered or removed messages, or back in range.

**Ack / change invisible time / check** validate a receipt handle against the ledger of its revive queue,
caught up first: a handle of another broker, of a CK that is closed (acked, changed or revived already) or of
an offset that is not in its CK is ``InvalidReceiptHandleError``. The acks that arrive in one loop turn (single
acks of many requests, batch acks) are checked together and appended together: one ACK record per CK, one
append per revive queue, each request answered with its own outcome (``runtime/turn_batch.py``); a change appends an ACK of the old handle and a one-message CK with the new deadline
(pop time = now) in one store call, and returns the new handle; the attempt does not change. On a slave acting
as master, a handle of this group whose CK is not here may be one whose CK a pop here escaped to another
group: its ack or change goes there when the write path vouches for it (``writes.forwardable``), else the
handle is invalid.

The staged mode (``pop/staged.py``) uses this mode for its pop retry topic and for its handles.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint, ck_key
from pocketmq.broker.pop.fifo import ORDERLY_REVIVE_QUEUE_ID
from pocketmq.broker.pop.mode import ChangeNotReplicatedError
from pocketmq.broker.pop.pop_locks import PopLocks
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.receive import PoppedQueue, PopResult, Receive
from pocketmq.broker.pop.revive_queue import ReviveQueue
from pocketmq.broker.pop.start_offset import start_offset
from pocketmq.common.errors import InvalidReceiptHandleError, NotReplicatedError
from pocketmq.runtime.turn_batch import TurnBatch
from pocketmq.store.api import GetStatus

if TYPE_CHECKING:
    from pocketmq.broker.write_path import PopWrites, WritePathSwitch

# An ack request's outcome: one entry per handle (None: acked), and the topics of the CKs it closed here.
_Closed = tuple[list[InvalidReceiptHandleError | None], set[str]]


class NormalPop:
    reads_retry_topic: bool = True
    recheck_ms: int | None = None

    def __init__(
        self,
        *,
        store,
        offsets,
        broker_name: str,
        revive_queues: list[ReviveQueue],
        locks: PopLocks,
        write_path: WritePathSwitch,
    ):
        self._store = store
        self._offsets = offsets
        self._broker_name = broker_name
        self._revive_queues = revive_queues
        self._locks = locks
        self._write_path = write_path
        self._acks: TurnBatch[tuple[str, list[ReceiptHandle]], _Closed] = TurnBatch(self._close_all)

    @property
    def writes(self) -> PopWrites:
        """Where CK/ACK records and dead letters go now (``broker.write_path``)."""
        return self._write_path.current.pop

    # -- pop ----------------------------------------------------------------------------------------------------------
    async def pop_queue(
        self, receive: Receive, topic: str, queue_id: int, wanted: int, result: PopResult
    ) -> PoppedQueue | None:
        group = receive.request.group
        lock = self._locks.free(group, topic, queue_id)
        if lock is None:
            return None
        async with lock:
            queue_offset = start_offset(self._store, self._offsets, group, topic, queue_id, receive.request.init_mode)
            keep = receive.keep
            got = self._store.get_messages(
                topic, queue_id, queue_offset, wanted, tag_filter=keep.tags_code, record_filter=keep.record
            )
            if got.status is GetStatus.FOUND and got.records:
                popped = PoppedQueue(topic, queue_id, 0, got.records, retry=topic != receive.request.topic)
                offsets = popped.queue_offsets
                popped.start_offset = offsets[0]
                ck = result.checkpoint(group, topic, queue_id, offsets)
                result.revive_queue_id = await self.writes.checkpoint(self._revive_queues[result.revive_queue_id], ck)
                self._offsets.commit(group, topic, queue_id, got.next_begin_offset)
                result.rest_num += max(got.max_offset - got.next_begin_offset, 0)
                return popped
            self._move_past(group, topic, queue_id, got)
        return None

    def _move_past(self, group: str, topic: str, queue_id: int, got) -> None:
        """Nothing to hand out: move the group's offset past filtered or removed messages, or back in range."""
        if got.status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING, GetStatus.OFFSET_TOO_SMALL):
            self._offsets.commit(group, topic, queue_id, got.next_begin_offset)
        elif got.status is GetStatus.OFFSET_OVERFLOW_BADLY:
            self._offsets.reset(group, topic, queue_id, got.max_offset)

    # -- handles ------------------------------------------------------------------------------------------------------
    def _open_checkpoint(
        self, group: str, handle: ReceiptHandle, *, catch_up: bool = True
    ) -> tuple[ReviveQueue, PopCheckpoint]:
        if handle.broker_name != self._broker_name:
            raise InvalidReceiptHandleError(f"the receipt handle is broker {handle.broker_name}'s, not this one's")
        if not 0 <= handle.revive_queue_id < len(self._revive_queues):
            raise InvalidReceiptHandleError(f"the receipt handle names revive queue {handle.revive_queue_id}")
        queue = self._revive_queues[handle.revive_queue_id]
        if catch_up:
            queue.catch_up()
        key = ck_key(handle.topic, group, handle.queue_id, handle.start_offset, handle.pop_time_ms, handle.broker_name)
        ck = queue.ledger.open_checkpoint(key)
        index = ck.index_of(handle.queue_offset) if ck is not None else None
        if ck is None or index is None or ck.is_acked(index):
            raise InvalidReceiptHandleError(
                "the receipt handle is stale: its message was acked, changed or "
                "revived already, or it was never popped by this group"
            )
        return queue, ck

    def _forwardable(self, group: str, handle: ReceiptHandle) -> bool:
        """A handle of this group whose CK is not here may still be good on a slave acting as master: its CK was
        escaped to another group, where its ack goes too."""
        key = ck_key(handle.topic, group, handle.queue_id, handle.start_offset, handle.pop_time_ms, handle.broker_name)
        return (
            handle.broker_name == self._broker_name
            and handle.revive_queue_id != ORDERLY_REVIVE_QUEUE_ID
            and self.writes.forwardable(key, handle.queue_offset)
        )

    @contextlib.contextmanager
    def hold_handle(self, group: str, handle: ReceiptHandle) -> Iterator[None]:
        """Checked and held in one step (no await between): a CK revive picked already is refused here, and one
        held here is not picked until the block ends."""
        try:
            queue, ck = self._open_checkpoint(group, handle)
        except InvalidReceiptHandleError:
            if not self._forwardable(group, handle):
                raise
            queue = None  # its CK lives on another broker, where its ack goes
        if queue is None:
            yield
            return
        queue.ledger.hold(ck.key)
        try:
            yield
        finally:
            queue.ledger.unhold(ck.key)

    async def ack(self, group: str, handles: list[ReceiptHandle]) -> list[InvalidReceiptHandleError | None]:
        outcome, _ = await self.close(group, handles)
        return outcome

    async def close(
        self, group: str, handles: list[ReceiptHandle]
    ) -> tuple[list[InvalidReceiptHandleError | None], set[str]]:
        """``ack``'s outcome, and the topics of the CKs closed here (not forwarded). The acks of one loop turn are
        checked and written together (``_close_all``)."""
        return await self._acks.submit((group, handles))

    async def _close_all(self, requests: list[tuple[str, list[ReceiptHandle]]]) -> list[_Closed | Exception]:
        """The ack requests of one loop turn: each revive queue caught up once, every handle checked, then one
        append per revive queue (per CK, one ACK record of every offset acked in the turn), waiting for a slave
        under SYNC replication. Each request gets its own outcome: its invalid handles, or the exception of a
        write that held one of its records (the other requests of the turn are not failed by it)."""
        for queue_id in {h.revive_queue_id for _, handles in requests for h in handles}:
            if 0 <= queue_id < len(self._revive_queues):
                self._revive_queues[queue_id].catch_up()
        outcomes: list[list[InvalidReceiptHandleError | None]] = []
        acks: dict[tuple[int, str], _CkAcks] = {}
        forwarded: list[AckRecord] = []
        forwarding: set[int] = set()  # the requests with a forwarded ack
        for request, (group, handles) in enumerate(requests):
            outcome: list[InvalidReceiptHandleError | None] = []
            for handle in handles:
                try:
                    queue, ck = self._open_checkpoint(group, handle, catch_up=False)
                except InvalidReceiptHandleError as exc:
                    if not self._forwardable(group, handle):
                        outcome.append(exc)
                        continue
                    forwarded.append(ack_of_handle(group, handle))  # its CK lives on another broker
                    forwarding.add(request)
                else:
                    entry = acks.get((queue.queue_id, ck.key))
                    if entry is None:
                        entry = acks[(queue.queue_id, ck.key)] = _CkAcks(queue, ck)
                    entry.offsets[handle.queue_offset] = None
                    entry.requests.add(request)
                outcome.append(None)
            outcomes.append(outcome)
        failed: dict[int, Exception] = {}
        by_queue: dict[int, list[_CkAcks]] = {}
        for entry in acks.values():
            by_queue.setdefault(entry.queue.queue_id, []).append(entry)
            entry.queue.ledger.hold(entry.ck.key)  # until its ACK is stored: the writes below wait for a slave in turn
        try:
            for queue_id, entries in by_queue.items():
                try:
                    await self.writes.acks(self._revive_queues[queue_id], [e.ck.ack_of(e.offsets) for e in entries])
                except Exception as exc:
                    for entry in entries:
                        for request in entry.requests:
                            failed.setdefault(request, exc)
        finally:
            for entry in acks.values():
                entry.queue.ledger.unhold(entry.ck.key)
        if forwarded:
            try:
                await self.writes.forward_acks(forwarded)
            except Exception as exc:
                for request in forwarding:
                    failed.setdefault(request, exc)
        topics: list[set[str]] = [set() for _ in requests]
        for entry in acks.values():
            for request in entry.requests:
                topics[request].add(entry.ck.topic)
        return [failed.get(i) or (outcome, topics[i]) for i, outcome in enumerate(outcomes)]

    async def change_invisible(
        self, group: str, handle: ReceiptHandle, invisible_ms: int, now_ms: int
    ) -> ReceiptHandle:
        try:
            queue, _ = self._open_checkpoint(group, handle)
        except InvalidReceiptHandleError:
            if not self._forwardable(group, handle):
                raise
            queue = None  # its CK lives on another broker: the acting slave forwards the change there
        # The new CK must not have the old one's key, which a change in the pop's millisecond at the CK's start
        # offset would give it: the ledger would take it for the old CK (whose other messages would be lost)
        # and the old handle would stay valid. A pop time one millisecond later keeps the keys apart.
        pop_time_ms = max(now_ms, handle.pop_time_ms + 1)
        new_ck = PopCheckpoint.of_offsets(
            handle.topic,
            group,
            handle.queue_id,
            [handle.queue_offset],
            pop_time_ms,
            invisible_ms,
            self._broker_name,
            handle.revive_queue_id,
        )
        try:
            revive_queue_id = await self.writes.change(queue, ack_of_handle(group, handle), new_ck)
        except NotReplicatedError as exc:  # changed here, not on a slave: the handle stays good on this broker
            if queue is None:  # only a write to a revive queue of this broker waits for a slave
                raise
            raise ChangeNotReplicatedError(exc, handle.changed(pop_time_ms, invisible_ms, queue.queue_id)) from exc
        return handle.changed(pop_time_ms, invisible_ms, revive_queue_id)

    def __repr__(self) -> str:
        return f"<NormalPop revive_queues={len(self._revive_queues)} {self._locks!r}>"


@dataclass(slots=True)
class _CkAcks:
    """The acks of one CK in a loop turn's batch: its offsets (in arrival order, once each) and the requests."""

    queue: ReviveQueue
    ck: PopCheckpoint
    offsets: dict[int, None] = field(default_factory=dict)
    requests: set[int] = field(default_factory=set)


def ack_of_handle(group: str, handle: ReceiptHandle) -> AckRecord:
    return AckRecord(
        handle.topic,
        group,
        handle.queue_id,
        handle.start_offset,
        handle.pop_time_ms,
        handle.broker_name,
        (handle.queue_offset,),
    )
