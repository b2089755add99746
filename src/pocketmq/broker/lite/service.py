"""The lite topic service (``broker.lite``): the index over LITE parent topics, the subscriptions, ordered
delivery with receipts, expiry of idle lite topics, and the groups' saved progress.

- Send (``admit``): a message to a LITE parent names a legal lite topic (ILLEGAL_LITE_TOPIC), and a new lite
  topic is refused beyond ``lite_topic_max_per_parent`` (LITE_TOPIC_QUOTA_EXCEEDED). The message is stored as a
  record of the parent, in the queue its lite topic hashes to; the store's arrival notice indexes it.
- Receive: a consumer gets messages of the lite topics it subscribed, in order per lite topic
  (``delivery.py``), long-polling until one arrives, an invisible time ends or its poll time is over.
- Expiry (every ``client_scan_interval_ms``): a lite topic without a message for ``lite_topic_expire_ms``, or
  whose parent was deleted or is no longer LITE, is dropped with its subscriptions and progress (its records stay in the parent until retention removes them);
  clients that stopped syncing lose their subscriptions after ``client_channel_expire_ms``; the groups'
  progress is saved to ``config/lite_offsets.json``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pocketmq.broker.lite.delivery import LiteDeliveries, LiteReceipt
from pocketmq.broker.lite.index import LiteIndex, lite_queue_id
from pocketmq.broker.lite.subscriptions import LiteSubscriptions, SyncAction
from pocketmq.common import properties as props
from pocketmq.common.errors import IllegalLiteTopicError, LiteTopicQuotaExceededError
from pocketmq.common.message import Message, MessageExt
from pocketmq.common.record import decode_record, decode_record_columns
from pocketmq.common.topic import MessageType, TopicConfig, lite_topic_name_problem
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.files import atomic_write_json, load_json

log = logging.getLogger(__name__)
_CATCH_UP_BATCH = 256
_LITE_PROPERTY = f"{props.LITE_TOPIC}{props.NAME_VALUE_SEPARATOR}".encode()
_PROPERTY_END = props.PROPERTY_SEPARATOR.encode()


@dataclass(frozen=True, slots=True)
class LiteSettings:
    subscription_quota: int  # distinct lite topics one consumer group may subscribe
    max_name_length: int  # the Settings' max_lite_topic_size
    expire_ms: int  # a lite topic without a message this long is dropped
    max_per_parent: int  # lite topics one parent may hold
    client_expire_ms: int  # a client that stopped syncing loses its subscriptions


@dataclass(frozen=True, slots=True)
class LiteMessage:
    message: MessageExt
    handle: str
    attempt: int


class LiteService:
    def __init__(self, store, topics, clock: Clock, settings: LiteSettings, offsets_path: Path):
        self._store = store
        self._topics = topics
        self._clock = clock
        self.settings = settings
        self._offsets_path = offsets_path
        self.index = LiteIndex()
        self.subscriptions = LiteSubscriptions(settings.subscription_quota)
        self.deliveries = LiteDeliveries()
        self._waiters: dict[str, list[asyncio.Future]] = {}  # parent -> receives waiting for a message
        self._turn = 0  # rotates the lite topic a receive starts with, so no subscription starves the others
        self._saved_offsets: list[dict] | None = None  # what persist() wrote last
        self._dirty: set[tuple[str, int]] = set()  # (parent, queue id) with records the index may not have

    # -- lifecycle --------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Index every LITE parent's retained records and load the groups' progress."""
        for config in self._topics.all():
            if config.message_type is MessageType.LITE:
                for queue_id in range(config.write_queue_nums):
                    self._catch_up(config.name, queue_id)
        saved = load_json(self._offsets_path, {"offsets": []})
        self.deliveries.restore(
            {(e["group"], e["topic"], e["liteTopic"]): int(e["offset"]) for e in saved.get("offsets", [])}
        )
        log.info("event=lite_index_built lite_topics=%d", self.index.count())

    def persist(self) -> None:
        offsets = [
            {"group": group, "topic": parent, "liteTopic": lite, "offset": offset}
            for (group, parent, lite), offset in sorted(self.deliveries.committed().items())
        ]
        if offsets != self._saved_offsets:
            atomic_write_json(self._offsets_path, {"offsets": offsets})
            self._saved_offsets = offsets

    # -- keeping the index current --------------------------------------------------------------------------------
    def appended(self, msgs: list[MessageExt]) -> None:
        """Index messages the send path just stored (from their own properties: no record is read back)."""
        config = self._topics.get(msgs[0].topic) if msgs else None
        if config is None or config.message_type is not MessageType.LITE:
            return
        index = self.index
        for msg in msgs:
            if index.indexed_to(msg.topic, msg.queue_id) == msg.queue_offset:
                index.add(msg.topic, msg.queue_id, msg.queue_offset, msg.lite_topic, msg.store_timestamp_ms)
            # else: records before it are not indexed yet; the catch-up of its queue reads them all

    def on_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        """The store's arrival notice: records the send path does not index (replication, a restart's replay)
        are read back later, when the index is next used; receives waiting under the parent wake."""
        config = self._topics.get(topic)
        if config is None or config.message_type is not MessageType.LITE:
            return
        self._dirty.add((topic, queue_id))
        for waiter in self._waiters.pop(topic, ()):
            _release(waiter)

    def _catch_up_dirty(self, parent: str | None = None) -> None:
        for key in [k for k in self._dirty if parent is None or k[0] == parent]:
            self._dirty.discard(key)
            self._catch_up(*key)

    def _catch_up(self, parent: str, queue_id: int) -> None:
        """Index the records of a parent queue the index has not seen, reading them back from the store."""
        store, index = self._store, self.index
        index.skip_to(parent, queue_id, store.min_queue_offset(parent, queue_id))
        end = store.max_queue_offset(parent, queue_id)
        while (offset := index.indexed_to(parent, queue_id)) < end:
            got = store.get_messages(parent, queue_id, offset, _CATCH_UP_BATCH)
            if not got.records:  # a hole (a record removed or unreadable): pass over what the store passed
                index.skip_to(parent, queue_id, max(got.next_begin_offset, offset + 1))
                continue
            columns = decode_record_columns(b"".join(got.records))  # no message objects: a restart reads them all
            for queue_offset, store_ms, properties in zip(
                columns.queue_offsets, columns.store_timestamps_ms, columns.properties
            ):
                index.add(parent, queue_id, queue_offset, _lite_topic_of(properties), store_ms)

    # -- send ---------------------------------------------------------------------------------------------------------
    def queue_of(self, config: TopicConfig, msg: Message) -> int:
        return lite_queue_id(msg.properties.get(props.LITE_TOPIC, ""), config.write_queue_nums)

    def admit(self, config: TopicConfig, messages: Sequence[Message]) -> None:
        """Check the lite topics of messages to the LITE parent ``config``."""
        self._catch_up_dirty(config.name)
        new: set[str] = set()
        for msg in messages:
            lite = msg.properties.get(props.LITE_TOPIC, "")
            problem = lite_topic_name_problem(lite, self.settings.max_name_length)
            if problem:
                raise IllegalLiteTopicError(f"{problem} (a message to LITE topic {config.name!r} needs one)")
            if self.index.get(config.name, lite) is None:
                new.add(lite)
        if new and self.index.count(config.name) + len(new) > self.settings.max_per_parent:
            raise LiteTopicQuotaExceededError(
                f"topic {config.name!r} holds {self.index.count(config.name)} lite topics, "
                f"its limit is {self.settings.max_per_parent}"
            )

    # -- subscriptions --------------------------------------------------------------------------------------------------
    def sync(self, group: str, parent: str, client_id: str, action: SyncAction, lite_topics: set[str]) -> None:
        for lite in lite_topics:
            problem = lite_topic_name_problem(lite, self.settings.max_name_length)
            if problem:
                raise IllegalLiteTopicError(problem)
        self.subscriptions.sync(group, parent, client_id, action, lite_topics, self._clock.now_ms())

    # -- receive, ack -------------------------------------------------------------------------------------------------
    async def receive(
        self, group: str, parent: str, client_id: str, max_count: int, invisible_ms: int, poll_ms: int
    ) -> list[LiteMessage]:
        """Up to ``max_count`` messages of the lite topics ``client_id`` subscribed, waiting up to ``poll_ms``."""
        clock = self._clock
        poll_end_ms = clock.now_ms() + poll_ms
        while True:
            now_ms = clock.now_ms()
            self.subscriptions.touch(group, parent, client_id, now_ms)
            self._catch_up_dirty(parent)
            lites = sorted(self.subscriptions.of(group, parent, client_id))
            out = self._take(group, parent, lites, max_count, now_ms, invisible_ms)
            if out or now_ms >= poll_end_ms:
                return out
            wait_ms = poll_end_ms - now_ms
            next_deadline = self.deliveries.next_deadline_ms(group, parent, lites)
            if next_deadline is not None:
                wait_ms = min(wait_ms, max(next_deadline - now_ms, 1))
            await self._wait_arrival(parent, wait_ms)

    def _take(
        self, group: str, parent: str, lites: list[str], max_count: int, now_ms: int, invisible_ms: int
    ) -> list[LiteMessage]:
        out: list[LiteMessage] = []
        if not lites:
            return out
        self._turn += 1
        start = self._turn % len(lites)
        for lite in lites[start:] + lites[:start]:
            queue = self.index.get(parent, lite)
            if queue is None:
                continue
            room = max_count - len(out)
            cursor = self.deliveries.cursor(group, parent, lite, 0)
            deliveries = self.deliveries.take(parent, lite, cursor, queue, room, now_ms, invisible_ms)
            for delivery in deliveries:
                msg = self._read(parent, queue.queue_id, delivery.receipt.queue_offset)
                if msg is None:  # retention removed it: nothing to deliver, the group is past it
                    self.deliveries.ack(group, delivery.receipt)
                    continue
                out.append(LiteMessage(msg, delivery.receipt.encode(), delivery.attempt))
            if len(out) >= max_count:
                break
        return out

    def _read(self, parent: str, queue_id: int, queue_offset: int) -> MessageExt | None:
        got = self._store.get_messages(parent, queue_id, queue_offset, 1)
        if not got.records:
            return None
        msg, _ = decode_record(got.records[0])
        return msg if msg.queue_offset == queue_offset else None

    async def _wait_arrival(self, parent: str, wait_ms: int) -> None:
        """Until a message arrives under ``parent`` or ``wait_ms`` passed (on the service's clock)."""
        waiter = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(parent, [])
        waiters.append(waiter)
        timer = self._clock.call_later_ms(wait_ms, lambda: _release(waiter))
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in waiters:
                waiters.remove(waiter)

    def ack(self, group: str, handle: str) -> None:
        self.deliveries.ack(group, LiteReceipt.decode(handle))

    def change_invisible(self, group: str, handle: str, invisible_ms: int) -> str:
        receipt = self.deliveries.change_invisible(
            group, LiteReceipt.decode(handle), self._clock.now_ms(), invisible_ms
        )
        return receipt.encode()

    def delivered_message(self, group: str, handle: str) -> tuple[MessageExt, int] | None:
        """The message an in-flight handle names and its attempt (None when it is gone)."""
        receipt = LiteReceipt.decode(handle)
        attempt = self.deliveries.attempt_of(group, receipt)
        queue = self.index.get(receipt.parent, receipt.lite_topic)
        msg = self._read(receipt.parent, queue.queue_id, receipt.queue_offset) if queue is not None else None
        return (msg, attempt) if msg is not None else None

    # -- expiry ---------------------------------------------------------------------------------------------------------
    def expire(self) -> int:
        """One expiry round (see the module doc); how many lite topics were dropped."""
        now_ms = self._clock.now_ms()
        self._catch_up_dirty()
        self.subscriptions.expire(now_ms, self.settings.client_expire_ms)
        expired = self.index.expired(now_ms, self.settings.expire_ms)
        for parent in self.index.parents():  # a parent deleted or no longer LITE: all its lite topics go
            config = self._topics.get(parent)
            if config is None or config.message_type is not MessageType.LITE:
                expired.extend((parent, lite) for lite in self.index.lites(parent))
        for parent, lite in expired:
            self.index.remove(parent, lite)
            self.subscriptions.forget_lite(parent, lite)
            self.deliveries.forget_lite(parent, lite)
        for config in self._topics.all():
            if config.message_type is MessageType.LITE:
                self._trim(config.name)
        if expired:
            log.info("event=lite_topics_expired count=%d", len(expired))
        return len(expired)

    def _trim(self, parent: str) -> None:
        mins: dict[int, int] = {}
        for lite in self.index.lites(parent).values():
            low = mins.get(lite.queue_id)
            if low is None:
                low = mins[lite.queue_id] = self._store.min_queue_offset(parent, lite.queue_id)
            lite.trim_below(low)


def _release(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _lite_topic_of(properties: bytes) -> str | None:
    """The ``__LITE_TOPIC`` of encoded properties (``name\x01value\x02`` ...), found without parsing them all."""
    start = properties.find(_LITE_PROPERTY)
    while start > 0 and properties[start - 1 : start] != _PROPERTY_END:  # inside another property's value
        start = properties.find(_LITE_PROPERTY, start + 1)
    if start < 0:
        return None
    value_start = start + len(_LITE_PROPERTY)
    end = properties.find(_PROPERTY_END, value_start)
    return properties[value_start : end if end >= 0 else len(properties)].decode()
