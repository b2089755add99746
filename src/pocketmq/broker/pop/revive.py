"""Revive: hand back the messages of CKs whose invisible time passed without an ack.

For each due CK of a revive queue (oldest revive offset first), every un-acked message is read through the
``MessageReader`` (a typed read) and ``decide`` says what happens to it:

- FOUND: a retry copy (``reconsume_times + 1``) in the pop retry topic, or a dead letter in ``%DLQ%<group>``
  when that copy would exceed the group's ``retryMaxTimes`` (reason ``MAX_ATTEMPTS``);
- NOT_FOUND: nothing (the message is gone for good: retention, deleted topic); counted;
- FAILED with ``need_retry``: the ``CkRewritePolicy`` rewrites a one-message CK with backoff, or ends it: a
  dead-letter *reference* (a JSON body naming topic, queue, offset and the reason: the message itself could
  not be read) or a drop with an error log; FAILED without ``need_retry`` ends at once the same way.

The copies are appended first (one store call per CK), then the rewritten CKs and an ACK for every message
handled, in one append to the revive queue: that ACK closes the CK durably, so a restart never revives it
twice, and a crash before it only makes the CK revive again (at least once). Progress, the ledger's
``commit_offset()``, is committed as the consumer offset of ``CID_RMQ_SYS_REVIVE_GROUP`` on the revive queue.

``decide`` is pure; ``ReviveService`` is the async shell: one pass over every revive queue each
``interval_ms`` (``run_once(now_ms)`` for tests in virtual time).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass

from pocketmq.broker.pop import copies
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.reader import MessageReader
from pocketmq.broker.pop.revive_queue import (
    ReviveQueue,
    ack_message,
    checkpoint_message,
    store_copies,
)
from pocketmq.broker.pop.rewrite import CkEnding, CkRewritePolicy, Rewrite
from pocketmq.common.message import MessageExt
from pocketmq.common.read_result import ReadResult, ReadStatus
from pocketmq.errors import PocketMQError

log = logging.getLogger(__name__)

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
DEFAULT_RETRY_MAX_TIMES = 16
REVIVE_BATCH_CKS = 64  # CKs handled per revive queue and pass: bounds one pass's work


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
    reason = f"{read.reason}: {read.description}" if read.description else read.reason
    if ending is CkEnding.DROP:
        return Dropped(reason)
    return Copy(copies.dead_letter_reference(ck.group, ck.topic, ck.queue_id, queue_offset, read.reason,
                                             read.description), dead_letter=True)


class ReviveService:
    """Runs revive over the revive queues of one broker; counters are read by ``group describe``."""

    def __init__(self, queues: list[ReviveQueue], reader: MessageReader, store, groups, offsets, topics, clock, *,
                 policy: CkRewritePolicy, interval_ms: int):
        self._queues = queues
        self.reader = reader
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
        self.metrics: Counter[str] = Counter()  # revived, dead_lettered, not_found, rewrites, endings, drops ...
        self.per_queue: Counter[tuple[str, str, int, str]] = Counter()  # (group, topic, queue id, what) -> count

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
        for queue in self._queues:
            while True:
                queue.catch_up()
                due = queue.ledger.due(now_ms, REVIVE_BATCH_CKS)
                if due:
                    await self._revive(queue, due, now_ms)
                queue.catch_up()
                self._offsets.commit(REVIVE_GROUP, queue.topic, queue.queue_id, queue.ledger.commit_offset())
                handled += len(due)
                if len(due) < REVIVE_BATCH_CKS:
                    break
        return handled

    async def _revive(self, queue: ReviveQueue, cks: list[PopCheckpoint], now_ms: int) -> None:
        """Revive a batch of due CKs with two store writes: every copy, then one append of their ACKs and
        rewritten CKs (two writes per CK made revive wait on the store's write path most of the time)."""
        plans = [await self._plan(ck, now_ms) for ck in cks]
        outgoing = [copy for _, copies_of_ck, _, _ in plans for copy in copies_of_ck]
        if outgoing and not await self.writes.put_copies([c.message for c in outgoing]):
            # The copies were not stored: keep the CKs open; the next pass tries again.
            self.metrics["write_failures"] += 1
            return
        await self.writes.close(queue, [(AckRecord(ck.topic, ck.group, ck.queue_id, ck.start_offset, ck.pop_time_ms,
                                                   ck.broker_name, tuple(offsets)), rewrites)
                                        for ck, _, rewrites, offsets in plans])
        for ck, copies_of_ck, _, _ in plans:
            self._count(ck, copies_of_ck)

    async def _plan(self, ck: PopCheckpoint, now_ms: int) -> tuple[PopCheckpoint, list[Copy], list[PopCheckpoint],
                                                                   list[int]]:
        """What revive does with each un-acked message of ``ck``: (ck, copies, rewritten CKs, offsets closed)."""
        config = self._groups.get(ck.group)
        retry_max_times = config.retry_max_times if config is not None else DEFAULT_RETRY_MAX_TIMES
        outgoing: list[Copy] = []
        rewrites: list[PopCheckpoint] = []
        offsets = ck.unacked_offsets()
        for queue_offset in offsets:
            read = await self.reader.read(ck.topic, ck.queue_id, queue_offset)
            decision = decide(ck, queue_offset, read, retry_max_times=retry_max_times, policy=self.policy,
                              now_ms=now_ms)
            if isinstance(decision, Copy):
                outgoing.append(decision)
            elif isinstance(decision, Rewrite):
                rewrites.append(decision.checkpoint)
                self.metrics["rewrites"] += 1
                self.metrics["backoff_wait_ms"] += decision.wait_ms
                log.info("event=ck_rewritten group=%s topic=%s queue=%d offset=%d rewrites=%d wait_ms=%d reason=%s",
                         ck.group, ck.topic, ck.queue_id, queue_offset, decision.checkpoint.rewrite_count,
                         decision.wait_ms, read.reason)
            elif isinstance(decision, Gone):
                self.metrics["not_found"] += 1
            else:
                self.metrics["drops"] += 1
                self.metrics["endings"] += 1
                log.error("event=ck_dropped group=%s topic=%s queue=%d offset=%d reason=%s", ck.group, ck.topic,
                          ck.queue_id, queue_offset, decision.reason)
        return ck, outgoing, rewrites, offsets

    def _count(self, ck: PopCheckpoint, outgoing: list[Copy]) -> None:
        for copy in outgoing:
            what = "dead_lettered" if copy.dead_letter else "retried"
            self.metrics[what] += 1
            self.per_queue[(ck.group, ck.topic, ck.queue_id, what)] += 1
            reason = copy.message.properties.get(copies.DLQ_REASON)
            if copy.dead_letter and reason != copies.REASON_MAX_ATTEMPTS:
                self.metrics["endings"] += 1
                log.error("event=dead_lettered_after_failed_reads group=%s topic=%s queue=%d reason=%s",
                          ck.group, ck.topic, ck.queue_id, reason)
        self.metrics["cks_revived"] += 1

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
