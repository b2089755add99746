"""The staged-concurrent consume service of the push consumer (RIP-22; docs/staged.md).

The third consume service next to the concurrent and orderly ones (client/consume_service.py), with the same
``submit``/``shutdown``. Per owned queue it keeps a ``QueueStageScheduler`` (client/stages.py) and a pump task:
while the queue's broker lock is held (clustering, as for orderly listeners) the pump starts what the scheduler
allows on the bounded pool shared by all queues and sleeps until a listener
finishes, a message arrives or a held-back failure may run again. A listener call gets up to
``batch_size`` (``consume_batch_size``) messages of one sequence and one stage, and a
``ConsumeStagedConcurrentlyContext`` naming them; its result applies to all.

Definitions: the listener's ``stage_definitions(strategy)`` are read when a strategy is first seen and again at
every rebalance (``reload_definitions``); a sequence whose definitions changed takes them and asks the reset
hook. Definitions that are not a list of positive integers (or whose call raises) are refused with an error
in the log (``event=stage_definitions_refused``): a new sequence's messages wait for valid ones, a running one
keeps its old ones.

Results: SUCCESS completes the message; SUSPEND_CURRENT_QUEUE_A_MOMENT (or an exception) retries it locally
after the suspend time while the rest of its stage goes on and the next stage waits. After
``max_reconsume_times`` local retries it goes to the DLQ (dropped with a warning when broadcasting, as a
concurrent consumer drops it), which completes it: a failing message never holds its queue for good.

Durability: when the committable offset of a queue moves, the scheduler's ``StageOffsetRecord`` for it is
written to the stage offset store (the broker, or a local file when broadcasting); writes of one queue are
coalesced, and stop once the queue is dropped (the new owner then resumes from the last record, seeing some
messages again, never a stage out of order). A rebalance ``drain``s a queue before unlocking it: its listeners in
flight finish and their progress is stored first. ``resume_offset`` gives the push consumer the queue offset a
record is valid at: consumption restarts there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from pocketmq.client.consume_service import ConsumerHooks, OrderlyConsumeService
from pocketmq.client.listener import ConsumeOrderlyStatus, ConsumeStagedConcurrentlyContext, StagedConcurrentListener
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.stages import (
    PLAIN_CONCURRENT,
    QueueStageScheduler,
    StageKey,
    StageOffsetRecord,
    check_definitions,
)
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.runtime.periodic import spawn_watched

log = logging.getLogger(__name__)

_IDLE_CHECK_MS = 1000


@dataclass
class _StagedQueue:
    pq: ProcessQueue
    scheduler: QueueStageScheduler
    messages: dict[int, MessageExt] = field(default_factory=dict)  # queue offset -> message, pending or running
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    unwritten: StageOffsetRecord | None = None  # the newest record not yet handed to the store
    draining: bool = False  # the queue is being dropped: start nothing more of it
    running: set[asyncio.Task] = field(default_factory=set)  # its listener calls in flight
    writer: asyncio.Task | None = None  # the one write in flight, if any


class StagedConsumeService(OrderlyConsumeService):
    """``stage_store`` has ``async read(mq) -> StageOffsetRecord | None`` and ``async write(mq, record)``;
    ``max_reconsume_times`` >= 0 (the consumer resolves its -1 default)."""

    def __init__(
        self,
        hooks: ConsumerHooks,
        listener: StagedConcurrentListener,
        stage_store,
        *,
        threads: int = 20,
        batch_size: int = 1,
        suspend_ms: int = 1000,
        max_reconsume_times: int = 16,
        lock_retry_ms: int = 100,
    ):
        if max_reconsume_times < 0:
            raise ValueError("a staged consumer retries a message a bounded number of times")
        super().__init__(
            hooks,
            listener,
            threads=threads,
            batch_size=batch_size,
            suspend_ms=suspend_ms,
            max_reconsume_times=max_reconsume_times,
            lock_retry_ms=lock_retry_ms,
        )
        self._staged_listener = listener
        self._store = stage_store
        self._threads = threads
        self._in_flight = 0
        self._records: dict[MessageQueue, StageOffsetRecord] = {}  # read at assignment, used by the first submit
        self._states: dict[MessageQueue, _StagedQueue] = {}
        self._pumps: dict[MessageQueue, asyncio.Task] = {}
        # strategy -> its checked definitions (None: refused), read once per strategy between two reloads
        self._definitions: dict[str, list[int] | None] = {}

    async def resume_offset(self, mq: MessageQueue) -> int | None:
        """The queue offset to consume ``mq`` from (None: no stage record, use the consumer offset)."""
        try:
            record = await self._store.read(mq)
        except (PocketMQError, OSError, ValueError) as exc:
            raise PocketMQError(f"stage offsets of {mq} unreadable: {exc}") from exc
        if record is None:
            self._records.pop(mq, None)
            return None
        self._records[mq] = record
        return record.commit_offset

    def _key(self, msg: MessageExt) -> StageKey:
        strategy = self._staged_listener.compute_strategy(msg)
        if strategy is None:
            return PLAIN_CONCURRENT
        return strategy, self._staged_listener.compute_group(msg)

    def _definitions_of(self, strategy: str) -> list[int] | None:
        if strategy not in self._definitions:
            given = None
            try:
                given = self._staged_listener.stage_definitions(strategy)
                self._definitions[strategy] = check_definitions(given)
            except Exception as exc:  # the listener's code: a mistake there must not stop the consumer
                log.error(
                    "event=stage_definitions_refused strategy=%r definitions=%r error=%s "
                    "(the strategy's messages wait for valid definitions, read again at the next rebalance)",
                    strategy,
                    given,
                    exc,
                )
                self._definitions[strategy] = None
        return self._definitions[strategy]

    def reload_definitions(self) -> None:
        """Read every strategy's definitions again (at each rebalance): sequences whose definitions changed take
        them and ask the reset hook; refused ones stay as they were."""
        self._definitions.clear()
        for mq, state in self._states.items():
            for key in state.scheduler.reload():
                log.info(
                    "event=stage_definitions_taken mq=%s strategy=%r group=%r definitions=%s stage_offset=%d",
                    mq,
                    key[0],
                    key[1],
                    self._definitions.get(str(key[0])),
                    state.scheduler.stage_offset(key),
                )
            state.wake.set()

    def _reset_hook(self, mq: MessageQueue):
        listener = self._staged_listener

        def reset(key: StageKey, offset: int) -> int | None:
            replaced = listener.reset_current_stage_offset_if_need(mq, key[0], key[1], offset)
            if replaced is not None and (not isinstance(replaced, int) or isinstance(replaced, bool) or replaced < 0):
                log.error("event=stage_offset_reset_refused mq=%s key=%s offset=%r", mq, key, replaced)
                return None
            return replaced

        return reset

    def _state(self, pq: ProcessQueue, mq: MessageQueue) -> _StagedQueue:
        state = self._states.get(mq)
        if state is None or state.pq is not pq:  # first submit since (re)assignment
            record = self._records.pop(mq, None)
            scheduler = QueueStageScheduler(
                self._definitions_of, record.stage_offsets if record else None, self._reset_hook(mq)
            )
            state = self._states[mq] = _StagedQueue(pq, scheduler)
            old = self._pumps.pop(mq, None)
            if old is not None:
                old.cancel()
            self._pumps[mq] = spawn_watched(self._pump(mq, state), f"pocketmq-staged-{mq}")
        return state

    def submit(self, pq: ProcessQueue, mq: MessageQueue, messages: list[MessageExt]) -> None:
        state = self._state(pq, mq)
        for msg in messages:
            if msg.queue_offset not in state.messages:
                state.messages[msg.queue_offset] = msg
                state.scheduler.add(msg.queue_offset, self._key(msg))
        state.wake.set()

    async def _pump(self, mq: MessageQueue, state: _StagedQueue) -> None:
        try:
            while not state.pq.dropped and not state.draining:
                state.wake.clear()
                if state.scheduler.pending_count and not await self._hooks.ensure_locked(mq, state.pq):
                    await asyncio.sleep(self._lock_retry_ms / 1000)
                    continue
                now_ms = time.monotonic() * 1000
                for batch in state.scheduler.ready_batches(self._threads - self._in_flight, self._batch_size, now_ms):
                    self._in_flight += 1
                    task = self._spawn(self._consume_batch(mq, state, batch))
                    state.running.add(task)
                    task.add_done_callback(state.running.discard)
                retry_ms = state.scheduler.next_retry_ms()  # at least once a second: notice a dropped queue
                timeout_s = (
                    min(_IDLE_CHECK_MS if retry_ms is None else max(retry_ms - now_ms, 1), _IDLE_CHECK_MS) / 1000
                )
                try:
                    async with asyncio.timeout(timeout_s):
                        await state.wake.wait()
                except TimeoutError:
                    pass
        finally:
            if self._states.get(mq) is state:
                del self._states[mq]
                self._pumps.pop(mq, None)

    def _wake_all(self) -> None:
        for state in self._states.values():  # the pool is shared: a free thread may serve any queue
            state.wake.set()

    async def _consume_batch(self, mq: MessageQueue, state: _StagedQueue, offsets: list[int]) -> None:
        batch = [state.messages[offset] for offset in offsets]
        (strategy, stage_group), stage = state.scheduler.place(offsets[0])
        context = ConsumeStagedConcurrentlyContext(mq, strategy_id=strategy, stage_group=stage_group, stage_index=stage)
        try:
            status = await self._call_listener(batch, context)
        finally:
            self._in_flight -= 1
            self._wake_all()
        if state.pq.dropped:  # the queue moved on: its new owner resumes from the stored record
            return
        self.consumed_total += len(batch)
        if status is ConsumeOrderlyStatus.SUCCESS or await self._given_up(batch, mq):
            for offset in offsets:
                state.scheduler.complete(offset)
                del state.messages[offset]
            commit_offset = state.pq.remove(batch)
            if commit_offset >= 0:
                self._record_changed(mq, state, state.scheduler.advance_commit(commit_offset))
                self._hooks.offset_done(mq, commit_offset)
        else:
            suspend_ms = context.suspend_current_queue_time_ms
            retry_at_ms = time.monotonic() * 1000 + (suspend_ms if suspend_ms > 0 else self._suspend_ms)
            for msg in batch:
                msg.reconsume_times += 1
                state.scheduler.fail(msg.queue_offset, retry_at_ms)
            log.info(
                "event=staged_consume_suspended mq=%s offsets=%s reconsume_times=%d",
                mq,
                offsets,
                batch[0].reconsume_times,
            )
        state.wake.set()

    async def _given_up(self, batch: list[MessageExt], mq: MessageQueue) -> bool:
        """True when the batch's retries are spent and it left the queue: to the DLQ (clustering) or dropped
        (broadcasting has no DLQ, as for concurrent consumption). A failed DLQ send keeps it here: retried."""
        if not all(m.reconsume_times >= self._max_reconsume_times for m in batch):
            return False
        if self._hooks.broadcasting:
            log.warning(
                "event=staged_consume_dropped mq=%s offsets=%s reconsume_times=%d",
                mq,
                [m.queue_offset for m in batch],
                batch[0].reconsume_times,
            )
            return True
        return await self._dead_letter_if_exhausted(batch, mq)

    def _record_changed(self, mq: MessageQueue, state: _StagedQueue, record: StageOffsetRecord) -> None:
        state.unwritten = record
        if state.writer is None or state.writer.done():
            state.writer = self._spawn(self._write_records(mq, state))

    async def _write_records(self, mq: MessageQueue, state: _StagedQueue) -> None:
        """Write the newest record until none is left (one write in flight per queue)."""
        while state.unwritten is not None and not state.pq.dropped:
            record, state.unwritten = state.unwritten, None
            try:
                await self._store.write(mq, record)
            except (PocketMQError, OSError) as exc:  # the next change writes a newer record
                log.warning(
                    "event=stage_offsets_write_failed mq=%s commit_offset=%d error=%s", mq, record.commit_offset, exc
                )

    async def drain(self, mq: MessageQueue, timeout_s: float = 10.0) -> None:
        """Before a rebalance unlocks ``mq``: start nothing more of it, let its listeners in flight finish with
        their results recorded and the queue's stage record written (at most ``timeout_s``), as RocketMQ's
        orderly consumer takes a queue's consume lock before unlocking it. The new owner then resumes after
        them, and no earlier-stage message still runs on the old owner while it starts later ones."""
        state = self._states.get(mq)
        if state is None:
            return
        state.draining = True
        state.wake.set()
        if state.running:
            _, late = await asyncio.wait(set(state.running), timeout=timeout_s)
            if late:
                log.warning("event=staged_drain_timeout mq=%s running=%d", mq, len(late))
        if state.writer is not None and not state.writer.done():
            await asyncio.wait({state.writer}, timeout=timeout_s)

    async def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop starting messages, let listeners in flight finish, then flush the stage records."""
        pumps = list(self._pumps.values())
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        await super().shutdown(timeout_s)
        if self._tasks:  # record writes spawned by the last completions
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
