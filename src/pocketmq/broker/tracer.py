"""The broker's message trace: each step of a sampled message's life as a ``PmqStep`` record (docs/trace.md).

The services call one method per event (``sent``, ``popped``, ``acked``, ``invisible_changed``, ``revived``,
``forwarded_to_dlq``, ``sent_back``); each makes records and hands them to the ``TraceWriter`` queue without
waiting, so no request waits on tracing. A message is sampled by a hash of its message id, so every broker
and every step agree on it without talking (``trace_sample_ratio``). Acks, changes of invisible time and CK
rewrites name a queue position, not a message: the tracer remembers the message id at each position it saw
popped (a bounded table, oldest forgotten first), and steps at positions it does not know are not traced.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pocketmq.broker.pop.copies import DLQ_REASON, REASON_CLIENT_FORWARD
from pocketmq.common import properties as props
from pocketmq.common.gray import is_gray_message
from pocketmq.common.message import MessageExt
from pocketmq.common.properties import decode_properties
from pocketmq.common.record import FIXED_PART_SIZE, decode_record
from pocketmq.common.topic import is_system_topic
from pocketmq.common.trace_record import BROKER_STEP, TraceRecord

if TYPE_CHECKING:
    from pocketmq.broker.pop.checkpoint import PopCheckpoint
    from pocketmq.broker.pop.receipt import ReceiptHandle
    from pocketmq.broker.pop.receive import PopResult
    from pocketmq.broker.trace_writer import TraceWriter

REVIVE_ACTOR = "revive"
_HASH_RANGE = 1 << 32
MAX_REMEMBERED_POSITIONS = 65_536
# (group, topic, queue id, queue offset): a popped message's place, which acks and CKs name
Position = tuple[str, str, int, int]


def record_uniq_key(record: bytes) -> str | None:
    """The producer's message id in a stored record, read from its properties alone (decoding the whole
    record costs tens of µs, too much for every popped message when one in a hundred is traced). The record
    is body length, body, topic length (1 byte), topic, properties length (2 bytes), properties after its fixed
    part (common/record.py)."""
    body_len = int.from_bytes(record[FIXED_PART_SIZE : FIXED_PART_SIZE + 4])
    topic_len_at = FIXED_PART_SIZE + 4 + body_len
    properties_at = topic_len_at + 1 + record[topic_len_at] + 2
    return decode_properties(record[properties_at:].decode("utf-8", "replace")).get(props.UNIQ_KEY)


def sampled(msg_id: str, ratio: float) -> bool:
    """Whether the message of ``msg_id`` is traced at ``ratio`` (0..1): the same answer everywhere."""
    if ratio >= 1.0:
        return True
    return ratio > 0.0 and zlib.crc32(msg_id.encode()) < ratio * _HASH_RANGE


class Tracer:
    def __init__(
        self,
        writer: TraceWriter,
        *,
        broker_name: str,
        clock,
        settings: Callable[[], tuple[bool, float]],  # (trace_enabled, trace_sample_ratio), read at each event
    ):
        self._writer = writer
        self._broker = broker_name
        self._clock = clock
        self._settings = settings
        self._positions: OrderedDict[Position, str] = OrderedDict()

    @property
    def writer(self) -> TraceWriter:
        return self._writer

    def _ratio(self) -> float:
        enabled, ratio = self._settings()
        return ratio if enabled else 0.0

    def _record(self, step: str, actor: str, msg_id: str, topic: str, queue_id: int, queue_offset: int, **details):
        return TraceRecord(BROKER_STEP, msg_id, self._clock.now_ms(), topic=topic, broker=self._broker, step=step,
                           actor=actor, queue_id=queue_id, queue_offset=queue_offset, details=details)  # fmt: skip

    def _remember(self, position: Position, msg_id: str) -> None:
        self._positions[position] = msg_id
        self._positions.move_to_end(position)
        if len(self._positions) > MAX_REMEMBERED_POSITIONS:
            self._positions.popitem(last=False)

    # -- events ----------------------------------------------------------------------------------------------
    def sent(self, stored: list[MessageExt], results: Iterable) -> None:
        """Messages a producer's send stored (``SendResult``s in the same order)."""
        ratio = self._ratio()
        if not ratio:
            return
        records = []
        for msg, result in zip(stored, results):
            if is_system_topic(result.topic) or not sampled(result.msg_id, ratio):
                continue
            details = {"born_host": f"{msg.born_host[0]}:{msg.born_host[1]}", "offset_msg_id": result.offset_msg_id}
            if msg.tags:
                details["tag"] = msg.tags
            if is_gray_message(msg.properties):
                details["gray"] = True
            if (delay := msg.properties.get(props.DELAY_TIME_LEVEL)) is not None:
                details["delay_level"] = int(delay)
            actor = msg.properties.get(props.PRODUCER_GROUP) or details["born_host"]
            records.append(
                self._record(
                    "send", actor, result.msg_id, result.topic, result.queue_id, result.queue_offset, **details
                )
            )
        self._writer.offer(records)

    def popped(self, group: str, client_id: str, gray: bool, result: PopResult) -> None:
        """One POP receive's deliveries."""
        ratio = self._ratio()
        if not ratio:
            return
        records = []
        for popped in result.queues:
            for record, queue_offset in zip(popped.records, popped.queue_offsets):
                msg_id = record_uniq_key(record)
                if msg_id is None or not sampled(msg_id, ratio):
                    continue
                self._remember((group, popped.topic, popped.queue_id, queue_offset), msg_id)
                attempt = decode_record(record)[0].reconsume_times + 1  # decoded only when traced: it costs
                details: dict = {"group": group, "invisible_ms": result.invisible_ms, "attempt": attempt}
                if gray:
                    details["gray_client"] = True
                where = (popped.topic, popped.queue_id, queue_offset)
                records.append(self._record("pop", client_id or group, msg_id, *where, **details))
        self._writer.offer(records)

    def _at(self, position: Position, *, last: bool) -> str | None:
        """The message id popped at ``position``; ``last``: the message leaves it (forgotten)."""
        return self._positions.pop(position, None) if last else self._positions.get(position)

    def acked(self, group: str, handles: list[ReceiptHandle], errors: list) -> None:
        records = [
            self._record("ack", group, msg_id, h.topic, h.queue_id, h.queue_offset, group=group)
            for h, error in zip(handles, errors)
            if error is None and (msg_id := self._at((group, h.topic, h.queue_id, h.queue_offset), last=True))
        ]
        self._writer.offer(records)

    def invisible_changed(self, group: str, handle: ReceiptHandle, invisible_ms: int) -> None:
        self._at_handle("change_invisible", group, handle, last=False, invisible_ms=invisible_ms)

    def _at_handle(self, step: str, group: str, handle: ReceiptHandle, *, last: bool, **details) -> None:
        """A step of the group's consumer at ``handle``'s position, when a traced message was popped there."""
        if (msg_id := self._at((group, handle.topic, handle.queue_id, handle.queue_offset), last=last)) is not None:
            where = (handle.topic, handle.queue_id, handle.queue_offset)
            self._writer.offer([self._record(step, group, msg_id, *where, group=group, **details)])

    def revived(self, ck: PopCheckpoint, copies: list, rewrites: list, gone: list, drops: list) -> None:
        """A closed CK's outcome (revive's ``CkPlan``): its retry copies and dead letters, the CK rewrites with
        the reason the read failed, and the messages gone or dropped."""
        read_from = "local" if ck.broker_name in ("", self._broker) else f"remote:{ck.broker_name}"
        records = []

        def add(step: str, queue_offset: int, *, last: bool, **details) -> None:
            if (msg_id := self._at((ck.group, ck.topic, ck.queue_id, queue_offset), last=last)) is not None:
                where = (ck.topic, ck.queue_id, queue_offset)
                records.append(self._record(step, REVIVE_ACTOR, msg_id, *where, group=ck.group, read=read_from,
                                            **details))  # fmt: skip

        for copy in copies:
            to = copy.message
            details = {"to_topic": to.topic, "reconsume_times": to.reconsume_times}
            if (delay := to.properties.get(props.DELAY_TIME_LEVEL)) is not None:
                details["delay_level"] = int(delay)
            if copy.dead_letter:
                details["reason"] = to.properties.get(DLQ_REASON, "")
            add("dlq" if copy.dead_letter else "retry", copy.queue_offset, last=True, **details)
        for rewrite, reason in rewrites:
            new = rewrite.checkpoint
            for queue_offset in new.unacked_offsets():
                add("ck_rewrite", queue_offset, last=False, reason=reason, rewrites=new.rewrite_count,
                    wait_ms=rewrite.wait_ms)  # fmt: skip
        for step, ended in (("gone", gone), ("dropped", drops)):
            for queue_offset, reason in ended:
                add(step, queue_offset, last=True, reason=reason)
        self._writer.offer(records)

    def forwarded_to_dlq(self, group: str, handle: ReceiptHandle) -> None:
        """A client moved a popped message to the DLQ itself."""
        self._at_handle("dlq", group, handle, last=True, reason=REASON_CLIENT_FORWARD)

    def sent_back(self, group: str, source: MessageExt, copy: MessageExt, to_dlq: bool, delay_level: int) -> None:
        """A push consumer's CONSUMER_SEND_MSG_BACK: ``copy`` is the retry (or dead letter) stored."""
        if not sampled(source.msg_id, self._ratio()):
            return
        details = {
            "group": group,
            "to_topic": copy.properties.get(props.REAL_TOPIC) or copy.topic,  # a delayed retry waits in the timer
            "reconsume_times": copy.reconsume_times,
        }
        if not to_dlq:
            details["delay_level"] = delay_level
        step = "dlq" if to_dlq else "retry"
        self._writer.offer(
            [self._record(step, group, source.msg_id, source.topic, source.queue_id, source.queue_offset, **details)]
        )
