"""Revive: hand back the messages of CKs whose invisible time passed without an ack.

For each due CK of a revive queue (oldest revive offset first), every un-acked message is read with a typed
read from the broker group the CK names (``read_routing.ReaderRouter``: this broker's store, or a remote
reader of another group; one ``read_many`` per queue for a batch of due CKs of every revive queue) and
``decide`` says what happens to it:

- FOUND: a retry copy (``reconsume_times + 1``) in the pop retry topic, or a dead letter in ``%DLQ%<group>``
  when that copy would exceed the group's ``retryMaxTimes`` (reason ``MAX_ATTEMPTS``);
- NOT_FOUND: nothing (the message is gone for good: retention, deleted topic); counted;
- FAILED with ``need_retry``: the ``CkRewritePolicy`` rewrites a one-message CK with backoff, or ends it: a
  dead-letter *reference* (``common.dead_letter_reference``: topic, queue, offset, broker, group, reason and
  rewrite count; the message itself could not be read) or a drop with an error log; FAILED without
  ``need_retry`` ends at once the same way. A FAILED read's ``retry_delay_ms`` (a remote broker's breaker
  cool-down) is the floor of the rewrite's wait.

The copies are appended first (one store call per CK), then the rewritten CKs and an ACK for every message
handled, in one append to the revive queue: that ACK closes the CK durably, so a restart never revives it
twice, and a crash before it only makes the CK revive again (at least once). Progress, the ledger's
``commit_offset()``, is committed as the consumer offset of ``CID_RMQ_SYS_REVIVE_GROUP`` on the revive queue.

``decide`` is pure; ``ReviveService`` is the async shell: one pass over every revive queue each
``interval_ms`` (``run_once(now_ms)`` for tests in virtual time).

Metrics (the broker's registry; docs/metrics.md): ``pocketmq_pop_revive_messages_total{group,topic,queue_id,
outcome}`` (retried, dead_lettered, not_found, dropped), ``pocketmq_pop_ck_rewrites_total{group,topic,
queue_id,attempt}``, ``pocketmq_pop_ck_rewrite_wait_seconds{group}`` (the backoff waits),
``pocketmq_pop_ck_endings_total{group,topic,queue_id,ending}`` (dlq, drop), ``pocketmq_pop_revive_cks_total``
and ``pocketmq_pop_revive_write_failures_total``. ``group describe`` reads them per queue (``per_queue``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from pocketmq.broker.gray import place_retry_copy
from pocketmq.broker.pop import copies
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.read_routing import ReadKey, ReaderRouter
from pocketmq.broker.pop.revive_queue import (
    ReviveQueue,
    ack_message,
    checkpoint_message,
    store_copies,
)
from pocketmq.broker.pop.rewrite import CkEnding, CkRewritePolicy, Rewrite
from pocketmq.common.dead_letter_reference import DeadLetterReference
from pocketmq.common.message import MessageExt
from pocketmq.common.read_result import ReadResult, ReadStatus
from pocketmq.errors import PocketMQError
from pocketmq.metrics import MetricsRegistry

log = logging.getLogger(__name__)

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
DEFAULT_RETRY_MAX_TIMES = 16
REVIVE_BATCH_CKS = 64  # CKs handled per revive queue and pass: bounds one pass's work
# Seconds; the default backoff table runs from 10 s to 2 h.
REWRITE_WAIT_BUCKETS_S = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)


@dataclass(frozen=True, slots=True)
class Copy:
    message: MessageExt
    dead_letter: bool


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


def decide(ck: PopCheckpoint, queue_offset: int, read: ReadResult, *, retry_max_times: int,
           policy: CkRewritePolicy, now_ms: int) -> Decision:
    """What revive does with the un-acked message at ``queue_offset`` of ``ck``, given how its read went."""
    if read.status is ReadStatus.FOUND:
        msg = read.message
        if msg.reconsume_times + 1 > retry_limit(retry_max_times):
            return Copy(copies.dead_letter(msg, ck.group, copies.REASON_MAX_ATTEMPTS), dead_letter=True)
        return Copy(copies.retry_copy(msg, ck.group, ck.pop_time_ms), dead_letter=False)
    if read.status is ReadStatus.NOT_FOUND:
        return Gone(read.reason)
    if read.need_retry:
        step = policy.decide(ck, queue_offset, now_ms, min_wait_ms=read.retry_delay_ms)
        if isinstance(step, Rewrite):
            return step
        ending = step.ending
    else:
        ending = policy.ending
    if ending is CkEnding.DROP:
        return Dropped(f"{read.reason}: {read.description}" if read.description else read.reason)
    reference = DeadLetterReference(ck.topic, ck.queue_id, queue_offset, ck.broker_name, ck.group, read.reason,
                                    read.description, ck.rewrite_count)
    return Copy(copies.dead_letter_reference(reference), dead_letter=True)


class ReviveMetrics:
    """Revive's metric families in a broker's registry."""

    QUEUE_LABELS = ("group", "topic", "queue_id")

    def __init__(self, registry: MetricsRegistry):
        self.messages = registry.counter("pocketmq_pop_revive_messages_total",
                                         "Un-acked POP messages revive handled, by outcome",
                                         (*self.QUEUE_LABELS, "outcome"))
        self.rewrites = registry.counter("pocketmq_pop_ck_rewrites_total",
                                         "CKs rewritten with backoff after a failed read, by attempt number",
                                         (*self.QUEUE_LABELS, "attempt"))
        self.rewrite_wait = registry.histogram("pocketmq_pop_ck_rewrite_wait_seconds",
                                               "Backoff wait of each CK rewrite", ("group",),
                                               buckets=REWRITE_WAIT_BUCKETS_S)
        self.endings = registry.counter("pocketmq_pop_ck_endings_total",
                                        "Messages whose reads kept failing past the backoff table, by ending",
                                        (*self.QUEUE_LABELS, "ending"))
        self.cks = registry.counter("pocketmq_pop_revive_cks_total", "CKs revive closed")
        self.write_failures = registry.counter("pocketmq_pop_revive_write_failures_total",
                                               "Revive passes whose retry or DLQ copies did not reach the store")

    def message(self, ck: PopCheckpoint, outcome: str) -> None:
        self.messages.inc(group=ck.group, topic=ck.topic, queue_id=ck.queue_id, outcome=outcome)

    def ending(self, ck: PopCheckpoint, ending: CkEnding) -> None:
        self.endings.inc(group=ck.group, topic=ck.topic, queue_id=ck.queue_id, ending=ending.value)


class ReviveService:
    """Runs revive over the revive queues of one broker; its metrics are read by ``group describe``."""

    def __init__(self, queues: list[ReviveQueue], readers: ReaderRouter, store, groups, offsets, topics, clock, *,
                 policy: CkRewritePolicy, interval_ms: int, metrics: MetricsRegistry | None = None):
        self._queues = queues
        self.readers = readers
        self._store = store
        self._groups = groups
        self._offsets = offsets
        self._topics = topics
        self._clock = clock
        self.policy = policy
        self._interval_ms = interval_ms
        # Where revive writes: the local store (a master), or the escape bridge (a slave acting as master).
        self.writes = LocalReviveWrites(store, topics)
        self._task: asyncio.Task | None = None
        self._metrics = ReviveMetrics(metrics if metrics is not None else MetricsRegistry())
        # CKs revive leaves alone: staged queues hand their messages back in place (broker/pop/staged.py)
        self.handled_elsewhere: Callable[[PopCheckpoint], bool] | None = None

    @property
    def queues(self) -> list[ReviveQueue]:
        return self._queues

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._loop())
        self._task.set_name("pop-revive")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_ms / 1000)
            try:
                await self.run_once(self._clock.now_ms())
            except asyncio.CancelledError:
                raise
            except Exception:  # one failed pass must not end revive: the CKs stay open and the next pass retries
                log.exception("event=revive_pass_failed")

    async def run_once(self, now_ms: int) -> int:
        """One pass over every revive queue, until none has a due CK; returns the number of CKs handled."""
        handled = 0
        pending = list(self._queues)
        while pending:
            # A batch of due CKs from every revive queue, read together: pops of one queue spread over the
            # revive queues, so reading them together makes one read (one RPC for a remote group) cover up to
            # eight times the messages.
            batches = []
            for queue in pending:
                queue.catch_up()
                batches.append((queue, queue.ledger.due(now_ms, REVIVE_BATCH_CKS, self.handled_elsewhere)))
            reads = await self.readers.read_unacked([ck for _, due in batches for ck in due])
            for queue, due in batches:
                if due:
                    await self._revive(queue, due, reads, now_ms)
                queue.catch_up()
                self._offsets.commit(REVIVE_GROUP, queue.topic, queue.queue_id, queue.ledger.commit_offset())
                handled += len(due)
            pending = [queue for queue, due in batches if len(due) == REVIVE_BATCH_CKS]
        return handled

    async def _revive(self, queue: ReviveQueue, cks: list[PopCheckpoint], reads: dict[ReadKey, dict[int, ReadResult]],
                      now_ms: int) -> None:
        """Revive a batch of due CKs (``reads``: their messages) with two store writes: every copy, then one
        append of their ACKs and rewritten CKs (two writes per CK made revive wait on the store's write path
        most of the time)."""
        plans = [self._plan(ck, reads[self.readers.key_of(ck)], now_ms) for ck in cks]
        outgoing = [copy for _, copies_of_ck, _, _ in plans for copy in copies_of_ck]
        for copy in outgoing:
            if not copy.dead_letter:
                place_retry_copy(self._topics, copy.message)  # gray retries stay gray (broker/gray.py)
        if outgoing and not await self.writes.put_copies([c.message for c in outgoing]):
            # The copies were not stored: keep the CKs open; the next pass tries again.
            self._metrics.write_failures.inc()
            return
        await self.writes.close(queue, [(ck.ack_of(offsets), rewrites) for ck, _, rewrites, offsets in plans])
        for ck, copies_of_ck, _, _ in plans:
            self._count(ck, copies_of_ck)

    def _plan(self, ck: PopCheckpoint, reads: dict[int, ReadResult], now_ms: int) -> tuple[
            PopCheckpoint, list[Copy], list[PopCheckpoint], list[int]]:
        """What revive does with each un-acked message of ``ck``, given the reads of its queue: (ck, copies,
        rewritten CKs, offsets closed)."""
        config = self._groups.get(ck.group)
        retry_max_times = config.retry_max_times if config is not None else DEFAULT_RETRY_MAX_TIMES
        outgoing: list[Copy] = []
        rewrites: list[PopCheckpoint] = []
        offsets = ck.unacked_offsets()
        for queue_offset in offsets:
            read = reads[queue_offset]
            decision = decide(ck, queue_offset, read, retry_max_times=retry_max_times, policy=self.policy,
                              now_ms=now_ms)
            if isinstance(decision, Copy):
                outgoing.append(decision)
            elif isinstance(decision, Rewrite):
                rewrites.append(decision.checkpoint)
                self._metrics.rewrites.inc(group=ck.group, topic=ck.topic, queue_id=ck.queue_id,
                                           attempt=decision.checkpoint.rewrite_count)
                self._metrics.rewrite_wait.observe(decision.wait_ms / 1000, group=ck.group)
                log.info("event=ck_rewritten group=%s broker=%s topic=%s queue=%d offset=%d rewrites=%d wait_ms=%d "
                         "reason=%s", ck.group, ck.broker_name, ck.topic, ck.queue_id, queue_offset,
                         decision.checkpoint.rewrite_count, decision.wait_ms, read.reason)
            elif isinstance(decision, Gone):
                self._metrics.message(ck, "not_found")
            else:
                self._metrics.message(ck, "dropped")
                self._metrics.ending(ck, CkEnding.DROP)
                log.error("event=ck_dropped group=%s topic=%s queue=%d offset=%d reason=%s", ck.group, ck.topic,
                          ck.queue_id, queue_offset, decision.reason)
        return ck, outgoing, rewrites, offsets

    def _count(self, ck: PopCheckpoint, outgoing: list[Copy]) -> None:
        for copy in outgoing:
            self._metrics.message(ck, "dead_lettered" if copy.dead_letter else "retried")
            reason = copy.message.properties.get(copies.DLQ_REASON)
            if copy.dead_letter and reason != copies.REASON_MAX_ATTEMPTS:
                self._metrics.ending(ck, CkEnding.DEAD_LETTER)
                log.error("event=dead_lettered_after_failed_reads group=%s broker=%s topic=%s queue=%d reason=%s",
                          ck.group, ck.broker_name, ck.topic, ck.queue_id, reason)
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
        write_failures (tests and ``repr`` read them; the waits are in ``pocketmq_pop_ck_rewrite_wait_seconds``)."""
        m = self._metrics
        totals: Counter[str] = Counter()
        names = {"retried": "retried", "dead_lettered": "dead_lettered", "not_found": "not_found", "dropped": "drops"}
        for (_, _, _, outcome), n in m.messages.values().items():
            totals[names[outcome]] += int(n)
        totals["rewrites"] = int(sum(m.rewrites.values().values()))
        totals["endings"] = int(sum(m.endings.values().values()))
        totals["cks_revived"] = int(m.cks.value())
        totals["write_failures"] = int(m.write_failures.value())
        return +totals

    def __repr__(self) -> str:
        return f"<ReviveService queues={len(self._queues)} {dict(self.metrics)}>"


class LocalReviveWrites:
    """A master's revive output: the copies into its store, then the ACKs that close the CKs and the rewritten
    CKs in one append to the revive queue."""

    def __init__(self, store, topics):
        self._store = store
        self._topics = topics

    async def put_copies(self, messages: list[MessageExt]) -> bool:
        try:
            await store_copies(self._store, self._topics, messages)
        except PocketMQError as exc:
            log.warning("event=revive_write_failed copies=%d error=%s", len(messages), exc)
            return False
        return True

    async def close(self, queue: ReviveQueue, closes: list[tuple[AckRecord, list[PopCheckpoint]]]) -> None:
        """Close each CK (its ACK) and open its rewritten CKs; StoreError when the store did not take them."""
        records = []
        for ack, rewrites in closes:
            # The ACK goes first: a rewritten CK keeps the pop time, so when it starts at this CK's start offset
            # it has this CK's key, and the ledger must close the old CK before it opens the rewritten one.
            records.append(ack_message(queue.topic, queue.queue_id, ack))
            records += [checkpoint_message(queue.topic, c) for c in rewrites]
        await queue.append(records)
