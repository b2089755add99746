"""The pop engine: receive with invisible time, ack, change invisible time, forward to the DLQ.

Both front ends call ``PopService``; it composes the pure parts (``PopCheckpoint``, ``ReviveLedger``,
``OrderlyQueue``, ``CkRewritePolicy``) with the store.

**Pop** (``pop``): the queues of the topic (one, or all when ``queue_id < 0``, starting at a rotating index)
and, for a non-FIFO group, queue 0.. of its pop retry topic ``%RETRY%<group>_<topic>`` (first on every fifth
pop, otherwise after the topic's queues) are read in turn until ``max_count`` (<= 32) messages are taken.
Each (group, topic, queue) has a lock; a pop finding it held skips that queue, so concurrent receives never
hand out the same message twice. For a queue with messages: read from the group's offset (or the init offset:
the queue min for MIN mode and retry topics; for MAX the max, unless the queue still starts at 0), append a
CK to a revive queue (round robin over the revive topic's queues), then commit the next offset: the consumer
offset advances at pop time, once the CK is stored. When nothing is found and ``poll_ms`` > 0 the pop waits
for an arrival in the topic or its retry topic (``PopWaiters``) and tries again, until ``poll_ms`` passes.
The queues a client may pop (of the topic and of the pop retry topic) are its share in the group's gray
split (``broker/gray_split.py``: every queue unless the group has gray and normal clients alive), looked up
on every try.

**FIFO groups** (``consumeMessageOrderly``) pop through ``OrderlyQueue`` (state in ``FifoPopState``): no CK,
one message of a message group in flight at a time, redelivery of the same message (attempt + 1) after its
invisible time, dead letter past the group's max attempts. Their receipt handles carry revive queue id 999.

**Ack / change invisible time / forward to DLQ** validate the receipt handle against the ledger of its revive
queue, caught up first: a handle of another broker, of a CK that is closed (acked, changed or revived
already) or of an offset that is not in its CK is ``InvalidReceiptHandleError``. An ack appends an ACK
record; a change appends a one-message CK with the new deadline (pop time = now) and an ACK of the old one in
one store call, and returns the new handle; the attempt does not change. Invisible times below
``min_invisible_ms`` are raised to it, so a client that nacks with ~0 ms cannot make a hot loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field

from pocketmq.broker.gray_split import EVERY_QUEUE, GraySplits, QueueShare
from pocketmq.broker.offsets import persist_behind_commit_log
from pocketmq.broker.pop import copies
from pocketmq.broker.pop.checkpoint import (
    MAX_MESSAGES_PER_CK,
    AckRecord,
    PopCheckpoint,
    ck_key,
)
from pocketmq.broker.pop.fifo import ORDERLY_REVIVE_QUEUE_ID, FifoPopState
from pocketmq.broker.pop.ledger import QueuePopState
from pocketmq.broker.pop.orderly import Candidate
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.revive import ReviveService, retry_limit
from pocketmq.broker.pop.revive_queue import LocalPopWrites, ReviveQueue
from pocketmq.broker.pop.waiters import PopWaiters
from pocketmq.common import properties as props
from pocketmq.common.message import MessageExt
from pocketmq.common.read_result import ReadStatus
from pocketmq.common.tag_expression import parse_tag_expression
from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic
from pocketmq.errors import (
    BadRequestError,
    InvalidReceiptHandleError,
    NoPermissionError,
    NotReplicatedError,
)
from pocketmq.protocol.message_codec import decode_record, record_queue_offset
from pocketmq.store.api import GetStatus
from pocketmq.store.tags import tag_hash_code

log = logging.getLogger(__name__)

INIT_MODE_MIN = 0
INIT_MODE_MAX = 1
RETRY_FIRST_EVERY = 5  # every fifth pop reads the retry topic first (RocketMQ: 20 % of pops)
FIFO_WINDOW = 128  # messages of a FIFO queue considered per pop
FIFO_RECHECK_MS = 500  # a waiting FIFO pop re-checks this often (a message group unblocks when time passes)
MAX_INVISIBLE_MS = 12 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class PopRequest:
    group: str
    topic: str
    max_count: int
    invisible_ms: int
    queue_id: int = -1  # < 0: every queue of the topic
    tag_expression: str | None = None  # "a || b"; None or "*" for every tag
    poll_ms: int = 0  # long polling: how long to wait for a message when there is none
    init_mode: int = INIT_MODE_MIN
    fifo: bool | None = None  # None: the group's consumeMessageOrderly
    client_id: str = ""  # who pops: the group's gray split decides its queues (broker/gray_split.py)


@dataclass(slots=True)
class PoppedQueue:
    """What one pop took from one queue: raw stored records in queue order."""

    topic: str  # the topic read: the business topic or its pop retry topic
    queue_id: int
    start_offset: int  # the CK's start offset (FIFO: unused, each handle names its own offset)
    records: list[bytes]
    retry: bool
    attempts: list[int] | None = None  # FIFO: 1-based delivery attempt per record
    reconsume_times: int = 0  # staged queues (pop/staged.py): a message handed out again in place

    @property
    def queue_offsets(self) -> list[int]:
        return [record_queue_offset(r) for r in self.records]

    @property
    def as_stored(self) -> bool:
        """The records can go to a client unchanged (not a retry copy, no FIFO attempt to set)."""
        return not self.retry and self.attempts is None and not self.reconsume_times

    def messages(self) -> list[MessageExt]:
        """The records decoded as delivered: business topic, reconsume times = attempt - 1 for FIFO."""
        out = []
        for i, record in enumerate(self.records):
            msg = decode_record(record)[0]
            if self.retry:
                msg.topic = copies.business_topic(msg)
            if self.attempts is not None:
                msg.reconsume_times = self.attempts[i] - 1
            elif self.reconsume_times:
                msg.reconsume_times = self.reconsume_times
            out.append(msg)
        return out


@dataclass(slots=True)
class PopResult:
    pop_time_ms: int
    invisible_ms: int
    revive_queue_id: int
    broker_name: str
    queues: list[PoppedQueue] = field(default_factory=list)
    rest_num: int = 0  # messages left in the queues visited

    @property
    def count(self) -> int:
        return sum(len(q.records) for q in self.queues)

    def handle(self, popped: PoppedQueue, queue_offset: int, phys_offset: int = 0) -> ReceiptHandle:
        fifo = popped.attempts is not None
        return ReceiptHandle(
            popped.topic,
            queue_offset if fifo else popped.start_offset,
            self.pop_time_ms,
            self.invisible_ms,
            ORDERLY_REVIVE_QUEUE_ID if fifo else self.revive_queue_id,
            1 if popped.retry else 0,
            self.broker_name,
            popped.queue_id,
            queue_offset,
            phys_offset,
        )

    def delivered(self) -> list[tuple[MessageExt, ReceiptHandle]]:
        """Every message with its receipt handle (also set as its POP_CK property)."""
        out = []
        for popped in self.queues:
            for msg in popped.messages():
                handle = self.handle(popped, msg.queue_offset, msg.phys_offset)
                msg.properties[props.POP_CK] = handle.encode()
                out.append((msg, handle))
        return out


# Where each of ReviveService.per_queue's counts goes in a QueuePopStats row.
_REVIVE_COLUMNS = {"retried": 2, "dead_lettered": 3, "rewrites": 4, "endings": 5}


@dataclass(frozen=True, slots=True)
class QueuePopStats:
    in_flight: int = 0
    waiting_to_revive: int = 0
    retried: int = 0
    dead_lettered: int = 0
    rewrites: int = 0  # CK rewrites after failed reads (revive backoff)
    endings: int = 0  # messages whose reads failed past the backoff table (dead-lettered reference or dropped)


def tag_predicate(expression: str | None):
    tags = parse_tag_expression(expression)
    if not tags:
        return None
    return frozenset(tag_hash_code(t) for t in tags).__contains__


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
        revive_topic: str,
        revive: ReviveService,
        revive_queues: list[ReviveQueue],
        fifo: FifoPopState,
        waiters: PopWaiters,
        min_invisible_ms: int,
        persist_interval_ms: int,
        durable_timeout_ms: int = 5_000,
        gray: GraySplits | None = None,
    ):
        self._store = store
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._clock = clock
        self.broker_name = broker_name
        self.revive_topic = revive_topic
        self.revive = revive
        self._revive_queues = revive_queues
        self._fifo = fifo
        self._waiters = waiters
        self.min_invisible_ms = min_invisible_ms
        self._persist_interval_ms = persist_interval_ms
        self._durable_timeout_ms = durable_timeout_ms  # how long an offsets write waits for the commit log
        self._gray = gray
        self._locks: dict[tuple[str, str, int], asyncio.Lock] = {}
        self._pops = itertools.count()
        self._tasks: list[asyncio.Task] = []
        self.running = False
        # Where CK and ACK records go: the revive queues here, or the escape bridge (a slave acting as master).
        self.writes = LocalPopWrites(store, topics)
        self.fifo_dead_lettered: dict[tuple[str, str, int], int] = {}
        self.staged = None  # pop/staged.StagedPop: (group, topic)s consumed stage by stage (set by setup)

    @property
    def fifo(self) -> FifoPopState:
        """The FIFO pop state (a slave loads it at start and follows its master's: cluster.ha_services)."""
        return self._fifo

    # -- lifecycle --------------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._fifo.load()
        for queue in self._revive_queues:
            queue.catch_up()
        self._store.add_arrival_listener(self._waiters.notify)
        self.revive.start()
        self._tasks.append(asyncio.ensure_future(self._persist_loop()))
        self.running = True
        log.info(
            "event=pop_started revive_queues=%d open_cks=%d",
            len(self._revive_queues),
            sum(len(q.ledger) for q in self._revive_queues),
        )

    async def stop(self) -> None:
        self.running = False
        self._waiters.wake_all()
        await self.revive.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self._fifo.persist()

    async def persist_state(self) -> None:
        """The FIFO pop state, and the consumer offsets behind the commit log (never ahead of their CKs)."""
        self._fifo.persist()
        await persist_behind_commit_log(self._offsets, self._store, self._durable_timeout_ms)

    async def _persist_loop(self) -> None:
        # Pop moves consumer offsets all the time; saving them often bounds what a kill -9 re-delivers.
        while True:
            await asyncio.sleep(self._persist_interval_ms / 1000)
            try:
                await self.persist_state()
            except OSError:
                log.exception("event=pop_state_persist_failed")

    # -- pop ----------------------------------------------------------------------------------------------------------
    async def pop(self, req: PopRequest) -> PopResult:
        if not 1 <= req.max_count <= MAX_MESSAGES_PER_CK:
            raise BadRequestError(f"max message count {req.max_count} is outside [1, {MAX_MESSAGES_PER_CK}]")
        if not 0 <= req.invisible_ms <= MAX_INVISIBLE_MS:
            raise BadRequestError(f"invisible time {req.invisible_ms} ms is outside [0, {MAX_INVISIBLE_MS}]")
        group_config = self._groups.get_or_create(req.group)
        if not group_config.consume_enable:
            raise NoPermissionError(f"group {req.group!r} may not consume now (consumeEnable=false)")
        topic_config = self._topics.require(req.topic)
        if not topic_config.readable:
            raise NoPermissionError(f"topic {req.topic!r} is not readable on this broker")
        if req.queue_id >= topic_config.read_queue_nums:
            raise BadRequestError(
                f"queue id {req.queue_id} is illegal: topic {req.topic!r} has "
                f"{topic_config.read_queue_nums} read queues"
            )
        fifo = group_config.consume_message_orderly if req.fifo is None else req.fifo
        max_attempts = retry_limit(group_config.retry_max_times) + 1
        invisible_ms = max(req.invisible_ms, self.min_invisible_ms)
        keep = tag_predicate(req.tag_expression)
        retry_topic = pop_retry_topic(req.group, req.topic)
        watched = (req.topic,) if fifo else (req.topic, retry_topic)
        deadline_ms = self._clock.monotonic_ms() + req.poll_ms
        while True:
            # The split is looked up on every try: a long poll must not keep a share that changed meanwhile.
            share = self._gray.share(req.group, req.client_id) if self._gray is not None else EVERY_QUEUE
            allowed = share.queue_ids(topic_config.read_queue_nums, topic_config.gray_queue_ratio)
            # a queue outside the client's share gives nothing: gray and normal clients never take each other's
            queue_ids = allowed if req.queue_id < 0 else [q for q in allowed if q == req.queue_id]
            plan = self._plan(req.topic, queue_ids, None if fifo else retry_topic, share)
            result = PopResult(
                self._clock.now_ms(), invisible_ms, next(self._pops) % len(self._revive_queues), self.broker_name
            )
            for topic, queue_id in plan:
                wanted = req.max_count - result.count
                if wanted <= 0:
                    break
                if fifo:
                    popped = await self._pop_fifo(req, topic, queue_id, wanted, result, keep, max_attempts)
                elif self.staged.is_staged(req.group, topic):
                    popped = await self.staged.pop_queue(
                        req.group,
                        topic,
                        queue_id,
                        wanted,
                        result,
                        keep,
                        max_attempts=max_attempts,
                        next_offset=self._start_offset(req.group, topic, queue_id, req.init_mode),
                    )
                else:
                    popped = await self._pop_queue(req, topic, queue_id, wanted, result, keep)
                if popped is not None:
                    result.queues.append(popped)
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if result.queues or remaining_ms <= 0 or not self.running:
                return result
            # FIFO and staged queues also unblock when an invisible time passes: re-check now and then.
            recheck = fifo or self.staged.is_staged(req.group, req.topic)
            await self._waiters.wait(watched, min(remaining_ms, FIFO_RECHECK_MS) if recheck else remaining_ms)

    def _plan(
        self, topic: str, queue_ids: list[int], retry_topic: str | None, share: QueueShare
    ) -> list[tuple[str, int]]:
        turn = next(self._pops)
        start = turn % len(queue_ids) if queue_ids else 0
        plan = [(topic, q) for q in queue_ids[start:] + queue_ids[:start]]
        retry_config = self._topics.get(retry_topic) if retry_topic else None
        if retry_config is None:
            return plan
        retry = [(retry_topic, q) for q in share.retry_queue_ids(retry_config.read_queue_nums)]
        return retry + plan if turn % RETRY_FIRST_EVERY == 0 else plan + retry

    def _lock(self, group: str, topic: str, queue_id: int) -> asyncio.Lock | None:
        """The queue's lock, or None when another pop holds it (the caller skips the queue)."""
        lock = self._locks.setdefault((group, topic, queue_id), asyncio.Lock())
        return None if lock.locked() else lock

    async def settle(self) -> None:
        """Wait until every queue pop under way when called has finished: its CK (or dead letters) written, then
        its offsets and FIFO state moved, or nothing moved when the write failed. Whoever swaps ``writes`` and
        then reads those offsets (a slave handing its acting progress to its master) calls it in between: a pop
        still writing through the old ``writes`` would otherwise move its offset after the read, and what it
        handed out would be handed out again by the one that read them."""
        for lock in [lock for lock in self._locks.values() if lock.locked()]:
            async with lock:
                pass

    def _start_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        committed = self._offsets.query(group, topic, queue_id)
        if committed is not None:
            return committed
        low = self._store.min_queue_offset(topic, queue_id)
        if init_mode == INIT_MODE_MAX and low > 0 and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            start = self._store.max_queue_offset(topic, queue_id)
        else:
            start = low
        self._offsets.commit(group, topic, queue_id, start)
        return start

    async def _pop_queue(
        self, req: PopRequest, topic: str, queue_id: int, wanted: int, result: PopResult, keep
    ) -> PoppedQueue | None:
        lock = self._lock(req.group, topic, queue_id)
        if lock is None:
            return None
        async with lock:
            queue_offset = self._start_offset(req.group, topic, queue_id, req.init_mode)
            got = self._store.get_messages(topic, queue_id, queue_offset, wanted, tag_filter=keep)
            if got.status is GetStatus.FOUND and got.records:
                popped = PoppedQueue(topic, queue_id, 0, got.records, retry=topic != req.topic)
                offsets = popped.queue_offsets
                popped.start_offset = offsets[0]
                ck = PopCheckpoint.of_offsets(
                    topic,
                    req.group,
                    queue_id,
                    offsets,
                    result.pop_time_ms,
                    result.invisible_ms,
                    self.broker_name,
                    result.revive_queue_id,
                )
                result.revive_queue_id = await self.writes.checkpoint(self._revive_queues[result.revive_queue_id], ck)
                self._offsets.commit(req.group, topic, queue_id, got.next_begin_offset)
                result.rest_num += max(got.max_offset - got.next_begin_offset, 0)
                return popped
            self._move_past(req.group, topic, queue_id, queue_offset, got)
        return None

    def _move_past(self, group: str, topic: str, queue_id: int, queue_offset: int, got) -> None:
        """Nothing to hand out: move the group's offset past filtered or removed messages, or back in range."""
        if got.status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING, GetStatus.OFFSET_TOO_SMALL):
            self._offsets.commit(group, topic, queue_id, got.next_begin_offset)
        elif got.status is GetStatus.OFFSET_OVERFLOW_BADLY:
            self._offsets.reset(group, topic, queue_id, got.max_offset)

    async def _pop_fifo(
        self, req: PopRequest, topic: str, queue_id: int, wanted: int, result: PopResult, keep, max_attempts: int
    ) -> PoppedQueue | None:
        lock = self._lock(req.group, topic, queue_id)
        if lock is None:
            return None
        async with lock:
            start = self._start_offset(req.group, topic, queue_id, req.init_mode)
            orderly = self._fifo.queue(req.group, topic, queue_id, start)
            got = self._store.get_messages(topic, queue_id, orderly.commit_offset, FIFO_WINDOW, tag_filter=keep)
            if got.status is GetStatus.OFFSET_TOO_SMALL:
                orderly.skip_to(got.next_begin_offset)
                got = self._store.get_messages(topic, queue_id, orderly.commit_offset, FIFO_WINDOW, tag_filter=keep)
            records = got.records if got.status is GetStatus.FOUND else []
            by_offset = {record_queue_offset(r): r for r in records}
            if got.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE):
                orderly.mark_done(o for o in range(orderly.commit_offset, got.next_begin_offset) if o not in by_offset)
            messages = {o: decode_record(r)[0] for o, r in by_offset.items()}
            candidates = [Candidate(o, m.message_group or "") for o, m in sorted(messages.items())]
            deliver = []
            while True:
                selection = orderly.select(
                    candidates, result.pop_time_ms, result.invisible_ms, wanted - len(deliver), max_attempts
                )
                deliver += selection.deliver
                if not selection.dead_letters:
                    break
                # Dead letters are done once written; their message groups may deliver their next message now.
                await self._dead_letter_fifo(
                    req.group, topic, queue_id, orderly, [messages[o] for o, _ in selection.dead_letters]
                )
            self._fifo.changed()
            self._offsets.commit(req.group, topic, queue_id, orderly.commit_offset)
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

    async def _dead_letter_fifo(self, group: str, topic: str, queue_id: int, orderly, dead: list[MessageExt]) -> None:
        letters = [copies.dead_letter(m, group, copies.REASON_MAX_ATTEMPTS) for m in dead]
        await self._put(letters)
        for msg in dead:
            orderly.ack(msg.queue_offset)
        key = (group, topic, queue_id)
        self.fifo_dead_lettered[key] = self.fifo_dead_lettered.get(key, 0) + len(dead)

    async def _put(self, messages: list[MessageExt]) -> None:
        await self.writes.put_messages(messages)

    # -- ack, change invisible time, forward to DLQ --------------------------------------------------------------
    def _open_checkpoint(
        self, group: str, handle: ReceiptHandle, *, catch_up: bool = True
    ) -> tuple[ReviveQueue, PopCheckpoint]:
        if handle.broker_name != self.broker_name:
            raise InvalidReceiptHandleError(f"the receipt handle is broker {handle.broker_name}'s, not this one's")
        if not 0 <= handle.revive_queue_id < len(self._revive_queues):
            raise InvalidReceiptHandleError(f"the receipt handle names revive queue {handle.revive_queue_id}")
        queue = self._revive_queues[handle.revive_queue_id]
        if catch_up:
            queue.catch_up()
        key = ck_key(handle.topic, group, handle.queue_id, handle.start_offset, handle.pop_time_ms, handle.broker_name)
        ck = queue.ledger.open_checkpoint(key)
        index = ck.index_of(handle.queue_offset) if ck is not None else None
        if index is None or ck.is_acked(index):
            raise InvalidReceiptHandleError(
                "the receipt handle is stale: its message was acked, changed or "
                "revived already, or it was never popped by this group"
            )
        return queue, ck

    def _forwardable(self, handle: ReceiptHandle) -> bool:
        """A handle of this group whose CK is not here may still be good on a slave acting as master: its CK was
        escaped to another group, where its ack goes too."""
        return (
            self.writes.forwards_unknown_handles
            and handle.broker_name == self.broker_name
            and handle.revive_queue_id != ORDERLY_REVIVE_QUEUE_ID
        )

    def _orderly(self, group: str, handle: ReceiptHandle):
        if handle.broker_name != self.broker_name:
            raise InvalidReceiptHandleError(f"the receipt handle is broker {handle.broker_name}'s, not this one's")
        orderly = self._fifo.find(group, handle.topic, handle.queue_id)
        if orderly is None or orderly.attempt_of(handle.queue_offset) == 0:
            raise InvalidReceiptHandleError("the FIFO receipt handle is stale: its message is not in flight")
        return orderly

    async def ack(self, group: str, handles: list[ReceiptHandle]) -> list[InvalidReceiptHandleError | None]:
        """Ack every handle; one entry per handle: None when acked, the error when the handle is invalid."""
        outcome: list[InvalidReceiptHandleError | None] = []
        fifo_acked = False
        forwarded: list[AckRecord] = []
        acks: dict[tuple[int, str], tuple[ReviveQueue, PopCheckpoint, list[int]]] = {}
        # Catch each revive queue up once for the whole batch (once per handle was the ack path's main cost).
        for queue_id in {h.revive_queue_id for h in handles}:
            if 0 <= queue_id < len(self._revive_queues):
                self._revive_queues[queue_id].catch_up()
        for handle in handles:
            try:
                if handle.revive_queue_id == ORDERLY_REVIVE_QUEUE_ID:
                    self._orderly(group, handle).ack(handle.queue_offset)
                    self._fifo.promised()
                    fifo_acked = True
                    self._waiters.notify(handle.topic)  # the message group may deliver its next message now
                else:
                    queue, ck = self._open_checkpoint(group, handle, catch_up=False)
                    acks.setdefault((queue.queue_id, ck.key), (queue, ck, []))[2].append(handle.queue_offset)
                outcome.append(None)
            except InvalidReceiptHandleError as exc:
                if not self._forwardable(handle):
                    outcome.append(exc)
                    continue
                forwarded.append(_ack_of_handle(group, handle))  # its CK lives on another broker
                outcome.append(None)
        by_queue: dict[int, list[AckRecord]] = {}
        for queue, ck, acked in acks.values():
            by_queue.setdefault(queue.queue_id, []).append(ck.ack_of(acked))
        for queue_id, records in by_queue.items():
            await self.writes.acks(self._revive_queues[queue_id], records)
        if forwarded:
            await self.writes.forward_acks(forwarded)
        if fifo_acked:
            await self.writes.fifo_state()
        for topic in {ck.topic for _, ck, _ in acks.values() if self.staged.is_staged(ck.group, ck.topic)}:
            self._waiters.notify(topic)  # the ack may end a stage: pops waiting for the next one go now
        return outcome

    async def change_invisible(self, group: str, handle: ReceiptHandle, invisible_ms: int) -> ReceiptHandle:
        """A new deadline for one popped message; returns its new handle (the old one is no longer valid)."""
        if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
            raise BadRequestError(f"invisible time {invisible_ms} ms is outside [0, {MAX_INVISIBLE_MS}]")
        invisible_ms = max(invisible_ms, self.min_invisible_ms)
        now_ms = self._clock.now_ms()
        if handle.revive_queue_id == ORDERLY_REVIVE_QUEUE_ID:
            self._orderly(group, handle).change_invisible(handle.queue_offset, now_ms, invisible_ms)
            self._fifo.promised()
            changed = ReceiptHandle(
                handle.topic,
                handle.queue_offset,
                now_ms,
                invisible_ms,
                handle.revive_queue_id,
                handle.retry_flag,
                handle.broker_name,
                handle.queue_id,
                handle.queue_offset,
                handle.phys_offset,
            )
            try:
                await self.writes.fifo_state()
            except NotReplicatedError as exc:  # changed here, not on a slave: the handle stays good on this broker
                exc.handle = changed
                raise
            return changed
        try:
            queue, _ = self._open_checkpoint(group, handle)
        except InvalidReceiptHandleError:
            if not self._forwardable(handle):
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
            self.broker_name,
            handle.revive_queue_id,
        )

        def new_handle(revive_queue_id: int) -> ReceiptHandle:
            return ReceiptHandle(
                handle.topic,
                handle.queue_offset,
                pop_time_ms,
                invisible_ms,
                revive_queue_id,
                handle.retry_flag,
                handle.broker_name,
                handle.queue_id,
                handle.queue_offset,
                handle.phys_offset,
            )

        try:
            return new_handle(await self.writes.change(queue, _ack_of_handle(group, handle), new_ck))
        except NotReplicatedError as exc:  # changed here, not on a slave: the handle stays good on this broker
            exc.handle = new_handle(queue.queue_id)
            raise

    async def forward_to_dead_letter(self, group: str, handle: ReceiptHandle) -> None:
        """Move a popped message to ``%DLQ%<group>`` now (a client gave up on it) and count it as acked."""
        if handle.revive_queue_id == ORDERLY_REVIVE_QUEUE_ID:
            self._orderly(group, handle)
        else:
            try:
                self._open_checkpoint(group, handle)
            except InvalidReceiptHandleError:
                if not self._forwardable(handle):
                    raise  # else its CK lives on another broker: the dead letter and the ack are escaped
        read = await self.revive.readers.for_broker(handle.broker_name).read(
            handle.topic, handle.queue_id, handle.queue_offset
        )
        if read.status is ReadStatus.FOUND:
            await self._put([copies.dead_letter(read.message, group, copies.REASON_CLIENT_FORWARD)])
        else:
            log.warning(
                "event=forward_to_dlq_unreadable group=%s topic=%s queue=%d offset=%d reason=%s",
                group,
                handle.topic,
                handle.queue_id,
                handle.queue_offset,
                read.reason,
            )
        await self.ack(group, [handle])

    # -- observability ----------------------------------------------------------------------------------------------
    def group_stats(self, group: str) -> dict[tuple[str, int], QueuePopStats]:
        """(topic, queue id) -> in flight, waiting to revive, retried, dead-lettered, rewrites, endings, for
        ``group describe``."""
        now_ms = self._clock.now_ms()
        counts: dict[tuple[str, int], list[int]] = {}

        def row(topic: str, queue_id: int) -> list[int]:
            return counts.setdefault((topic, queue_id), [0] * 6)

        for queue in self._revive_queues:
            queue.catch_up()
            for (g, topic, queue_id), state in queue.ledger.pop_state(now_ms).items():
                if g == group:
                    r = row(topic, queue_id)
                    r[0] += state.in_flight
                    r[1] += state.waiting_to_revive
        for (topic, queue_id), orderly in self._fifo.of_group(group).items():
            row(topic, queue_id)[0] += orderly.in_flight(now_ms)
        for (g, topic, queue_id, what), n in self.revive.per_queue.items():
            if g == group:
                row(topic, queue_id)[_REVIVE_COLUMNS[what]] += n
        for (g, topic, queue_id), n in self.fifo_dead_lettered.items():
            if g == group:
                row(topic, queue_id)[3] += n
        return {key: QueuePopStats(*values) for key, values in counts.items()}

    def __repr__(self) -> str:
        return f"<PopService revive_queues={len(self._revive_queues)} waiting={self._waiters.waiting} {self.revive!r}>"


def _ack_of_handle(group: str, handle: ReceiptHandle) -> AckRecord:
    return AckRecord(
        handle.topic,
        group,
        handle.queue_id,
        handle.start_offset,
        handle.pop_time_ms,
        handle.broker_name,
        (handle.queue_offset,),
    )


__all__ = [
    "INIT_MODE_MAX",
    "INIT_MODE_MIN",
    "PopRequest",
    "PopResult",
    "PopService",
    "PoppedQueue",
    "QueuePopState",
    "QueuePopStats",
]
