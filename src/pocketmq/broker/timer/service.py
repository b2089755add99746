"""The timer service: delayed messages wait in the timer topic and are delivered to their real topic when due.

On disk (all in the ordinary commit log, queue 0 of ``rmq_sys_wheel_timer``):

- a **timer record** is the delayed message itself, its topic and queue replaced by the timer topic's, with
  ``REAL_TOPIC``, ``REAL_QID`` and ``TIMER_OUT_MS`` (the delivery time, epoch ms) in its properties;
- a **tombstone** (property ``PMQ_TIMER_DONE`` = the timer record's queue offset, plus its ``TIMER_OUT_MS``)
  says that record was delivered. Delivery appends the real message and its tombstone in one store batch;
- ``<data_dir>/config/timer_progress.json`` holds the smallest timer queue offset still pending, written
  atomically now and then. It only bounds the work of a restart; correctness rests on the tombstones;
- ``<data_dir>/config/timer_wheel.bin`` is the wheel itself as of a timer queue offset (``timer.snapshot``),
  saved at a clean stop and about once a minute while many timers arrive: a start loads it and reads only the
  records after it, instead of every pending record.

In memory: a ``TimerWheel`` of (deliver_ms, queue offset) pairs, 16 bytes per pending timer. The service
tails the timer queue from ``loaded_until``: a timer record adds a pair, a tombstone removes one. A restart
tails from the persisted progress offset, so every record that was never tombstoned is pending again and
nothing tombstoned is delivered twice. (A crash that tears the one batch between the real message and its
tombstone redelivers that message: at least once, never lost.)

A **recall** (``timer.recall``) cancels a timer before it is due: it leaves the wheel and its tombstone is
written at once, so the message is never delivered, now or after a restart. Send receipts carry the handle
that names it (``timer.recall``'s ``RecallHandles``: signed, so it cannot be forged).

Delivered messages lose ``DELAY`` and the timer properties, so nothing delays them again (#2724), and keep
everything else: body, flag, sys_flag, born time and host, reconsume times, the user's properties.

Failed deliveries are typed (``store.write_result``). A message that can never be delivered (properties too
large, refused as illegal) becomes a dead letter at once (``timer.dead_letter``) and the rest of its batch goes
on. A delivery that failed for a passing reason (disk full, escape off or its target down) leaves the wheel for
``_retrying`` and waits its step of a ``WriteBackoff`` (10 s ... 2 h); past the table it is dead-lettered
(``WRITE_FAILED``), and when even that cannot be written it stays there (*parked*, retried every last step):
nothing is lost. A round whose deliveries all failed ends, and the loop waits longer before the next
(``PassPacer``, 500 ms doubling up to 30 s). Rounds yield to the event loop between batches.

Delivery runs as a periodic task (``runtime.periodic``, ``broker-timer``) on the broker's clock: a round at
``start_delivery()``, then one when the next timer is due (at most every 500 ms, longer while blocked) or at once
when a new timer record arrives; ``stop_delivery()`` lets the round in progress end.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import zlib
from array import array
from pathlib import Path
from typing import TYPE_CHECKING

from pocketmq.broker.pop.copies import DLQ_REASON, REASON_WRITE_FAILED, REASON_WRITE_REFUSED
from pocketmq.broker.pop.rewrite import DEFAULT_CK_REWRITE_BACKOFF_MS
from pocketmq.broker.timer import dead_letter, snapshot
from pocketmq.broker.timer.delay import TIMER_PROPERTIES, TimerLimits, deliver_time_ms, is_delayed
from pocketmq.broker.timer.recall import RecallHandles
from pocketmq.broker.timer.wheel import TimerWheel
from pocketmq.broker.write_backoff import PassPacer, WriteBackoff
from pocketmq.broker.write_metrics import ENDING_DLQ, ENDING_PARKED, ENDING_UNWRITABLE, INVALID, BackgroundWriteMetrics
from pocketmq.common import properties as props
from pocketmq.common.errors import MessageTypeConflictError, PocketMQError, RecallTooLateError, ServiceNotAvailableError
from pocketmq.common.message import MessageExt
from pocketmq.common.record import decode_record, property_keys, record_property_values, record_queue_offset
from pocketmq.common.topic import DLQ_GROUP_TOPIC_PREFIX, TIMER_TOPIC, MessageType, TopicConfig
from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.files import atomic_write_json, load_json
from pocketmq.runtime.periodic import PeriodicTask
from pocketmq.store.api import GetStatus
from pocketmq.store.write_result import WriteResult, of_puts, write_problem

if TYPE_CHECKING:
    from pocketmq.broker.write_path import TimerWrites, WritePathSwitch

log = logging.getLogger(__name__)

TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_DONE = "PMQ_TIMER_DONE"
TIMER_QUEUE_ID = 0
_READ_BATCH = 256
_READ_MAX_BYTES = 16 * 1024 * 1024
_IDLE_WAIT_MS = 500  # longest sleep of the loop with nothing due (a new timer wakes it earlier)
_MAX_BLOCKED_WAIT_MS = 30_000  # longest sleep after rounds whose deliveries all failed
_PERSIST_EVERY_MS = 1000
_SNAPSHOT_EVERY_MS = 60_000  # at most this often the wheel is saved (timer.snapshot) ...
_SNAPSHOT_AFTER_RECORDS = 10_000  # ... and only once this many timer records were read since the last save
# what loading a timer record reads, found in place: a restart with a million pending timers reads a million
# records, and decoding each whole (body, every property) took three times as long
_LOADED_PROPERTIES = property_keys((TIMER_OUT_MS, TIMER_DONE))
_STRIPPED_AT_DELIVERY = (props.DELAY_TIME_LEVEL, props.REAL_TOPIC, props.REAL_QUEUE_ID, TIMER_OUT_MS, *TIMER_PROPERTIES)


class TimerService:
    """Owns the timer topic of one broker's store. ``start()`` rebuilds, ``start_delivery()`` runs the delivery
    loop."""

    def __init__(
        self,
        store,
        topics,
        limits: TimerLimits,
        progress_path: Path,
        clock: Clock,
        *,
        write_path: WritePathSwitch,
        recall_handles: RecallHandles,
        deliver_batch: int = 512,
        write_backoff_ms: tuple[int, ...] = DEFAULT_CK_REWRITE_BACKOFF_MS,
        metrics: MetricsRegistry | None = None,
    ):
        self._store = store
        self._topics = topics
        self.limits = limits
        self._progress_path = Path(progress_path)
        self._snapshot_path = self._progress_path.with_name(snapshot.SNAPSHOT_FILE)
        self._clock = clock
        self._deliver_batch = deliver_batch
        self._wheel = TimerWheel()
        self._loaded_until = 0  # next timer queue offset to read
        self._last_persist_ms = 0
        self._last_snapshot_ms = 0
        self._snapshot_loaded_until = 0  # ``loaded_until`` of the wheel last saved
        self._in_flight: list[tuple[int, int]] = []  # popped from the wheel, being delivered
        # timer queue offset -> due ms: out of the wheel, their tombstones being written (a recall)
        self._recalling: dict[int, int] = {}
        # timer queue offset -> due ms: delivered here (or by this slave while acting), tombstones not read back yet
        self._delivered_untombstoned: dict[int, int] = {}
        self._retrying: dict[int, int] = {}  # timer queue offset -> due ms: failed deliveries, out of the wheel
        self._round = asyncio.Lock()
        self.write_backoff: WriteBackoff[int] = WriteBackoff(write_backoff_ms)
        self.pacer = PassPacer(_IDLE_WAIT_MS, _MAX_BLOCKED_WAIT_MS)
        self._metrics = BackgroundWriteMetrics(metrics if metrics is not None else MetricsRegistry(), "timer")
        # jitter 0: the wait is computed to the next due timer
        self._delivery = PeriodicTask(
            "broker-timer",
            self._round_of_delivery,
            self._next_wait_ms,
            clock=clock,
            metrics=metrics,
            immediately=True,
            jitter=0,
        )
        self.recall_handles = recall_handles
        self._write_path = write_path  # the broker's: its store, or the escape bridge of a slave acting as master
        self.delivered_total = 0
        self.scheduled_total = 0
        self.recalled_total = 0

    @property
    def writes(self) -> TimerWrites:
        """Where due messages go now (``broker.write_path``)."""
        return self._write_path.current.timer

    # -- the send path ------------------------------------------------------------------------------------------
    def divert(self, msg: MessageExt, topic: TopicConfig, now_ms: int | None = None) -> bool:
        """Turn ``msg`` (about to be stored in ``topic``) into a timer record when it asks for a delay.

        Returns True when diverted. Raises IllegalMessageError for a refused delivery time, or for a delay on
        a topic whose type is not DELAY or MIXED.
        """
        if not is_delayed(msg.properties):
            return False
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        deliver_ms = deliver_time_ms(msg.properties, now_ms, self.limits)
        if deliver_ms is None:
            return False
        if not topic.message_type.accepts(MessageType.DELAY):
            raise MessageTypeConflictError(
                f"topic {topic.name!r} accepts {topic.message_type.value} messages, not delayed ones"
            )
        if props.DELAY_TIME_LEVEL in msg.properties:
            for name in TIMER_PROPERTIES:  # a level wins, as RocketMQ strips the timer properties
                msg.properties.pop(name, None)
        msg.properties[props.REAL_TOPIC] = msg.topic
        msg.properties[props.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties[TIMER_OUT_MS] = str(deliver_ms)
        msg.topic = TIMER_TOPIC
        msg.queue_id = TIMER_QUEUE_ID
        self.scheduled_total += 1
        return True

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Rebuild the pending timers: from the last saved wheel when it still matches the store
        (``timer.snapshot``), else from the persisted progress offset; listen for new timer records."""
        progress = int(load_json(self._progress_path, {}).get("progressOffset", 0))
        self._loaded_until = max(progress, self._store.min_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID))
        restored = self._restore_snapshot(progress)
        loaded = self.load_new()
        self._store.add_arrival_listener(self._arrived)
        log.info(
            "event=timer_rebuilt from_offset=%d records_read=%d pending=%d from_snapshot=%d",
            progress,
            loaded,
            len(self._wheel),
            restored,
        )

    def _restore_snapshot(self, progress: int) -> int:
        """Load the saved wheel if it still describes this store: its anchor record in place (the store was not
        cut or recovered short since), the records of its pending timers still stored, and the progress saved
        since not past it; returns the timers loaded. Timers below a newer progress were done since the save."""
        saved = snapshot.read(self._snapshot_path)
        if saved is None:
            return 0
        anchor = self._record_crc(saved.loaded_until - 1)
        min_offset = self._store.min_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
        if anchor != saved.anchor_crc or saved.progress_offset < min_offset or self._loaded_until > saved.loaded_until:
            log.warning(
                "event=timer_snapshot_stale progress=%d saved_progress=%d saved_loaded_until=%d anchor_matches=%s",
                progress,
                saved.progress_offset,
                saved.loaded_until,
                anchor == saved.anchor_crc,
            )
            return 0
        for second, pairs in saved.buckets:
            self._wheel.add_bucket(second, pairs)
        if progress > saved.progress_offset:
            self._wheel.remove_below(progress)
        self._loaded_until = self._snapshot_loaded_until = saved.loaded_until
        return len(self._wheel)

    def _record_crc(self, queue_offset: int) -> int | None:
        """CRC32 of the stored timer record ``queue_offset``, None when it is not there."""
        if queue_offset < 0:
            return None
        got = self._store.get_messages(
            TIMER_TOPIC, TIMER_QUEUE_ID, queue_offset, 1, max_bytes=_READ_MAX_BYTES, tag_filter=None
        )
        if got.status is not GetStatus.FOUND or not got.records or record_queue_offset(got.records[0]) != queue_offset:
            return None
        return zlib.crc32(got.records[0])

    def _arrived(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        if topic == TIMER_TOPIC:
            self._delivery.wake()

    def start_delivery(self) -> None:
        """Deliver due timers (a periodic task) until ``stop_delivery()``."""
        self._delivery.start()

    async def stop_delivery(self) -> None:
        await self._delivery.stop()

    async def _round_of_delivery(self) -> None:
        self.load_new()
        try:
            await self.fire_due(self._clock.now_ms())  # a failed round is retried: its timers went back
        finally:
            self._maybe_persist()
        await self._maybe_save_snapshot()

    def _next_wait_ms(self) -> float:
        next_ms = self._wheel.next_due_ms()
        if next_ms is None or self.pacer.blocked:
            return self.pacer.wait_ms
        return min(_IDLE_WAIT_MS, next_ms - self._clock.now_ms())

    def stop(self) -> None:
        """Persist the progress and save the wheel (after ``stop_delivery()``); tombstones not read yet are read
        first, so the next start does not read them again."""
        self.load_new()
        self.persist_progress()
        state = self._snapshot_state()
        if state is None:
            self._snapshot_path.unlink(missing_ok=True)  # nothing pending: a start reads nothing
        else:
            snapshot.save(self._snapshot_path, *state)  # atomic: a full disk leaves the previous one

    def _snapshot_state(self) -> tuple[int, int, int, list[tuple[int, array]]] | None:
        """What ``snapshot.save`` writes: the timers pending as of ``loaded_until`` (a copy, to be written off
        the loop), or None when none is or no record anchors it.

        As of ``loaded_until`` means every tombstone read so far is applied and none after it: so a timer out of
        the wheel whose tombstone may be stored but is not read yet (being delivered, delivered, being recalled)
        is saved as pending, and a start from the snapshot reads that tombstone after it. A failed delivery
        waiting for its retry is pending too."""
        anchor = self._record_crc(self._loaded_until - 1)
        if anchor is None:
            return None
        out_of_wheel: dict[int, array] = {}
        for deliver_ms, key in itertools.chain(
            self._in_flight,
            ((ms, key) for key, ms in self._delivered_untombstoned.items()),
            ((ms, key) for key, ms in self._recalling.items()),
            ((ms, key) for key, ms in self._retrying.items()),
        ):
            out_of_wheel.setdefault(deliver_ms // 1000, array("q")).extend((deliver_ms, key))
        buckets = [(second, array("q", pairs)) for second, pairs in self._wheel.buckets()]
        buckets += out_of_wheel.items()
        if not any(pairs for _, pairs in buckets):
            return None
        return self.progress_offset(), self._loaded_until, anchor, buckets

    async def _maybe_save_snapshot(self) -> None:
        """Save the wheel now and then, so that a start after a crash reads only the timer records written
        since (at most once a minute, and only when enough new records came to make a start read many)."""
        now_ms = self._clock.now_ms()
        new_records = self._loaded_until - self._snapshot_loaded_until
        if now_ms - self._last_snapshot_ms < _SNAPSHOT_EVERY_MS or new_records < _SNAPSHOT_AFTER_RECORDS:
            return
        self._last_snapshot_ms = now_ms
        state = self._snapshot_state()
        if state is None:
            return
        try:
            await asyncio.to_thread(snapshot.save, self._snapshot_path, *state)  # megabytes and an fsync
        except OSError as exc:
            log.warning("event=timer_snapshot_save_failed error=%r", exc)  # the previous one stays valid
            return
        self._snapshot_loaded_until = state[1]

    # -- the work -----------------------------------------------------------------------------------------------
    def load_new(self) -> int:
        """Read the timer queue from ``loaded_until`` into the wheel; returns the records read."""
        read = 0
        while True:
            got = self._store.get_messages(
                TIMER_TOPIC, TIMER_QUEUE_ID, self._loaded_until, _READ_BATCH, max_bytes=_READ_MAX_BYTES, tag_filter=None
            )
            if got.status is GetStatus.OFFSET_TOO_SMALL:
                log.error("event=timer_records_removed from=%d to=%d", self._loaded_until, got.min_offset)
                self._loaded_until = got.min_offset
                continue
            if got.status is not GetStatus.FOUND or not got.records:
                return read
            for record in got.records:
                self._load_record(record_queue_offset(record), record_property_values(record, _LOADED_PROPERTIES))
            read += len(got.records)
            self._loaded_until = got.next_begin_offset

    def _load_record(self, queue_offset: int, p: dict[str, str]) -> None:
        try:
            deliver_ms = int(p[TIMER_OUT_MS])
            if TIMER_DONE in p:
                key = int(p[TIMER_DONE])
                # delivered here: popped from the wheel then; else delivered before the restart (rebuilding)
                if self._delivered_untombstoned.pop(key, None) is None:
                    self._wheel.remove(deliver_ms, key)
            else:
                self._wheel.add(deliver_ms, queue_offset)
        except (KeyError, ValueError):
            log.error("event=timer_record_unreadable queue_offset=%d", queue_offset)

    async def fire_due(self, now_ms: int) -> int:
        """Deliver every timer due at ``now_ms`` (in batches), and the failed ones whose backoff is over; returns
        how many were delivered (or dead-lettered). Stops at a batch whose deliveries all failed. One round at a
        time: a round yields between batches, and a second caller (a test, a benchmark) waits for it."""
        async with self._round:
            return await self._fire_due(now_ms)

    async def _fire_due(self, now_ms: int) -> int:
        delivered = failed = 0
        ready = [key for key in self._retrying if self.write_backoff.ready(key, now_ms)]
        while True:
            retries, ready = ready[: self._deliver_batch], ready[self._deliver_batch :]
            due = [(self._retrying.pop(key), key) for key in retries]
            due += self._wheel.pop_due(now_ms, self._deliver_batch - len(due))
            if not due:
                break
            batch_delivered, batch_failed = await self._deliver(due, now_ms)
            delivered += batch_delivered
            failed += batch_failed
            if batch_failed and not batch_delivered:
                break
            await asyncio.sleep(0)  # a long round lets the loop serve between batches
        self.pacer.after_pass(stored=delivered, failed=failed)
        self._metrics.passed(stored=delivered, failed=failed, wait_ms=self.pacer.wait_ms)
        self._metrics.backlog(self.write_backoff)
        return delivered

    async def _deliver(self, due: list[tuple[int, int]], now_ms: int) -> tuple[int, int]:
        """One batch: the real messages (a dead letter for one that can never be delivered, or whose deliveries
        kept failing), with their tombstones; returns (delivered, failed for a passing reason)."""
        # Not checked before writing (the delivered message is smaller than its stored timer record, so the
        # store's answer says what is wrong); only dead letters, which add properties, are.
        outgoing = [self._outgoing(pair) for pair in due]
        delivered = failed = 0
        while due:
            self._in_flight = due
            try:
                results = await self.writes.deliver(due, outgoing)
            finally:
                self._in_flight = []
            refused: list[tuple[tuple[int, int], MessageExt | None]] = []
            for pair, msg, result in zip(due, outgoing, results):
                if result.stored:
                    self._delivered(pair, msg)
                    delivered += 1
                    continue
                self._metrics.failed(result)
                if result.is_permanent and msg is not None:
                    self._log_refused(pair, msg, str(result))
                    refused.append((pair, self._writable(pair, dead_letter.dead_letter(msg, REASON_WRITE_REFUSED))))
                    continue
                failed += 1
                self._retrying[pair[1]] = pair[0]  # out of the wheel until its backoff is over
                step = self.write_backoff.failed(pair[1], now_ms, str(result))
                if step.parked:
                    self._metrics.ended(ENDING_PARKED)
                if step.ends_next or step.parked:
                    log.error(
                        "event=timer_delivery_failing queue_offset=%d failures=%d wait_ms=%d next=dead_letter "
                        "reason=%s",
                        pair[1],
                        step.failures,
                        step.wait_ms,
                        result,
                    )
            due = [pair for pair, _ in refused]
            outgoing = [msg for _, msg in refused]
        return delivered, failed

    def _outgoing(self, pair: tuple[int, int]) -> MessageExt | None:
        """What delivering ``pair`` writes: its real message, or its dead letter once its deliveries kept failing
        past the backoff table (None: the record is gone, only the tombstone is written)."""
        real = self._real_message(pair[1])
        if real is not None and self.write_backoff.ends(pair[1]):
            return self._writable(pair, dead_letter.dead_letter(real, REASON_WRITE_FAILED) or real)
        return real

    def _writable(self, pair: tuple[int, int], msg: MessageExt | None) -> MessageExt | None:
        """``msg`` (a dead letter) if it can be written as far as can be told without writing, else None (only
        the tombstone is written)."""
        while msg is not None:
            problem = write_problem(msg)
            if problem is None:
                return msg
            self._metrics.failed(WriteResult.permanent(INVALID, problem))
            self._log_refused(pair, msg, problem)
            msg = dead_letter.dead_letter(msg, REASON_WRITE_REFUSED)
        return None

    def _log_refused(self, pair: tuple[int, int], msg: MessageExt, why: str) -> None:
        final = msg.topic.startswith(DLQ_GROUP_TOPIC_PREFIX)
        if final:
            self._metrics.ended(ENDING_UNWRITABLE)
        log.error(
            "event=timer_delivery_refused queue_offset=%d msg_id=%s topic=%s next=%s reason=%s",
            pair[1],
            msg.uniq_key or "",
            msg.topic,
            "tombstone_only" if final else "dead_letter",
            why,
        )

    def _delivered(self, pair: tuple[int, int], msg: MessageExt | None) -> None:
        self.write_backoff.succeeded(pair[1])
        self._delivered_untombstoned[pair[1]] = pair[0]
        self.delivered_total += 1
        if msg is not None and msg.topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            self._metrics.ended(ENDING_DLQ)
            log.error(
                "event=timer_dead_lettered queue_offset=%d msg_id=%s topic=%s reason=%s",
                pair[1],
                msg.uniq_key or "",
                msg.topic,
                msg.properties.get(DLQ_REASON),
            )

    def _real_message(self, queue_offset: int) -> MessageExt | None:
        got = self._store.get_messages(
            TIMER_TOPIC, TIMER_QUEUE_ID, queue_offset, 1, max_bytes=_READ_MAX_BYTES, tag_filter=None
        )
        record = decode_record(got.records[0])[0] if got.status is GetStatus.FOUND and got.records else None
        if record is None or record.queue_offset != queue_offset:
            log.error("event=timer_record_lost queue_offset=%d status=%s", queue_offset, got.status.value)
            return None  # retention removed it: nothing to deliver, the tombstone closes it
        p = record.properties
        real_topic = p.get(props.REAL_TOPIC, "")
        queue_id = int(p.get(props.REAL_QUEUE_ID, "0") or 0)
        config = self._topics.get(real_topic)
        if config is not None and queue_id >= config.write_queue_nums:
            queue_id %= config.write_queue_nums  # the topic shrank while the message waited
        for name in _STRIPPED_AT_DELIVERY:
            p.pop(name, None)
        record.topic = real_topic
        record.queue_id = queue_id
        return record

    def recall_handle(self, topic: str, message_id: str, deliver_ms: int, queue_offset: int) -> str:
        """The recall handle of the delayed message of ``topic`` stored as timer record ``queue_offset``."""
        return self.recall_handles.issue(topic, deliver_ms, message_id, queue_offset)

    async def recall_by_handle(self, handle: str, topic: str | None = None) -> tuple[str, bool]:
        """Recall the message ``handle`` names (of ``topic``, when given): (its message id, whether this call
        recalled it; False: recalled before). InvalidRecallHandleError for a handle this broker did not issue."""
        target = self.recall_handles.open(handle, topic)
        return target.message_id, await self.recall(target.deliver_ms, target.timer_queue_offset)

    async def recall(self, deliver_ms: int, queue_offset: int) -> bool:
        """Cancel the timer ``queue_offset`` due at ``deliver_ms``: it leaves the wheel and its tombstone (marked
        recalled) is written, so neither this run nor a restart delivers it. Returns False when it was recalled
        already. RecallTooLateError once it is due (delivered, being delivered, or about to be).

        Taking it out of the wheel and the due check happen in one step of the event loop, so a delivery round
        either popped it before (too late) or never will; a failed tombstone write puts it back.
        """
        if deliver_ms <= self._clock.now_ms():
            raise RecallTooLateError(f"the message was due at {deliver_ms} ms: too late to recall it")
        self.load_new()  # a recall right after its send: the record may not be in the wheel yet
        if not self._wheel.remove(deliver_ms, queue_offset):
            return False
        self._recalling[queue_offset] = deliver_ms  # holds the progress offset below it until the tombstone is stored
        try:
            results = await self.writes.deliver([(deliver_ms, queue_offset)], [None])
        except BaseException:
            self._wheel.add(deliver_ms, queue_offset)
            raise
        finally:
            self._recalling.pop(queue_offset, None)
        if not results[0].stored:
            self._wheel.add(deliver_ms, queue_offset)
            raise ServiceNotAvailableError(f"the recall could not be stored: {results[0]}")
        self.recalled_total += 1
        return True

    def forget_delivered(self, deliver_ms: int, queue_offset: int) -> None:
        """A timer delivered elsewhere (by this slave while acting, see broker.acting_progress): not pending,
        and its tombstone, when the master writes it, is not news."""
        self._wheel.remove(deliver_ms, queue_offset)
        self._forget_retry(queue_offset)
        self._delivered_untombstoned[queue_offset] = deliver_ms

    def _forget_retry(self, queue_offset: int) -> None:
        self._retrying.pop(queue_offset, None)
        self.write_backoff.succeeded(queue_offset)

    def advance_to(self, progress_offset: int) -> bool:
        """A slave that does not act takes its master's progress (broker.ha_services): every timer below
        ``progress_offset`` was delivered there, and this replica holds those deliveries and their tombstones.
        Forgets those timers, skips reading below it, and saves the progress; returns whether it moved."""
        if progress_offset <= self.progress_offset():
            return False
        self._wheel.remove_below(progress_offset)
        for queue_offset in [k for k in self._retrying if k < progress_offset]:
            self._forget_retry(queue_offset)
        self._loaded_until = max(self._loaded_until, progress_offset)
        self.persist_progress()
        return True

    def after_cut(self) -> None:
        """The store's tail was cut (a slave dropped records its new master never had: cluster.ha_epochs): the
        wheel may hold timers of records that are gone and would skip the master's records written at those
        offsets, so rebuild it from what is left, as a restart would."""
        queue_offset = self._store.max_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
        start = min(self.progress_offset(), queue_offset)
        self._wheel = TimerWheel()
        self._delivered_untombstoned.clear()
        self._snapshot_path.unlink(missing_ok=True)  # of records that may be gone: the next save is of what is left
        self._loaded_until = max(start, self._store.min_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID))
        loaded = self.load_new()
        self.persist_progress()
        log.warning(
            "event=timer_rebuilt_after_cut cut_at=%d from_offset=%d records_read=%d pending=%d",
            queue_offset,
            start,
            loaded,
            len(self._wheel),
        )

    # -- progress -----------------------------------------------------------------------------------------------
    def _maybe_persist(self) -> None:
        now_ms = self._clock.now_ms()
        if now_ms - self._last_persist_ms >= _PERSIST_EVERY_MS:
            self._last_persist_ms = now_ms
            try:
                self.persist_progress()
            except OSError as exc:
                # The saved offset only shortens the re-read at a restart (done records make re-reading safe), so
                # a failed save (disk full) must never stop delivery: the next period tries again.
                log.warning("event=timer_progress_save_failed error=%r", exc)

    def progress_offset(self) -> int:
        """The smallest timer queue offset that may still be pending (where a restart starts reading)."""
        smallest = self._wheel.min_key()
        for low in (
            min((key for _, key in self._in_flight), default=None),
            min(self._retrying, default=None),
            min(self._recalling, default=None),
        ):
            if low is not None:
                smallest = low if smallest is None else min(smallest, low)
        return self._loaded_until if smallest is None else min(smallest, self._loaded_until)

    def persist_progress(self) -> None:
        atomic_write_json(self._progress_path, {"progressOffset": self.progress_offset(), "pending": len(self._wheel)})

    @property
    def pending(self) -> int:
        """Timers not delivered yet: in the wheel, or waiting after a failed delivery."""
        return len(self._wheel) + len(self._retrying)

    @property
    def outstanding(self) -> int:
        """Timers that may still fire: in the wheel, being delivered, or timer records not read yet (new timers
        or done records). 0 means no delivery happens until a new delayed message arrives."""
        max_offset = self._store.max_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
        return self.pending + len(self._in_flight) + max(max_offset - self._loaded_until, 0)

    def next_due_ms(self) -> int | None:
        return self._wheel.next_due_ms()

    def wheel_memory_bytes(self) -> int:
        return self._wheel.memory_bytes()

    def __repr__(self) -> str:
        return (
            f"<TimerService pending={len(self._wheel)} loaded_until={self._loaded_until} "
            f"delivered={self.delivered_total}>"
        )


class LocalTimerWrites:
    """A master's delivery: every real message and its tombstone in one store batch, all or nothing."""

    def __init__(self, store, topics):
        self._store = store
        self._topics = topics

    async def deliver(self, due: list[tuple[int, int]], reals: list[MessageExt | None]) -> list[WriteResult]:
        """Deliver ``reals`` (None: the record is lost, only its tombstone is written) of the (due ms, timer
        queue offset) pairs ``due``; one result per pair. A batch is all or nothing, so when one message refuses
        it for good, each is delivered alone to tell which."""
        result = await self._put(due, reals)
        if result.is_permanent and len(due) > 1:
            return [await self._put([pair], [real]) for pair, real in zip(due, reals)]
        if not result.stored:
            log.warning("event=timer_delivery_failed count=%d reason=%s", len(due), result)
        return [result] * len(due)

    async def _put(self, due: list[tuple[int, int]], reals: list[MessageExt | None]) -> WriteResult:
        batch: list[MessageExt] = []
        for (deliver_ms, queue_offset), real in zip(due, reals):
            if real is not None:
                batch.append(real)
            batch.append(tombstone(queue_offset, deliver_ms))
        try:
            for real in reals:
                if real is not None and real.topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                    self._topics.get_or_create(real.topic)  # dead letters' topics are created on demand
        except PocketMQError as exc:
            return WriteResult.transient(type(exc).__name__, str(exc))
        return of_puts(await self._store.put_messages(batch))


def tombstone(queue_offset: int, deliver_ms: int) -> MessageExt:
    return MessageExt(
        topic=TIMER_TOPIC,
        queue_id=TIMER_QUEUE_ID,
        body=b"done",
        properties={TIMER_DONE: str(queue_offset), TIMER_OUT_MS: str(deliver_ms)},
    )
