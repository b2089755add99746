"""The pop engine: receive with invisible time, ack, change invisible time, forward to the DLQ.

Both front ends call ``PopService``. A receive is checked (``receive.admit``), then made in passes: each pass
picks the pop mode (``pop/mode.py``: FIFO for a FIFO group or request, staged for a (group, topic) with stage
definitions, normal otherwise) and the client's queues in its group's gray split (``broker/gray_split.py``),
both looked up again on every pass, and asks the mode for each queue in turn (``receive.visit_order``: the
topic's queues from a rotating start, and unless the mode is FIFO the pop retry topic's ``%RETRY%<group>_<topic>``,
first on every fifth pass), until ``max_count`` (<= 32) messages are taken. When a pass finds nothing and
``poll_ms`` > 0 the receive waits for an arrival in its topics (``PopWaiters``; FIFO and staged receives
re-check every ``TIME_RECHECK_MS`` too, as time alone unblocks them) and makes another pass.

Acks, changes of invisible time and forwards to the DLQ go to the mode of their receipt handle (FIFO handles
carry revive queue id 999). Invisible times below ``min_invisible_ms`` are raised to it, so a client that nacks
with ~0 ms cannot make a hot loop.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING

from pocketmq.broker.gray_split import EVERY_QUEUE, GraySplits
from pocketmq.broker.offsets import persist_behind_commit_log
from pocketmq.broker.pop import copies
from pocketmq.broker.pop.fifo import FifoPopState
from pocketmq.broker.pop.fifo_pop import FifoPop
from pocketmq.broker.pop.mode import ModeKind, PopMode, choose_mode, is_fifo_handle
from pocketmq.broker.pop.normal import NormalPop
from pocketmq.broker.pop.pop_locks import PopLocks
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.receive import (
    PopRequest,
    PopResult,
    Receive,
    admit,
    check_invisible_ms,
    visit_order,
)
from pocketmq.broker.pop.reference_resolver import ReferenceResolver
from pocketmq.broker.pop.revive import ReviveService, retry_limit
from pocketmq.broker.pop.revive_queue import ReviveQueue
from pocketmq.broker.pop.staged import PopStageRegistry, StagedPop
from pocketmq.broker.pop.stats import QueuePopStats, group_stats
from pocketmq.broker.pop.waiters import PopWaiters
from pocketmq.broker.traffic import Traffic
from pocketmq.common.errors import InvalidReceiptHandleError
from pocketmq.common.topic import MessageType, pop_retry_topic
from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.periodic import PeriodicTask

if TYPE_CHECKING:
    from pocketmq.broker.tracer import Tracer
    from pocketmq.broker.write_path import PopWrites, WritePathSwitch

log = logging.getLogger(__name__)


class PopService:
    def __init__(
        self,
        *,
        store,
        topics,
        groups,
        offsets,
        clock,
        broker_name: str,
        revive: ReviveService,
        revive_queues: list[ReviveQueue],
        fifo: FifoPopState,
        stages: PopStageRegistry,
        waiters: PopWaiters,
        min_invisible_ms: int,
        persist_interval_ms: int,
        write_path: WritePathSwitch,
        durable_timeout_ms: int = 5_000,
        gray: GraySplits | None = None,
        traffic: Traffic,
        metrics: MetricsRegistry | None = None,
        references: ReferenceResolver | None = None,
    ):
        self._traffic = traffic  # messages out by topic and group (docs/metrics.md)
        self._store = store
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._clock = clock
        self.broker_name = broker_name
        self.revive = revive
        self.references = references  # dead-letter references revive wrote: resolved into %DLQ%<group>
        self._revive_queues = revive_queues
        self._fifo = fifo
        self._waiters = waiters
        self.min_invisible_ms = min_invisible_ms
        self._durable_timeout_ms = durable_timeout_ms  # how long an offsets write waits for the commit log
        self._gray = gray
        self._pops = itertools.count()
        # Pop moves consumer offsets all the time; saving them often bounds what a kill -9 re-delivers.
        self._persister = PeriodicTask(
            "broker-pop-persist-state", self.persist_state, persist_interval_ms, clock=clock, metrics=metrics
        )
        self.running = False
        self.tracer: Tracer | None = None  # told of each delivery, ack and change (broker/tracer.py)
        # Where CK and ACK records go: the revive queues here, or the escape bridge (a slave acting as master).
        self._write_path = write_path
        self._locks = PopLocks()
        shared = dict(store=store, offsets=offsets, broker_name=broker_name, write_path=write_path)
        normal = NormalPop(revive_queues=revive_queues, locks=self._locks, **shared)
        self._fifo_pop = FifoPop(state=fifo, locks=self._locks, notify=waiters.notify, **shared)
        self.staged = StagedPop(  # (group, topic)s consumed stage by stage
            registry=stages,
            store=store,
            topics=topics,
            offsets=offsets,
            revive_queues=revive_queues,
            write_path=write_path,
            plain=normal,
            notify=waiters.notify,
            count=revive.count_handed_back,
        )
        self._modes: dict[ModeKind, PopMode] = {
            ModeKind.NORMAL: normal,
            ModeKind.FIFO: self._fifo_pop,
            ModeKind.STAGED: self.staged,
        }

    @property
    def fifo(self) -> FifoPopState:
        """The FIFO pop state (a slave loads it at start and follows its master's: broker.ha_services)."""
        return self._fifo

    @property
    def writes(self) -> PopWrites:
        """Where the pop path writes now (``broker.write_path``): the modes read the same path."""
        return self._write_path.current.pop

    # -- lifecycle --------------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._fifo.load()
        offsets_moved = 0
        for queue in self._revive_queues:
            queue.catch_up()
            # Pops of the last save interval before a crash: their CKs are durable, their offsets may not be.
            offsets_moved += queue.raise_pop_offsets(self._offsets)
        self._store.add_arrival_listener(self._waiters.notify)
        self.revive.start()
        if self.references is not None:
            self.references.start()
        self._persister.start()
        self.running = True
        log.info(
            "event=pop_started revive_queues=%d open_cks=%d pop_offsets_moved=%d",
            len(self._revive_queues),
            sum(len(q.ledger) for q in self._revive_queues),
            offsets_moved,
        )

    async def stop(self) -> None:
        self.running = False
        self._waiters.wake_all()
        await self.revive.stop()
        if self.references is not None:
            await self.references.stop()
        await self._persister.stop()
        self._fifo.persist()

    async def persist_state(self) -> None:
        """The FIFO pop state, and the consumer offsets behind the commit log (never ahead of their CKs)."""
        self._fifo.persist()
        await persist_behind_commit_log(self._offsets, self._store, self._durable_timeout_ms)

    # -- pop ----------------------------------------------------------------------------------------------------------
    async def pop(self, req: PopRequest) -> PopResult:
        group_config, topic_config = admit(req, self._groups, self._topics)
        fifo = group_config.consume_message_orderly if req.fifo is None else req.fifo
        receive = Receive(
            req,
            keep=req.read_filter,
            max_attempts=retry_limit(group_config.retry_max_times) + 1,
        )
        retry_topic = pop_retry_topic(req.group, req.topic)
        invisible_ms = max(req.invisible_ms, self.min_invisible_ms)
        deadline_ms = self._clock.monotonic_ms() + req.poll_ms
        while True:
            # Picked on every pass, as the split is: a long poll must not keep a mode or a share that changed
            # meanwhile (a stage registration applies to the receives already waiting).
            mode = self._modes[choose_mode(fifo=fifo, staged=self.staged.is_staged(req.group, req.topic))]
            share = self._gray.share(req.group, req.client_id) if self._gray is not None else EVERY_QUEUE
            allowed = share.queue_ids(topic_config.read_queue_nums, topic_config.gray_queue_ratio)
            # a queue outside the client's share gives nothing: gray and normal clients never take each other's
            queue_ids = allowed if req.queue_id < 0 else [q for q in allowed if q == req.queue_id]
            retry_config = self._topics.get(retry_topic) if mode.reads_retry_topic else None
            retry_queue_ids = share.retry_queue_ids(retry_config.read_queue_nums) if retry_config is not None else []
            # One turn per pass for both rotations: two draws per pass made every turn even, so with 2 or 4
            # queues the odd ones never started a pass (and only odd revive queues took CKs).
            turn = next(self._pops)
            plan = visit_order(
                req.topic,
                queue_ids,
                retry_topic,
                retry_queue_ids,
                turn,
                by_priority=topic_config.message_type is MessageType.PRIORITY,
            )
            result = PopResult(self._clock.now_ms(), invisible_ms, turn % len(self._revive_queues), self.broker_name)
            for topic, queue_id in plan:
                wanted = req.max_count - result.count
                if wanted <= 0:
                    break
                popped = await mode.pop_queue(receive, topic, queue_id, wanted, result)
                if popped is not None:
                    result.queues.append(popped)
            for popped in result.queues:
                self._traffic.delivered(popped.topic, req.group, popped.records)
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if result.queues and self.tracer is not None:
                self.tracer.popped(req.group, req.client_id, share.gray, result)
            if result.queues or remaining_ms <= 0 or not self.running:
                return result
            watched = (req.topic, retry_topic) if mode.reads_retry_topic else (req.topic,)
            await self._waiters.wait(watched, min(remaining_ms, mode.recheck_ms or remaining_ms), req.client_gone)
            if req.client_gone is not None and req.client_gone.done():
                return result  # empty: nothing is popped for a client that left

    async def settle(self) -> None:
        """Wait for the queue pops under way (``PopLocks.settle``): whoever changes the write path and then reads
        the consumer offsets calls it in between."""
        await self._locks.settle()

    # -- ack, change invisible time, forward to DLQ --------------------------------------------------------------
    def _mode_of(self, group: str, handle: ReceiptHandle) -> PopMode:
        fifo = is_fifo_handle(handle)
        return self._modes[choose_mode(fifo=fifo, staged=not fifo and self.staged.is_staged(group, handle.topic))]

    async def ack(self, group: str, handles: list[ReceiptHandle]) -> list[InvalidReceiptHandleError | None]:
        """Ack every handle; one entry per handle: None when acked, the error when the handle is invalid."""
        by_mode: dict[PopMode, list[int]] = {}
        for i, handle in enumerate(handles):
            by_mode.setdefault(self._mode_of(group, handle), []).append(i)
        outcome: list[InvalidReceiptHandleError | None] = [None] * len(handles)
        for mode, indexes in by_mode.items():
            for i, error in zip(indexes, await mode.ack(group, [handles[i] for i in indexes]), strict=True):
                outcome[i] = error
        if self.tracer is not None:
            self.tracer.acked(group, handles, outcome)
        return outcome

    async def change_invisible(self, group: str, handle: ReceiptHandle, invisible_ms: int) -> ReceiptHandle:
        """A new deadline for one popped message; returns its new handle (the old one is no longer valid)."""
        check_invisible_ms(invisible_ms)
        invisible_ms = max(invisible_ms, self.min_invisible_ms)
        changed = await self._mode_of(group, handle).change_invisible(group, handle, invisible_ms, self._clock.now_ms())
        if self.tracer is not None:
            self.tracer.invisible_changed(group, handle, invisible_ms)
        return changed

    async def forward_to_dead_letter(self, group: str, handle: ReceiptHandle) -> None:
        """Move a popped message to ``%DLQ%<group>`` now (a client gave up on it) and count it as acked.

        The handle's CK is held against revive from the check to the ack: a CK a revive pass picked already is
        refused (its retry copy may be written), and one held here is not picked, so the message ends as a dead
        letter or as a retry copy, never both. (A dead letter stored whose ack then fails, e.g. a full disk,
        leaves the CK open: its retry copy comes too, at least once.)"""
        with self._mode_of(group, handle).hold_handle(group, handle):
            read = await self.revive.readers.for_broker(handle.broker_name).read(
                handle.topic, handle.queue_id, handle.queue_offset
            )
            if (found := read.message) is not None:  # a FOUND read (ReadResult.found)
                await self.writes.put_messages([copies.dead_letter(found, group, copies.REASON_CLIENT_FORWARD)])
                if self.tracer is not None:  # before the ack below, which would end the message's trace as acked
                    self.tracer.forwarded_to_dlq(group, handle)
            else:
                log.warning(
                    "event=forward_to_dlq_unreadable group=%s topic=%s queue=%d offset=%d reason=%s",
                    group,
                    handle.topic,
                    handle.queue_id,
                    handle.queue_offset,
                    read.reason,
                )
            [error] = await self.ack(group, [handle])
        if error is not None:
            raise error

    # -- observability ----------------------------------------------------------------------------------------------
    def group_stats(self, group: str) -> dict[tuple[str, int], QueuePopStats]:
        """(topic, queue id) -> in flight, waiting to revive, retried, dead-lettered, rewrites, endings, for
        ``group describe``."""
        return group_stats(
            group,
            self._clock.now_ms(),
            self._revive_queues,
            self._fifo,
            self.revive.per_queue,
            self._fifo_pop.dead_lettered,
        )

    def in_flight_by_group(self) -> dict[str, int]:
        """Group -> its messages popped, not acked and still invisible (normal and FIFO), for /metrics."""
        now_ms = self._clock.now_ms()
        counts: dict[str, int] = {}
        for queue in self._revive_queues:
            queue.catch_up()
            for (group, _topic, _queue_id), state in queue.ledger.pop_state(now_ms).items():
                counts[group] = counts.get(group, 0) + state.in_flight
        for (group, _topic, _queue_id), orderly in self._fifo.all_queues().items():
            counts[group] = counts.get(group, 0) + orderly.in_flight(now_ms)
        return counts

    def __repr__(self) -> str:
        return f"<PopService revive_queues={len(self._revive_queues)} waiting={self._waiters.waiting} {self.revive!r}>"
