"""Revive: hand back the messages of CKs whose invisible time passed without an ack.

For each due CK of a revive queue (oldest revive offset first), every un-acked message is read with a typed
read from the broker group the CK names (``read_routing.ReaderRouter``: this broker's store, or a remote
reader of another group; one ``read_many`` per queue for a batch of due CKs of every revive queue) and
``decide`` says what happens to it:

- FOUND: a retry copy (``reconsume_times + 1``) in the pop retry topic, or a dead letter in ``%DLQ%<group>``
  when that copy would exceed the group's ``retryMaxTimes`` (reason ``MAX_ATTEMPTS``);
- NOT_FOUND: nothing (the message is gone for good: retention, deleted topic); counted;
- FAILED (every failed read may pass): the ``CkRewritePolicy`` rewrites a one-message CK with backoff, or ends
  it (past its table or its maximum total time): a dead-letter *reference* (``common.dead_letter_reference``:
  topic, queue, offset, broker, group, reason and rewrite count; the message itself could not be read) or a
  drop with an error log. A FAILED read's ``retry_delay_ms`` (a remote broker's breaker cool-down) is the floor
  of the rewrite's wait.

The copies are appended first (one store call for a batch of CKs), then the rewritten CKs and an ACK for every
message handled, in one append to the revive queue: that ACK closes the CK durably, so a restart never revives
it twice, and a crash before it only makes the CK revive again (at least once). Progress, the ledger's
``commit_offset()``, is committed as the consumer offset of ``CID_RMQ_SYS_REVIVE_GROUP`` on the revive queue.

Writes fail too, and are typed like reads (``store.write_result``):

- a copy that can never be written (``%RETRY%<group>_<topic>`` over 127 characters, properties over 32,767
  bytes, a refusal as illegal) is replaced at once by the next of its ``fallback``s: the message as a dead letter
  with the reason ``WRITE_REFUSED``, then a dead-letter reference (which names the message without its body or
  properties), then nothing: logged at ERROR with the message id and counted (``unwritable``). The CK closes
  and the rest of the batch goes on;
- a write that failed for a passing reason (disk full, escape off or its target down) keeps the CK open and
  puts it in a ``WriteBackoff`` on the same table as CK rewrites: it is left out of the passes until its wait is
  over, and once the table is used up its retry copies become dead letters (``WRITE_FAILED``); when even they
  cannot be written the CK stays open (*parked*) and tries again every last step of the table: nothing is
  lost. A pass whose writes all failed ends there and the next one waits longer (``PassPacer``, up to 30 s).

``decide`` and ``fallback`` are pure; ``ReviveService`` is the async shell: passes over the revive queues (a
periodic task, ``broker-pop-revive``, on the broker's clock; ``run_once(now_ms)`` for tests that drive passes by
hand). ``ReviveSchedule`` says when: a full pass every ``interval_ms``, and in between a wake-up at the tick of
the earliest due CK that visits only the revive queues with a CK due, so a CK comes back within a tick and a
pass of its revive time; a CK appended since the last pass that comes due before the planned wake-up wakes
revive early to plan again (``ReviveQueue.expect``). After a blocked pass (``PassPacer``) or a failed one
(``runtime.periodic``) revive waits as they say, whatever is due: nothing spins. A pass yields to the event loop after each batch, so a long one never holds
the loop, and ``stop()`` ends it after the revive queue it is writing (a returning master's handover waits for
an acting slave's stop). Whatever it reads and writes comes in through its constructor (the revive queues, readers, store,
tables, clock, and ``write_path``: where its output goes), so the deterministic simulation
(``pocketmq.testing.sim``) runs this shell itself on its simulated stores and network, and learns each CK
closed through ``on_closed``.

Metrics (the broker's registry; docs/metrics.md): ``pocketmq_pop_revive_messages_total{group,topic,queue_id,
outcome}`` (retried, dead_lettered, not_found, dropped), ``pocketmq_pop_ck_rewrites_total{group,topic,
queue_id,attempt}``, ``pocketmq_pop_ck_rewrite_wait_seconds{group}`` (the backoff waits),
``pocketmq_pop_ck_endings_total{group,topic,queue_id,ending}`` (dlq, drop), ``pocketmq_pop_revive_cks_total``,
and the write failures, endings and passes of ``broker.write_metrics`` (``service="revive"``). ``group
describe`` reads them per queue (``per_queue``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pocketmq.broker.gray import place_retry_copy
from pocketmq.broker.pop import copies
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.read_routing import ReaderRouter, ReadKey
from pocketmq.broker.pop.revive_queue import (
    PartlyClosedError,
    ReviveQueue,
)
from pocketmq.broker.pop.revive_schedule import ReviveSchedule
from pocketmq.broker.pop.rewrite import CkEnding, CkRewritePolicy, Rewrite
from pocketmq.broker.priority import place_priority_retry
from pocketmq.broker.write_backoff import DEFAULT_MAX_PASS_WAIT_MS, PassPacer, WriteBackoff
from pocketmq.broker.write_metrics import ENDING_DLQ, ENDING_PARKED, ENDING_UNWRITABLE, INVALID, BackgroundWriteMetrics
from pocketmq.common.dead_letter_reference import REFERENCE_PROPERTY, DeadLetterReference
from pocketmq.common.errors import BadRequestError, PocketMQError
from pocketmq.common.message import MessageExt
from pocketmq.common.read_result import ReadResult, ReadStatus
from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.periodic import PeriodicTask
from pocketmq.store.write_result import WriteResult, of_puts, write_problem

if TYPE_CHECKING:
    from pocketmq.broker.tracer import Tracer
    from pocketmq.broker.write_path import ReviveWrites, WritePathSwitch

log = logging.getLogger(__name__)

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
DEFAULT_RETRY_MAX_TIMES = 16
REVIVE_BATCH_CKS = 64  # CKs handled per revive queue and pass: bounds one pass's work
# Seconds: how late past its revive time a CK was closed (most within a tick and a pass; failed writes add their
# backoff, CKs read after they were due their wait for a full pass)
LATENESS_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)
# Seconds; the default backoff table runs from 10 s to 2 h.
REWRITE_WAIT_BUCKETS_S = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)


@dataclass(frozen=True, slots=True)
class Copy:
    message: MessageExt
    dead_letter: bool
    source: MessageExt | None = None  # the message read (None for a reference: it could not be read)
    queue_offset: int = -1  # where the message sits in the CK's queue


@dataclass(frozen=True, slots=True)
class Gone:
    cause: str


@dataclass(frozen=True, slots=True)
class Dropped:
    reason: str


Decision = Copy | Gone | Rewrite | Dropped


def retry_limit(retry_max_times: int) -> int:
    """A group's ``retryMaxTimes``: -1 means RocketMQ's default of 16."""
    return DEFAULT_RETRY_MAX_TIMES if retry_max_times < 0 else retry_max_times


def decide(
    ck: PopCheckpoint,
    queue_offset: int,
    read: ReadResult,
    *,
    retry_max_times: int,
    policy: CkRewritePolicy,
    now_ms: int,
) -> Decision:
    """What revive does with the un-acked message at ``queue_offset`` of ``ck``, given how its read went."""
    if (msg := read.message) is not None:  # a FOUND read (ReadResult.found)
        if msg.reconsume_times + 1 > retry_limit(retry_max_times):
            return Copy(copies.dead_letter(msg, ck.group, copies.REASON_MAX_ATTEMPTS), True, msg, queue_offset)
        return Copy(copies.retry_copy(msg, ck.group, ck.pop_time_ms), False, msg, queue_offset)
    if read.status is ReadStatus.NOT_FOUND:
        return Gone(read.reason)
    # FAILED: every failed read may pass (common/read_result.py), so it is rewritten until the policy ends it
    step = policy.decide(ck, queue_offset, now_ms, min_wait_ms=read.retry_delay_ms)
    if isinstance(step, Rewrite):
        return step
    if step.ending is CkEnding.DROP:
        return Dropped(f"{read.reason}: {read.description}" if read.description else read.reason)
    reference = DeadLetterReference(
        ck.topic, ck.queue_id, queue_offset, ck.broker_name, ck.group, read.reason, read.description, ck.rewrite_count
    )
    return Copy(copies.dead_letter_reference(reference), True, queue_offset=queue_offset)


def fallback(copy: Copy, ck: PopCheckpoint, description: str) -> Copy | None:
    """What revive writes instead of ``copy``, which can never be written (``description`` says why): a retry copy
    becomes a dead letter of the message, a dead letter a reference to it (no body, no user properties), a
    reference nothing (the caller logs and counts the message). Reason ``WRITE_REFUSED``."""
    reason = copies.REASON_WRITE_REFUSED
    if not copy.dead_letter and copy.source is not None:
        return Copy(copies.dead_letter(copy.source, ck.group, reason), True, copy.source, copy.queue_offset)
    if copy.message.properties.get(REFERENCE_PROPERTY) == "true":
        return None
    reference = DeadLetterReference(
        ck.topic, ck.queue_id, copy.queue_offset, ck.broker_name, ck.group, reason, description, ck.rewrite_count
    )
    return Copy(copies.dead_letter_reference(reference), True, queue_offset=copy.queue_offset)


def write_ending(copy: Copy, ck: PopCheckpoint) -> Copy:
    """What revive writes for ``copy`` once its writes kept failing past the backoff table: a retry copy becomes
    a dead letter of the message (reason ``WRITE_FAILED``); a dead letter already is an ending."""
    if copy.dead_letter or copy.source is None:
        return copy
    return Copy(
        copies.dead_letter(copy.source, ck.group, copies.REASON_WRITE_FAILED), True, copy.source, copy.queue_offset
    )


_WRITE_REASONS = frozenset({copies.REASON_WRITE_REFUSED, copies.REASON_WRITE_FAILED})


@dataclass(slots=True)
class CkPlan:
    """What revive does with one due CK: the copies to write, then the ACK of ``offsets`` and the rewritten CKs."""

    ck: PopCheckpoint
    offsets: list[int]
    copies: list = field(default_factory=list)  # of Copy (None, while writing, for one that cannot be written)
    rewrites: list[tuple[Rewrite, str]] = field(default_factory=list)  # (the rewrite, the failed read's reason)
    gone: list[tuple[int, str]] = field(default_factory=list)  # (queue offset, cause)
    drops: list[tuple[int, str]] = field(default_factory=list)  # (queue offset, reason)
    unwritable: int = 0
    failure: WriteResult | None = None  # a write that failed for a passing reason: the CK stays open


@dataclass(frozen=True, slots=True)
class PassResult:
    closed: int = 0  # CKs closed
    failed: int = 0  # CKs kept open by a write that failed for a passing reason


class ReviveMetrics:
    """Revive's metric families in a broker's registry."""

    QUEUE_LABELS = ("group", "topic", "queue_id")

    def __init__(self, registry: MetricsRegistry):
        self.messages = registry.counter(
            "pocketmq_pop_revive_messages_total",
            "Un-acked POP messages revive handled, by outcome",
            (*self.QUEUE_LABELS, "outcome"),
        )
        self.rewrites = registry.counter(
            "pocketmq_pop_ck_rewrites_total",
            "CKs rewritten with backoff after a failed read, by attempt number",
            (*self.QUEUE_LABELS, "attempt"),
        )
        self.rewrite_wait = registry.histogram(
            "pocketmq_pop_ck_rewrite_wait_seconds",
            "Backoff wait of each CK rewrite",
            ("group",),
            buckets=REWRITE_WAIT_BUCKETS_S,
        )
        self.endings = registry.counter(
            "pocketmq_pop_ck_endings_total",
            "Messages whose reads kept failing past the backoff table, by ending",
            (*self.QUEUE_LABELS, "ending"),
        )
        self.cks = registry.counter("pocketmq_pop_revive_cks_total", "CKs revive closed")
        self.lateness = registry.histogram(
            "pocketmq_pop_revive_lateness_seconds",
            "How long after its revive time revive closed a CK (its messages came back)",
            buckets=LATENESS_BUCKETS_S,
        )
        self.writes = BackgroundWriteMetrics(registry, "revive")

    def message(self, ck: PopCheckpoint, outcome: str) -> None:
        self.messages.inc(group=ck.group, topic=ck.topic, queue_id=ck.queue_id, outcome=outcome)

    def ending(self, ck: PopCheckpoint, ending: CkEnding) -> None:
        self.endings.inc(group=ck.group, topic=ck.topic, queue_id=ck.queue_id, ending=ending.value)


class ReviveService:
    """Runs revive over the revive queues of one broker; its metrics are read by ``group describe``."""

    def __init__(
        self,
        queues: list[ReviveQueue],
        readers: ReaderRouter,
        store,
        groups,
        offsets,
        topics,
        clock,
        *,
        policy: CkRewritePolicy,
        interval_ms: int,
        write_path: WritePathSwitch,
        handled_elsewhere: Callable[[PopCheckpoint], bool] | None = None,
        metrics: MetricsRegistry | None = None,
        on_closed: Callable[[CkPlan], None] | None = None,
    ):
        self._queues = queues
        self.readers = readers
        self._store = store
        self._groups = groups
        self._offsets = offsets
        self._topics = topics
        self._clock = clock
        # CKs whose copies could not be written, by CK key (the same table as CK rewrites; ``policy`` below)
        self._write_backoff: WriteBackoff[str] = WriteBackoff(policy.backoff_ms)
        self.policy = policy
        self.pacer = PassPacer(interval_ms, max(interval_ms, DEFAULT_MAX_PASS_WAIT_MS))
        self.schedule = ReviveSchedule(interval_ms)
        self._pass = asyncio.Lock()
        # Set by stop(): the pass in progress ends after the revive queue it is writing, not after every batch.
        self._stopping = False
        self._write_path = write_path  # the broker's: its store, or the escape bridge of a slave acting as master
        # Told of each CK a pass closed, once the writes that close it are done (the simulation traces it).
        self._on_closed = on_closed
        self._metrics = ReviveMetrics(metrics if metrics is not None else MetricsRegistry())
        # A pass that raised leaves its CKs open: the task backs off and a later pass retries them.
        # jitter 0: the wait is computed to the next due CK
        self._passes = PeriodicTask(
            "broker-pop-revive",
            self._scheduled_pass,
            self._next_wait_ms,
            clock=clock,
            metrics=metrics,
            jitter=0,
        )
        # When the planned wake-up comes; None during a round, before the first and in a blocked or failed wait
        self._wake_at_ms: int | None = None
        for queue in queues:
            queue.on_earlier_revive = self._revive_time_appended
        # CKs revive leaves alone: staged queues hand their messages back in place (broker/pop/staged.py)
        self._handled_elsewhere = handled_elsewhere
        self.tracer: Tracer | None = None  # told of each closed CK (broker/tracer.py)

    @property
    def writes(self) -> ReviveWrites:
        """Where revive writes now (``broker.write_path``)."""
        return self._write_path.current.revive

    @property
    def policy(self) -> CkRewritePolicy:
        return self._policy

    @policy.setter
    def policy(self, policy: CkRewritePolicy) -> None:
        """A new backoff table (dynamic config) applies to failed reads and failed writes alike."""
        self._policy = policy
        self._write_backoff.backoff_ms = policy.backoff_ms

    @property
    def queues(self) -> list[ReviveQueue]:
        return self._queues

    def start(self) -> None:
        self._stopping = False
        self._passes.start()

    def settings_changed(self) -> None:
        """An operator changed a setting that may let failed writes work (escape turned on, a new backoff table):
        the next pass comes soon instead of after the blocked passes' longer wait (up to 30 s). Each CK still
        waits its own backoff step, so this never makes a failing write spin. The pass is a full one: the CKs
        waiting after failed writes are tried only by those."""
        self.pacer.reset()
        self.schedule.want_full_pass()
        self._passes.wake()

    async def stop(self) -> None:
        """Stop the passes: the pass in progress ends once the revive queue it is writing is done (its other CKs
        stay open and come back in a later pass, here or, for a slave acting as master, on the master whose
        handover waits for this stop)."""
        self._stopping = True
        await self._passes.stop()

    async def run_once(self, now_ms: int, queues: list[ReviveQueue] | None = None) -> int:
        """One pass over every revive queue (or over ``queues``), until none has a due CK ready to write or every
        write of a round failed; returns the number of CKs closed. Sets ``pacer`` (the wait before the next
        pass). One pass at a time: a pass yields between batches, and a second caller (a test) waits for it."""
        async with self._pass:
            return await self._run_once(now_ms, self._queues if queues is None else queues)

    async def _scheduled_pass(self) -> None:
        """The periodic task's round: a full pass, or a wake-up over the revive queues with an open CK due (a
        wake-up whose CKs were all acked meanwhile runs no pass: passes that close nothing stay one an interval)."""
        self._wake_at_ms = None
        now_ms = self._clock.now_ms()
        if self.schedule.full_pass(now_ms):
            await self.run_once(now_ms)
            return
        due = []
        for queue in self._queues:
            if (t := queue.next_revive_time_ms()) is not None and t <= now_ms:
                queue.catch_up()  # reads the CKs appended since the last pass; an ack read now closes its CK
                if (t := queue.ledger.next_revive_time_ms()) is not None and t <= now_ms:
                    due.append(queue)
        if due:
            await self.run_once(now_ms, due)

    async def _run_once(self, now_ms: int, queues: list[ReviveQueue]) -> int:
        self._write_backoff.retain(self._is_open)  # CKs acked (or taken back) while they waited
        skip = self._skipper(now_ms)
        total = PassResult()
        pending = list(queues)
        while pending:
            # A batch of due CKs from every revive queue, read together: pops of one queue spread over the
            # revive queues, so reading them together makes one read (one RPC for a remote group) cover up to
            # eight times the messages.
            batches = []
            for queue in pending:
                queue.catch_up()
                due = queue.ledger.due(now_ms, REVIVE_BATCH_CKS, skip)
                queue.ledger.pick(ck.key for ck in due)  # from here until closed, an ack of them is refused
                batches.append((queue, due))
            round_result = PassResult()
            try:
                reads = await self.readers.read_unacked([ck for _, due in batches for ck in due])
                for queue, due in batches:
                    if self._stopping:
                        break
                    if due:
                        done = await self._revive(queue, due, reads, now_ms)
                        round_result = PassResult(round_result.closed + done.closed, round_result.failed + done.failed)
                        queue.ledger.release(ck.key for ck in due)
                        queue.catch_up()
                    self._offsets.commit(REVIVE_GROUP, queue.topic, queue.queue_id, queue.ledger.commit_offset())
                    if due:
                        await asyncio.sleep(0)  # a long pass lets the loop serve between batches
            finally:  # a pass that raised or was stopped: its CKs stay open and take acks again
                for queue, due in batches:
                    queue.ledger.release(ck.key for ck in due)
            total = PassResult(total.closed + round_result.closed, total.failed + round_result.failed)
            if round_result.failed and not round_result.closed:
                break  # every write of the round failed for a passing reason: the next pass waits longer
            # A CK that failed is left out by ``skip`` now, so a full batch means more CKs to try, not the same.
            pending = [] if self._stopping else [queue for queue, due in batches if len(due) == REVIVE_BATCH_CKS]
        wait_ms = self.pacer.after_pass(stored=total.closed, failed=total.failed)
        self._metrics.writes.passed(stored=total.closed, failed=total.failed, wait_ms=wait_ms)
        self._metrics.writes.backlog(self._write_backoff)
        return total.closed

    def _next_wait_ms(self) -> float:
        """Until the next pass: the pacer's (or the task's) wait after a blocked (or failed) pass, else what the
        schedule says for the earliest revive time the ledgers hold."""
        if self.pacer.blocked or self._passes.failures.in_a_row:
            self._wake_at_ms = None  # that wait holds whatever comes due meanwhile
            return self.pacer.wait_ms
        now_ms = self._clock.now_ms()
        times = [t for t in (queue.next_revive_time_ms() for queue in self._queues) if t is not None]
        wait_ms = self.schedule.wait_ms(now_ms, min(times, default=None))
        self._wake_at_ms = now_ms + wait_ms
        return wait_ms

    def _revive_time_appended(self, revive_time_ms: int) -> None:
        """A CK appended to a revive queue comes due before the planned wake-up (its tick is earlier): wake now,
        and the round (which finds nothing due yet) plans the wake-up again. Never during a round (it plans
        after), nor in the wait after a blocked or failed pass, nor before the first full pass."""
        if self._wake_at_ms is not None and self.schedule.wakes_earlier(revive_time_ms, self._wake_at_ms):
            self._wake_at_ms = None
            self._passes.wake()

    def _skipper(self, now_ms: int) -> Callable[[PopCheckpoint], bool]:
        """CKs a pass leaves alone: another service's (staged queues), and those waiting after failed writes."""
        elsewhere, backoff = self._handled_elsewhere, self._write_backoff
        return lambda ck: not backoff.ready(ck.key, now_ms) or (elsewhere is not None and elsewhere(ck))

    def _is_open(self, key: str) -> bool:
        return any(queue.ledger.is_open(key) for queue in self._queues)

    async def _revive(
        self, queue: ReviveQueue, cks: list[PopCheckpoint], reads: dict[ReadKey, dict[int, ReadResult]], now_ms: int
    ) -> PassResult:
        """Revive a batch of due CKs (``reads``: their messages) with two store writes: every copy, then one
        append of their ACKs and rewritten CKs (two writes per CK made revive wait on the store's write path
        most of the time). A CK whose copies did not all reach the store stays open, in the write backoff."""
        plans = [self._plan(ck, reads[self.readers.key_of(ck)], now_ms) for ck in cks]
        await self._write_copies(plans)
        closing = [plan for plan in plans if plan.failure is None]
        if closing:
            try:
                await self.writes.close(
                    queue, [(p.ck.ack_of(p.offsets), [r.checkpoint for r, _ in p.rewrites]) for p in closing]
                )
            except PocketMQError as exc:  # the copies are written; the CKs not closed revive again (at least once)
                failure = WriteResult.transient(type(exc).__name__, str(exc))
                self._metrics.writes.failed(failure)
                # Only what was written counts (metrics, rewrites): an escape may close the first CKs and fail.
                closed = exc.closed if isinstance(exc, PartlyClosedError) else 0
                for plan in closing[closed:]:
                    plan.failure = failure
                closing = closing[:closed]
        failing = [plan for plan in plans if plan.failure is not None]
        closed_ms = self._clock.now_ms()
        for plan in closing:
            self._write_backoff.succeeded(plan.ck.key)
            self._metrics.lateness.observe(max(closed_ms - plan.ck.revive_time_ms, 0) / 1000)
            self._count(plan)
            if self.tracer is not None:
                self.tracer.revived(plan.ck, plan.copies, plan.rewrites, plan.gone, plan.drops)
            if self._on_closed is not None:
                self._on_closed(plan)
        if failing:
            self._postpone(failing, now_ms)
        return PassResult(len(closing), len(failing))

    def _plan(self, ck: PopCheckpoint, reads: dict[int, ReadResult], now_ms: int) -> CkPlan:
        """What revive does with each un-acked message of ``ck``, given the reads of its queue."""
        config = self._groups.get(ck.group)
        retry_max_times = config.retry_max_times if config is not None else DEFAULT_RETRY_MAX_TIMES
        ends = self._write_backoff.ends(ck.key)
        plan = CkPlan(ck, ck.unacked_offsets())
        for queue_offset in plan.offsets:
            read = reads[queue_offset]
            decision = decide(
                ck, queue_offset, read, retry_max_times=retry_max_times, policy=self.policy, now_ms=now_ms
            )
            if isinstance(decision, Copy):
                plan.copies.append(write_ending(decision, ck) if ends else decision)
            elif isinstance(decision, Rewrite):
                plan.rewrites.append((decision, read.reason))
            elif isinstance(decision, Gone):
                plan.gone.append((queue_offset, decision.cause))
            else:
                plan.drops.append((queue_offset, decision.reason))
        return plan

    async def _write_copies(self, plans: list[CkPlan]) -> None:
        """Write the copies of ``plans`` in one call; a copy refused for good is replaced by its fallback and
        written again (each refusal moves it one step: dead letter, reference, nothing), a failure for a passing
        reason marks its plan ``failure``."""
        todo: list[tuple[CkPlan, int]] = []
        for plan in plans:
            plan.copies = [c for c in (self._writable(plan, c) for c in plan.copies) if c is not None]
            todo += [(plan, index) for index in range(len(plan.copies))]
        while todo:
            results = await self.writes.put_copies([plan.copies[index].message for plan, index in todo])
            refused: list[tuple[CkPlan, int]] = []
            for (plan, index), result in zip(todo, results):
                if result.stored:
                    continue
                self._metrics.writes.failed(result)
                if not result.is_permanent:
                    plan.failure = result
                    continue
                copy = plan.copies[index]
                self._log_refused(plan.ck, copy, str(result))
                replacement = self._writable(plan, fallback(copy, plan.ck, str(result)))
                plan.copies[index] = replacement
                if replacement is not None:
                    refused.append((plan, index))
            # A plan that failed for a passing reason writes everything again next time: no more tries now.
            todo = [(plan, index) for plan, index in refused if plan.failure is None]
        for plan in plans:
            plan.copies = [c for c in plan.copies if c is not None]

    def _writable(self, plan: CkPlan, copy: Copy | None) -> Copy | None:
        """``copy``, or the first of its fallbacks that can be written as far as can be told without writing;
        None when none can (the message is logged at ERROR and counted, the CK closes without it)."""
        while copy is not None:
            problem = write_problem(copy.message)
            if problem is None and not copy.dead_letter:
                try:
                    # retries keep their priority (broker/priority.py); gray retries stay gray (broker/gray.py)
                    if not place_priority_retry(self._topics, copy.message):
                        place_retry_copy(self._topics, copy.message)
                except BadRequestError as exc:
                    problem = str(exc)
                except OSError as exc:  # the retry topic could not be saved (disk full): back off, try again
                    plan.failure = WriteResult.transient(type(exc).__name__, str(exc))
                    self._metrics.writes.failed(plan.failure)
                    return None
            if problem is None:
                return copy
            self._metrics.writes.failed(WriteResult.permanent(INVALID, problem))
            self._log_refused(plan.ck, copy, problem)
            copy = fallback(copy, plan.ck, problem)
        plan.unwritable += 1
        return None

    def _log_refused(self, ck: PopCheckpoint, copy: Copy, why: str) -> None:
        log.error(
            "event=revive_copy_refused group=%s topic=%s queue=%d offset=%d msg_id=%s copy_topic=%s reason=%s",
            ck.group,
            ck.topic,
            ck.queue_id,
            copy.queue_offset,
            copy.source.msg_id if copy.source is not None else "",
            copy.message.topic,
            why,
        )

    def _postpone(self, plans: list[CkPlan], now_ms: int) -> None:
        """CKs whose copies failed for a passing reason: each waits its next backoff step (or is parked)."""
        for plan in plans:
            step = self._write_backoff.failed(plan.ck.key, now_ms, str(plan.failure))
            if step.parked:
                self._metrics.writes.ended(ENDING_PARKED)
            if step.ends_next or step.parked:
                log.error(
                    "event=revive_write_failing group=%s topic=%s queue=%d offset=%d failures=%d wait_ms=%d "
                    "next=%s reason=%s",
                    plan.ck.group,
                    plan.ck.topic,
                    plan.ck.queue_id,
                    plan.ck.start_offset,
                    step.failures,
                    step.wait_ms,
                    "dead_letter",
                    plan.failure,
                )
        log.warning("event=revive_write_failed cks=%d reason=%s", len(plans), plans[0].failure)

    def _count(self, plan: CkPlan) -> None:
        """Metrics and logs of a closed CK."""
        ck = plan.ck
        for rewrite, reason in plan.rewrites:
            self._metrics.rewrites.inc(
                group=ck.group, topic=ck.topic, queue_id=ck.queue_id, attempt=rewrite.checkpoint.rewrite_count
            )
            self._metrics.rewrite_wait.observe(rewrite.wait_ms / 1000, group=ck.group)
            log.info(
                "event=ck_rewritten group=%s broker=%s topic=%s queue=%d offset=%d rewrites=%d wait_ms=%d reason=%s",
                ck.group,
                ck.broker_name,
                ck.topic,
                ck.queue_id,
                rewrite.checkpoint.start_offset,
                rewrite.checkpoint.rewrite_count,
                rewrite.wait_ms,
                reason,
            )
        for _ in plan.gone:
            self._metrics.message(ck, "not_found")
        for queue_offset, reason in plan.drops:
            self._metrics.message(ck, "dropped")
            self._metrics.ending(ck, CkEnding.DROP)
            log.error(
                "event=ck_dropped group=%s topic=%s queue=%d offset=%d reason=%s",
                ck.group,
                ck.topic,
                ck.queue_id,
                queue_offset,
                reason,
            )
        for copy in plan.copies:
            self._metrics.message(ck, "dead_lettered" if copy.dead_letter else "retried")
            reason = copy.message.properties.get(copies.DLQ_REASON)
            if copy.dead_letter and reason in _WRITE_REASONS:
                self._metrics.writes.ended(ENDING_DLQ)
            elif copy.dead_letter and reason != copies.REASON_MAX_ATTEMPTS:
                self._metrics.ending(ck, CkEnding.DEAD_LETTER)
                log.error(
                    "event=dead_lettered_after_failed_reads group=%s broker=%s topic=%s queue=%d reason=%s",
                    ck.group,
                    ck.broker_name,
                    ck.topic,
                    ck.queue_id,
                    reason,
                )
        if plan.unwritable:
            self._metrics.messages.inc(
                plan.unwritable, group=ck.group, topic=ck.topic, queue_id=ck.queue_id, outcome="dropped"
            )
            self._metrics.writes.ended(ENDING_UNWRITABLE, plan.unwritable)
        self._metrics.cks.inc()

    def count_handed_back(self, group: str, topic: str, queue_id: int, outcome: str, count: int) -> None:
        """Messages another path handed back for revive (staged POP redelivers in place): ``outcome`` retried or
        dead_lettered, counted with revive's own so ``group describe`` shows them."""
        self._metrics.messages.inc(count, group=group, topic=topic, queue_id=queue_id, outcome=outcome)

    @property
    def per_queue(self) -> Counter[tuple[str, str, int, str]]:
        """(group, topic, queue id, what) -> count since start; what: retried, dead_lettered, rewrites, endings."""
        counts: Counter[tuple[str, str, int, str]] = Counter()
        for (group, topic, queue_id, outcome), n in self._metrics.messages.values().items():
            if outcome in ("retried", "dead_lettered"):
                counts[(group, topic, int(queue_id), outcome)] += int(n)
        for what, family in (("rewrites", self._metrics.rewrites), ("endings", self._metrics.endings)):
            for (group, topic, queue_id, _), n in family.values().items():
                counts[(group, topic, int(queue_id), what)] += int(n)
        return counts

    @property
    def metrics(self) -> Counter[str]:
        """Totals over every label: retried, dead_lettered, not_found, drops, rewrites, endings, cks_revived,
        write_failures, write_dead_letters, parked, unwritable, blocked_passes (tests and ``repr`` read them; the
        waits are in ``pocketmq_pop_ck_rewrite_wait_seconds``)."""
        m = self._metrics
        totals: Counter[str] = Counter()
        names = {"retried": "retried", "dead_lettered": "dead_lettered", "not_found": "not_found", "dropped": "drops"}
        for (_, _, _, outcome), n in m.messages.values().items():
            totals[names[outcome]] += int(n)
        totals["rewrites"] = int(sum(m.rewrites.values().values()))
        totals["endings"] = int(sum(m.endings.values().values()))
        totals["cks_revived"] = int(m.cks.value())
        writes = m.writes
        totals["write_failures"] = writes.failures()
        totals["write_dead_letters"] = writes.endings(ENDING_DLQ)
        totals["parked"] = writes.endings(ENDING_PARKED)
        totals["unwritable"] = writes.endings(ENDING_UNWRITABLE)
        totals["blocked_passes"] = writes.passes("blocked")
        return +totals

    def __repr__(self) -> str:
        return f"<ReviveService queues={len(self._queues)} {dict(self.metrics)}>"


