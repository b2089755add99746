"""The timer service: delayed messages wait in the timer topic and are delivered to their real topic when due.

On disk (all in the ordinary commit log, queue 0 of ``rmq_sys_wheel_timer``):

- a **timer record** is the delayed message itself, its topic and queue replaced by the timer topic's, with
  ``REAL_TOPIC``, ``REAL_QID`` and ``TIMER_OUT_MS`` (the delivery time, epoch ms) in its properties;
- a **tombstone** (property ``PMQ_TIMER_DONE`` = the timer record's queue offset, plus its ``TIMER_OUT_MS``)
  says that record was delivered. Delivery appends the real message and its tombstone in one store batch;
- ``<data_dir>/config/timer_progress.json`` holds the smallest timer queue offset still pending, written
  atomically now and then. It only bounds the work of a restart; correctness rests on the tombstones.

In memory: a ``TimerWheel`` of (deliver_ms, queue offset) pairs, 16 bytes per pending timer. The service
tails the timer queue from ``loaded_until``: a timer record adds a pair, a tombstone removes one. A restart
tails from the persisted progress offset, so every record that was never tombstoned is pending again and
nothing tombstoned is delivered twice. (A crash that tears the one batch between the real message and its
tombstone redelivers that message: at least once, never lost.)

Delivered messages lose ``DELAY`` and the timer properties, so nothing delays them again (#2724), and keep
everything else: body, flag, sys_flag, born time and host, reconsume times, the user's properties.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from pocketmq.broker.timer.delay import TIMER_PROPERTIES, TimerLimits, deliver_time_ms, is_delayed
from pocketmq.broker.timer.wheel import TimerWheel
from pocketmq.common import properties as props
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import TIMER_TOPIC, MessageType, TopicConfig
from pocketmq.errors import IllegalMessageError
from pocketmq.protocol.message_codec import decode_record
from pocketmq.runtime.clock import Clock
from pocketmq.store.api import GetStatus
from pocketmq.store.metadata import atomic_write_json, load_json

log = logging.getLogger(__name__)

TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_DONE = "PMQ_TIMER_DONE"
TIMER_QUEUE_ID = 0
_READ_BATCH = 256
_READ_MAX_BYTES = 16 * 1024 * 1024
_IDLE_WAIT_MS = 500  # longest sleep of the loop with nothing due (a new timer wakes it earlier)
_PERSIST_EVERY_MS = 1000
_V2_PROPERTY_CONFLICT_WITH_TYPE = 40014
_STRIPPED_AT_DELIVERY = (props.DELAY_TIME_LEVEL, props.REAL_TOPIC, props.REAL_QUEUE_ID, TIMER_OUT_MS,
                         *TIMER_PROPERTIES)


class TimerService:
    """Owns the timer topic of one broker's store. ``start()`` rebuilds, ``run()`` is the delivery loop."""

    def __init__(self, store, topics, limits: TimerLimits, progress_path: Path, clock: Clock, *,
                 deliver_batch: int = 512):
        self._store = store
        self._topics = topics
        self.limits = limits
        self._progress_path = Path(progress_path)
        self._clock = clock
        self._deliver_batch = deliver_batch
        self._wheel = TimerWheel()
        self._loaded_until = 0  # next timer queue offset to read
        self._wake = asyncio.Event()
        self._last_persist_ms = 0
        self._in_flight: list[tuple[int, int]] = []  # popped from the wheel, being delivered
        self._delivered_untombstoned: set[int] = set()  # delivered here; their tombstones not read back yet
        self._blocked = False  # the last round could not deliver: wait before trying again
        # Where due messages go: the local store (a master), or the escape bridge (a slave acting as master).
        self.writes = LocalTimerWrites(store)
        self.delivered_total = 0
        self.scheduled_total = 0

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
            raise IllegalMessageError(f"topic {topic.name!r} accepts {topic.message_type.value} messages, not "
                                      "delayed ones", v2_code=_V2_PROPERTY_CONFLICT_WITH_TYPE)
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
        """Rebuild the pending timers from the persisted progress offset; listen for new timer records."""
        progress = int(load_json(self._progress_path, {}).get("progressOffset", 0))
        self._loaded_until = max(progress, self._store.min_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID))
        loaded = self.load_new()
        self._store.add_arrival_listener(self._arrived)
        log.info("event=timer_rebuilt from_offset=%d records_read=%d pending=%d", progress, loaded, len(self._wheel))

    def _arrived(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        if topic == TIMER_TOPIC:
            self._wake.set()

    async def run(self) -> None:
        """Deliver due timers until cancelled."""
        while True:
            self._wake.clear()
            self.load_new()
            now_ms = self._clock.now_ms()
            try:
                await self.fire_due(now_ms)
            except Exception:  # a failed round is retried: the timers went back into the wheel
                log.exception("event=timer_round_failed")
            self._maybe_persist()
            next_ms = self._wheel.next_due_ms()
            wait_ms = _IDLE_WAIT_MS if next_ms is None or self._blocked \
                else min(_IDLE_WAIT_MS, next_ms - self._clock.now_ms())
            if wait_ms > 0 and not self._wake.is_set():
                try:
                    async with asyncio.timeout(wait_ms / 1000):
                        await self._wake.wait()
                except TimeoutError:
                    pass

    def stop(self) -> None:
        """Persist the progress (the loop task is cancelled by the owner); tombstones not read yet are read
        first, so the next start does not read them again."""
        self.load_new()
        self.persist_progress()

    # -- the work -----------------------------------------------------------------------------------------------
    def load_new(self) -> int:
        """Read the timer queue from ``loaded_until`` into the wheel; returns the records read."""
        read = 0
        while True:
            got = self._store.get_messages(TIMER_TOPIC, TIMER_QUEUE_ID, self._loaded_until, _READ_BATCH,
                                           max_bytes=_READ_MAX_BYTES, tag_filter=None)
            if got.status is GetStatus.OFFSET_TOO_SMALL:
                log.error("event=timer_records_removed from=%d to=%d", self._loaded_until, got.min_offset)
                self._loaded_until = got.min_offset
                continue
            if got.status is not GetStatus.FOUND or not got.records:
                return read
            for record in got.records:
                self._load_record(decode_record(record)[0])
            read += len(got.records)
            self._loaded_until = got.next_begin_offset

    def _load_record(self, record: MessageExt) -> None:
        p = record.properties
        try:
            deliver_ms = int(p[TIMER_OUT_MS])
            if TIMER_DONE in p:
                key = int(p[TIMER_DONE])
                if key in self._delivered_untombstoned:
                    self._delivered_untombstoned.discard(key)  # popped from the wheel when delivered
                else:
                    self._wheel.remove(deliver_ms, key)  # rebuilding: delivered before the restart
            else:
                self._wheel.add(deliver_ms, record.queue_offset)
        except (KeyError, ValueError):
            log.error("event=timer_record_unreadable queue_offset=%d", record.queue_offset)

    async def fire_due(self, now_ms: int) -> int:
        """Deliver every timer due at ``now_ms`` (in batches); returns how many were delivered."""
        delivered = 0
        self._blocked = False
        while True:
            due = self._wheel.pop_due(now_ms, self._deliver_batch)
            if not due:
                return delivered
            reals = [self._real_message(queue_offset) for _, queue_offset in due]
            self._in_flight = due
            try:
                undelivered = await self.writes.deliver(due, reals)
            finally:
                self._in_flight = []
            for deliver_ms, queue_offset in undelivered:  # they wait again (the next round retries them)
                self._wheel.add(deliver_ms, queue_offset)
            left = set(undelivered)
            done = [pair for pair in due if pair not in left]
            self._delivered_untombstoned.update(key for _, key in done)
            delivered += len(done)
            self.delivered_total += len(done)
            self._blocked = bool(undelivered)
            if undelivered:
                return delivered

    def _real_message(self, queue_offset: int) -> MessageExt | None:
        got = self._store.get_messages(TIMER_TOPIC, TIMER_QUEUE_ID, queue_offset, 1, max_bytes=_READ_MAX_BYTES,
                                       tag_filter=None)
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

    def forget_delivered(self, deliver_ms: int, queue_offset: int) -> None:
        """A timer delivered elsewhere (by this slave while acting, see broker.acting_progress): not pending,
        and its tombstone, when the master writes it, is not news."""
        self._wheel.remove(deliver_ms, queue_offset)
        self._delivered_untombstoned.add(queue_offset)

    def advance_to(self, progress_offset: int) -> bool:
        """A slave that does not act takes its master's progress (cluster.ha_services): every timer below
        ``progress_offset`` was delivered there, and this replica holds those deliveries and their tombstones.
        Forgets those timers, skips reading below it, and saves the progress; returns whether it moved."""
        if progress_offset <= self.progress_offset():
            return False
        self._wheel.remove_below(progress_offset)
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
        self._loaded_until = max(start, self._store.min_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID))
        loaded = self.load_new()
        self.persist_progress()
        log.warning("event=timer_rebuilt_after_cut cut_at=%d from_offset=%d records_read=%d pending=%d",
                    queue_offset, start, loaded, len(self._wheel))

    # -- progress -----------------------------------------------------------------------------------------------
    def _maybe_persist(self) -> None:
        now_ms = self._clock.now_ms()
        if now_ms - self._last_persist_ms >= _PERSIST_EVERY_MS:
            self._last_persist_ms = now_ms
            self.persist_progress()

    def progress_offset(self) -> int:
        """The smallest timer queue offset that may still be pending (where a restart starts reading)."""
        smallest = self._wheel.min_key()
        if self._in_flight:
            low = min(key for _, key in self._in_flight)
            smallest = low if smallest is None else min(smallest, low)
        return self._loaded_until if smallest is None else min(smallest, self._loaded_until)

    def persist_progress(self) -> None:
        atomic_write_json(self._progress_path, {"progressOffset": self.progress_offset(),
                                                "pending": len(self._wheel)})

    @property
    def pending(self) -> int:
        return len(self._wheel)

    @property
    def outstanding(self) -> int:
        """Timers that may still fire: in the wheel, being delivered, or timer records not read yet (new timers
        or done records). 0 means no delivery happens until a new delayed message arrives."""
        max_offset = self._store.max_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
        return len(self._wheel) + len(self._in_flight) + max(max_offset - self._loaded_until, 0)

    def next_due_ms(self) -> int | None:
        return self._wheel.next_due_ms()

    def wheel_memory_bytes(self) -> int:
        return self._wheel.memory_bytes()

    def __repr__(self) -> str:
        return (f"<TimerService pending={len(self._wheel)} loaded_until={self._loaded_until} "
                f"delivered={self.delivered_total}>")


class LocalTimerWrites:
    """A master's delivery: every real message and its tombstone in one store batch, all or nothing."""

    def __init__(self, store):
        self._store = store

    async def deliver(self, due: list[tuple[int, int]], reals: list[MessageExt | None]) -> list[tuple[int, int]]:
        """Deliver ``reals`` (None: the record is lost, only its tombstone is written) of the (due ms, timer
        queue offset) pairs ``due``; returns the pairs not delivered."""
        batch: list[MessageExt] = []
        for (deliver_ms, queue_offset), real in zip(due, reals):
            if real is not None:
                batch.append(real)
            batch.append(tombstone(queue_offset, deliver_ms))
        results = await self._store.put_messages(batch)
        if all(r.status.stored for r in results):
            return []
        log.warning("event=timer_delivery_failed count=%d status=%s", len(due), results[0].status.value)
        return due


def tombstone(queue_offset: int, deliver_ms: int) -> MessageExt:
    return MessageExt(topic=TIMER_TOPIC, queue_id=TIMER_QUEUE_ID, body=b"done",
                      properties={TIMER_DONE: str(queue_offset), TIMER_OUT_MS: str(deliver_ms)})
