"""FIFO POP: one message of a message group in flight at a time, the async shell around ``OrderlyQueue``.

A FIFO group (``consumeMessageOrderly``, or a remoting pop with ``order``) pops each (topic, queue) through its
``OrderlyQueue`` (kept in ``FifoPopState``, ``pop/fifo.py``), under the queue's lock (``pop_locks``, shared
with the normal mode): read a window of ``FIFO_WINDOW`` messages from the queue's commit offset, let
``OrderlyQueue.select`` pick what may go (redeliveries of expired messages with attempt + 1 first in their
group), write the dead letters of messages past the group's max attempts, then commit the consumer offset to
the queue's commit offset. No CK is written: receipt handles name revive queue 999 and the message's own
offset. The pop retry topic is not read (redeliveries stay in place, in order).

An ack marks the message done (its message group may deliver its next message: waiting pops are woken); a
change of invisible time moves its deadline, the attempt unchanged. Both are journaled before they answer
(``FifoPopState.promised``: a restart after a ``kill -9`` keeps them) and, under SYNC replication, answer once a
slave holds the FIFO state with them (``writes.fifo_state``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from pocketmq.broker.pop import copies
from pocketmq.broker.pop.fifo import FifoPopState
from pocketmq.broker.pop.mode import TIME_RECHECK_MS, ChangeNotReplicatedError
from pocketmq.broker.pop.orderly import Candidate, OrderlyQueue
from pocketmq.broker.pop.pop_locks import PopLocks
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.receive import PoppedQueue, PopResult, Receive
from pocketmq.broker.pop.start_offset import start_offset
from pocketmq.common.errors import InvalidReceiptHandleError, NotReplicatedError, StoreError
from pocketmq.common.message import MessageExt
from pocketmq.common.record import decode_record, record_queue_offset
from pocketmq.store.api import GetResult, GetStatus

if TYPE_CHECKING:
    from pocketmq.broker.write_path import PopWrites, WritePathSwitch

FIFO_WINDOW = 128  # messages of a FIFO queue considered per pop


class FifoPop:
    reads_retry_topic: bool = False
    recheck_ms: int | None = TIME_RECHECK_MS  # a message group unblocks when its message's invisible time passes

    def __init__(
        self,
        *,
        store,
        offsets,
        broker_name: str,
        state: FifoPopState,
        locks: PopLocks,
        write_path: WritePathSwitch,
        notify: Callable[[str], None],
    ):
        self._store = store
        self._offsets = offsets
        self._broker_name = broker_name
        self._state = state
        self._locks = locks
        self._write_path = write_path
        self._notify = notify  # wakes the pops waiting on a topic
        self.dead_lettered: dict[tuple[str, str, int], int] = {}  # (group, topic, queue id) -> count

    @property
    def writes(self) -> PopWrites:
        """Where CK/ACK records and dead letters go now (``broker.write_path``)."""
        return self._write_path.current.pop

    # -- pop ----------------------------------------------------------------------------------------------------------
    async def pop_queue(
        self, receive: Receive, topic: str, queue_id: int, wanted: int, result: PopResult
    ) -> PoppedQueue | None:
        group, keep = receive.request.group, receive.keep
        lock = self._locks.free(group, topic, queue_id)
        if lock is None:
            return None
        async with lock:
            start = start_offset(self._store, self._offsets, group, topic, queue_id, receive.request.init_mode)
            orderly = self._state.queue(group, topic, queue_id, start)

            def window() -> GetResult:
                return self._store.get_messages(
                    topic,
                    queue_id,
                    orderly.commit_offset,
                    FIFO_WINDOW,
                    tag_filter=keep.tags_code,
                    record_filter=keep.record,
                )

            got = window()
            if got.status is GetStatus.OFFSET_TOO_SMALL:
                orderly.skip_to(got.next_begin_offset)
                got = window()
            records = got.records if got.status is GetStatus.FOUND else []
            by_offset = {record_queue_offset(r): r for r in records}
            if got.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE):
                orderly.mark_done(o for o in range(orderly.commit_offset, got.next_begin_offset) if o not in by_offset)
            messages = {o: decode_record(r)[0] for o, r in by_offset.items()}
            candidates = [Candidate(o, m.message_group or "") for o, m in sorted(messages.items())]
            deliver: list[tuple[int, int]] = []  # (queue offset, attempt)
            while True:
                selection = orderly.select(
                    candidates, result.pop_time_ms, result.invisible_ms, wanted - len(deliver), receive.max_attempts
                )
                deliver += selection.deliver
                if not selection.dead_letters:
                    break
                # Dead letters are done once written; their message groups may deliver their next message now.
                await self._dead_letter(
                    group, topic, queue_id, orderly, [messages[o] for o, _ in selection.dead_letters]
                )
            self._state.changed()
            self._offsets.commit(group, topic, queue_id, orderly.commit_offset)
            if not deliver:
                return None
            deliver.sort()
            return PoppedQueue(
                topic,
                queue_id,
                deliver[0][0],
                [by_offset[o] for o, _ in deliver],
                retry=False,
                attempts=[a for _, a in deliver],
            )

    async def _dead_letter(
        self, group: str, topic: str, queue_id: int, orderly: OrderlyQueue, dead: list[MessageExt]
    ) -> None:
        await self.writes.put_messages([copies.dead_letter(m, group, copies.REASON_MAX_ATTEMPTS) for m in dead])
        for msg in dead:
            orderly.ack(msg.queue_offset)
        key = (group, topic, queue_id)
        self.dead_lettered[key] = self.dead_lettered.get(key, 0) + len(dead)

    # -- handles ------------------------------------------------------------------------------------------------------
    def _in_flight(self, group: str, handle: ReceiptHandle) -> OrderlyQueue:
        """The queue whose message the handle names, in flight; InvalidReceiptHandleError when it is not."""
        if handle.broker_name != self._broker_name:
            raise InvalidReceiptHandleError(f"the receipt handle is broker {handle.broker_name}'s, not this one's")
        orderly = self._state.find(group, handle.topic, handle.queue_id)
        if orderly is None or orderly.attempt_of(handle.queue_offset) == 0:
            raise InvalidReceiptHandleError("the FIFO receipt handle is stale: its message is not in flight")
        return orderly

    def hold_handle(self, group: str, handle: ReceiptHandle) -> AbstractContextManager[None]:
        self._in_flight(group, handle)
        return contextlib.nullcontext()  # no revive: an expired FIFO message comes back only through a pop

    async def ack(self, group: str, handles: list[ReceiptHandle]) -> list[InvalidReceiptHandleError | None]:
        outcome: list[InvalidReceiptHandleError | None] = []
        for handle in handles:
            try:
                self._in_flight(group, handle).ack(handle.queue_offset)
            except InvalidReceiptHandleError as exc:
                outcome.append(exc)
                continue
            self._promised(group, handle)
            self._notify(handle.topic)  # the message group may deliver its next message now
            outcome.append(None)
        if any(error is None for error in outcome):
            await self.writes.fifo_state()
        return outcome

    async def change_invisible(
        self, group: str, handle: ReceiptHandle, invisible_ms: int, now_ms: int
    ) -> ReceiptHandle:
        self._in_flight(group, handle).change_invisible(handle.queue_offset, now_ms, invisible_ms)
        self._promised(group, handle)
        changed = handle.changed(now_ms, invisible_ms, handle.revive_queue_id)
        try:
            await self.writes.fifo_state()
        except NotReplicatedError as exc:  # changed here, not on a slave: the handle stays good on this broker
            raise ChangeNotReplicatedError(exc, changed) from exc
        return changed

    def _promised(self, group: str, handle: ReceiptHandle) -> None:
        try:
            self._state.promised(group, handle.topic, handle.queue_id)
        except OSError as exc:  # done in memory (it holds while this broker runs), not journaled: say so
            raise StoreError(f"FIFO POP state not journaled: {exc}") from exc

    def __repr__(self) -> str:
        return f"<FifoPop {self._state!r}>"
