"""The SDK's message trace (``ClientConfig.enable_trace``): RocketMQ 4.x's trace records of a client's sends
(``Pub``) and consumes (``SubBefore`` before the listener or at a receive, ``SubAfter`` after it or at an ack),
stored in ``RMQ_SYS_TRACE_TOPIC`` where ``pocketmq message trace`` and RocketMQ's tools read them (docs/trace.md).

A send or a consume only appends its records to a bounded queue (safe from any thread: the synchronous
producer sends on the caller's thread); a periodic task on the client loop packs them into trace messages and
sends them with ``send``. A full queue drops records (counted in ``dropped``), as a broken trace must never
stop the messages themselves.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable

from pocketmq.common import properties as props
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import Message, MessageExt
from pocketmq.common.trace_record import PUB, SUB_AFTER, SUB_BEFORE, TRACE_TOPIC, TraceRecord, trace_messages
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.periodic import PeriodicTask

log = logging.getLogger(__name__)

FLUSH_INTERVAL_MS = 100
MAX_QUEUED_RECORDS = 10_000
TRACE_PRODUCER_GROUP = "_INNER_TRACE_PRODUCER"  # RocketMQ's name for the group that sends trace messages
_MSG_TYPE_NORMAL, _MSG_TYPE_DELAY = 0, 3  # RocketMQ's MessageType ordinals


class ClientTracer:
    def __init__(self, send: Callable[[Message], Awaitable], clock: Clock, *, client_host: str):
        self._send = send
        self._clock = clock
        self._client_host = client_host
        self._queue: deque[TraceRecord] = deque()
        self._lock = threading.Lock()  # offers come from the caller's threads and the consume threads
        self._flusher = PeriodicTask("pocketmq-trace-flush", self.flush, FLUSH_INTERVAL_MS, clock=clock)
        self.dropped = 0

    def start(self) -> None:
        self._flusher.start()

    async def stop(self) -> None:
        await self._flusher.stop()
        await self.flush()

    def _offer(self, records: list[TraceRecord]) -> None:
        with self._lock:
            room = MAX_QUEUED_RECORDS - len(self._queue)
            if room < len(records):
                self.dropped += len(records) - max(room, 0)
                records = records[: max(room, 0)]
            self._queue.extend(records)

    async def flush(self) -> None:
        with self._lock:
            records = list(self._queue)
            self._queue.clear()
        for message in trace_messages(records):
            try:
                await self._send(message)
            except PocketMQError as exc:  # the broker is away or refuses: these traces are lost
                self.dropped += len(message.keys)
                log.warning("event=trace_send_failed error=%s", exc)

    # -- events ----------------------------------------------------------------------------------------------
    def published(self, group: str, message: Message, result, store_host: str, cost_ms: int) -> None:
        """A send that stored ``message`` (``result``: its SendResult)."""
        if message.topic == TRACE_TOPIC:
            return
        delayed = any(p in message.properties for p in (props.DELAY_TIME_LEVEL, props.TIMER_DELIVER_MS))
        record = TraceRecord(PUB, result.msg_id, self._clock.now_ms(), group=group, topic=message.topic,
                             tags=message.tags or "", keys=" ".join(message.keys), store_host=store_host,
                             body_length=len(message.body), cost_ms=cost_ms,
                             msg_type=_MSG_TYPE_DELAY if delayed else _MSG_TYPE_NORMAL,
                             offset_msg_id=result.offset_msg_id, success=True,
                             client_host=self._client_host)  # fmt: skip
        self._offer([record])

    def received(self, group: str, messages: list[MessageExt], request_id: str | None = None) -> None:
        """Messages handed to the application (before its listener runs, or as a receive returns them);
        ``request_id`` None: each message's POP receipt stands for it."""
        now_ms = self._clock.now_ms()
        self._offer([
            TraceRecord(SUB_BEFORE, m.msg_id, now_ms, group=group, request_id=_request_id(m, request_id),
                        retry_times=m.reconsume_times, keys=" ".join(m.keys), client_host=self._client_host)
            for m in messages
        ])  # fmt: skip

    def consumed(self, messages: list[MessageExt], success: bool, cost_ms: int, request_id: str | None = None) -> None:
        """The application's verdict on messages it ``received`` (with the same ``request_id``)."""
        now_ms = self._clock.now_ms()
        self._offer([
            TraceRecord(SUB_AFTER, m.msg_id, now_ms, keys=" ".join(m.keys), request_id=_request_id(m, request_id),
                        cost_ms=cost_ms, success=success)
            for m in messages
        ])  # fmt: skip


def _request_id(msg: MessageExt, request_id: str | None) -> str:
    return request_id if request_id is not None else msg.properties.get(props.POP_CK, "")