class LocalReviveWrites:
    """A master's revive output: the copies into its store, then the ACKs that close the CKs and the rewritten
    CKs in one append to the revive queue."""

    def __init__(self, store, topics):
        self._store = store
        self._topics = topics

    async def put_copies(self, messages: list[MessageExt]) -> list[WriteResult]:
        """Store ``messages`` in one call; one ``WriteResult`` per message. A batch is all or nothing, so when one
        message refuses it for good, each is stored alone to tell which."""
        result = await self._put(messages)
        if result.is_permanent and len(messages) > 1:
            return [await self._put([msg]) for msg in messages]
        return [result] * len(messages)

    async def _put(self, messages: list[MessageExt]) -> WriteResult:
        try:
            for msg in messages:
                self._topics.get_or_create(msg.topic)  # retry and DLQ topics are created on demand
        except BadRequestError as exc:  # a topic name that can never exist
            return WriteResult.permanent(type(exc).__name__, str(exc))
        except PocketMQError as exc:
            return WriteResult.transient(type(exc).__name__, str(exc))
        return of_puts(await self._store.put_messages(messages))

    async def close(self, queue: ReviveQueue, closes: list[tuple[AckRecord, list[PopCheckpoint]]]) -> None:
        """Close each CK (its ACK) and open its rewritten CKs; StoreError when the store did not take them."""
        records: list[PopCheckpoint | AckRecord] = []
        for ack, rewrites in closes:
            # The ACK goes first: a rewritten CK keeps the pop time, so when it starts at this CK's start offset
            # it has this CK's key, and the ledger must close the old CK before it opens the rewritten one.
            records.append(ack)
            records += rewrites
        await queue.append(records)
