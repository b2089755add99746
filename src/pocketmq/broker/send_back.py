"""Consumer retries on the broker: CONSUMER_SEND_MSG_BACK and the client's fallback send to ``%RETRY%``.

A push consumer hands a message it failed to consume back to the broker by its commit log offset. The broker
reads the message and appends a copy:

- to ``%RETRY%<group>`` (created on demand with the group's ``retryQueueNums`` queues) through the timer, at delay level ``3 + reconsume_times``
  when the client sent level 0 (or the client's level when > 0); or
- to ``%DLQ%<group>`` (1 queue, read-write, #2436) when ``reconsume_times >= max`` or the level is < 0, with
  no DELAY left on it (#2724). ``max`` is the request's ``maxReconsumeTimes`` when given, else the group's
  ``retryMaxTimes`` (16).

The copy keeps body, flag, sys_flag, born time and host and the user's properties (UNIQ_KEY too, so the
consumer sees the same message id); ``RETRY_TOPIC`` = the original topic (set once), ``ORIGIN_MESSAGE_ID`` =
the first id (set once); its ``reconsume_times`` is the original's + 1.

A gray message (property ``PMQ_GRAY``) is retried into the gray retry queue (the last) of a split retry
topic, any other message into the remaining queues (broker/gray.py); the DLQ copy keeps the mark.

A retry copy that can never be written (``%RETRY%<group>`` longer than 127 characters, properties too large)
goes to the DLQ at once with ``PMQ_DLQ_REASON=WRITE_REFUSED``; when not even the dead letter can be written the
request fails with MESSAGE_ILLEGAL (not retriable) and an ERROR log naming the message.

When the send-back fails, RocketMQ clients send the copy themselves to ``%RETRY%<group>`` with
``RECONSUME_TIME`` (already + 1), ``MAX_RECONSUME_TIMES`` and ``DELAY``; ``retry_send_destination`` applies
the broker's check on such sends, which compares with ``>``.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.pop.copies import DLQ_REASON, REASON_WRITE_REFUSED
from pocketmq.broker.retry_topic import ensure_retry_topic
from pocketmq.broker.timer.delay import TIMER_PROPERTIES
from pocketmq.common import properties as props
from pocketmq.common.errors import BadRequestError, IllegalMessageError, NoPermissionError, PocketMQError, StoreError
from pocketmq.common.gray import is_gray_message, retry_queue_id
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX, dlq_topic
from pocketmq.store.write_result import of_put, write_problem

if TYPE_CHECKING:
    from pocketmq.broker.tracer import Tracer

log = logging.getLogger(__name__)

RETRY_BASE_LEVEL = 3  # the first retry waits 10 s with the default level table


@dataclass(frozen=True, slots=True)
class SendBackRequest:
    """CONSUMER_SEND_MSG_BACK's header, as 4.x clients send it."""

    group: str
    phys_offset: int  # ``offset``: the message's commit log offset
    delay_level: int = 0  # 0: the broker decides; < 0: straight to the DLQ
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    max_reconsume_times: int | None = None


@dataclass(frozen=True, slots=True)
class RetryDecision:
    to_dlq: bool
    delay_level: int  # 0 for the DLQ


def decide_retry(reconsume_times: int, delay_level: int, max_reconsume_times: int) -> RetryDecision:
    """Where a handed-back message goes (RocketMQ's AbstractSendMessageProcessor rule)."""
    if delay_level < 0 or reconsume_times >= max_reconsume_times:
        return RetryDecision(True, 0)
    return RetryDecision(False, delay_level if delay_level > 0 else RETRY_BASE_LEVEL + reconsume_times)


def effective_max_reconsume_times(requested: int | None, group_retry_max_times: int) -> int:
    """The request's max when it gives one (>= 0), else the group's (-1 there means RocketMQ's 16)."""
    if requested is not None and requested >= 0:
        return requested
    return 16 if group_retry_max_times < 0 else group_retry_max_times


def retry_send_destination(
    topic: str, reconsume_times: int, properties: dict[str, str], group_retry_max_times: int
) -> str:
    """The topic a client's own send to ``%RETRY%<group>`` really goes to: the group's DLQ once
    ``reconsume_times`` (already counted + 1 by the client) is over the max (RocketMQ compares with ``>``)."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    try:
        requested = int(properties.get(props.MAX_RECONSUME_TIMES, ""))
    except ValueError:
        requested = None
    if reconsume_times > effective_max_reconsume_times(requested, group_retry_max_times):
        return dlq_topic(topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
    return topic


def strip_delay(properties: dict[str, str]) -> None:
    """Remove every property that would delay a message again (a DLQ copy must be visible at once, #2724)."""
    properties.pop(props.DELAY_TIME_LEVEL, None)
    for name in TIMER_PROPERTIES:
        properties.pop(name, None)


def retry_copy(
    original: MessageExt, *, topic: str, queue_id: int, delay_level: int, origin_msg_id: str | None
) -> MessageExt:
    """The copy of ``original`` that goes to a retry or dead-letter topic (see the module docstring)."""
    properties = dict(original.properties)
    for name in (props.REAL_TOPIC, props.REAL_QUEUE_ID, props.RECONSUME_TIME, props.MAX_RECONSUME_TIMES):
        properties.pop(name, None)
    strip_delay(properties)
    properties.setdefault(props.RETRY_TOPIC, original.topic)
    properties.setdefault(props.ORIGIN_MESSAGE_ID, origin_msg_id or original.msg_id)
    if delay_level > 0:
        properties[props.DELAY_TIME_LEVEL] = str(delay_level)
    return MessageExt(
        topic=topic,
        queue_id=queue_id,
        body=original.body,
        properties=properties,
        flag=original.flag,
        sys_flag=original.sys_flag,
        born_timestamp_ms=original.born_timestamp_ms,
        born_host=original.born_host,
        reconsume_times=original.reconsume_times + 1,
    )


class _NeverWritable(Exception):
    """A copy the store can never take (its topic name, its size, a refusal as illegal)."""


class SendBackService:
    """The broker's side of consumer retries; the facade exposes it as ``broker.send_back``."""

    def __init__(self, store, topics, groups, timer):
        self._store = store
        self._topics = topics
        self._groups = groups
        self._timer = timer
        self.retried_total = 0
        self.dead_lettered_total = 0
        self.refused_total = 0  # messages whose retry copy and dead letter can never be written
        self.tracer: Tracer | None = None  # told of every retry and dead letter (broker/tracer.py)

    async def send_back(self, request: SendBackRequest) -> MessageExt:
        """Append the retry (or DLQ) copy of the message at ``request.phys_offset``; returns the copy stored.

        A retry copy that can never be written (``%RETRY%<group>`` over 127 characters, properties too large, a
        refusal as illegal) goes to the DLQ at once with the reason ``WRITE_REFUSED``; a DLQ copy that can
        never be written is IllegalMessageError (logged with the message id and counted in ``refused_total``).
        A refusal that may pass (disk full) is StoreError: the client retries or sends the copy itself."""
        group_config = self._groups.get_or_create(request.group)
        original = self._store.read_message(request.phys_offset) if request.phys_offset >= 0 else None
        if original is None:
            raise PocketMQError(f"look message by offset failed: no message at commit log offset {request.phys_offset}")
        max_times = effective_max_reconsume_times(request.max_reconsume_times, group_config.retry_max_times)
        decision = decide_retry(original.reconsume_times, request.delay_level, max_times)
        uniq = original.uniq_key or original.offset_msg_id
        try:
            copy = await self._append(original, request, decision, group_config, dlq_reason=None)
        except _NeverWritable as refused:
            log.error(
                "event=send_back_refused group=%s msg_id=%s to_dlq=%s reason=%s",
                request.group,
                uniq,
                decision.to_dlq,
                refused,
            )
            if decision.to_dlq:
                self.refused_total += 1
                raise IllegalMessageError(f"the dead letter of {uniq} can never be written: {refused}") from None
            try:
                copy = await self._append(
                    original, request, RetryDecision(True, 0), group_config, dlq_reason=REASON_WRITE_REFUSED
                )
            except _NeverWritable as dlq_refused:
                self.refused_total += 1
                log.error(
                    "event=send_back_refused group=%s msg_id=%s to_dlq=True reason=%s", request.group, uniq, dlq_refused
                )
                raise IllegalMessageError(
                    f"neither the retry copy nor the dead letter of {uniq} can ever be "
                    f"written: {refused}; {dlq_refused}"
                ) from None
            decision = RetryDecision(True, 0)
        if decision.to_dlq:
            self.dead_lettered_total += 1
            log.info(
                "event=message_dead_lettered group=%s msg_id=%s reconsume_times=%d max=%d",
                request.group,
                uniq,
                original.reconsume_times,
                max_times,
            )
        else:
            self.retried_total += 1
        if self.tracer is not None:
            self.tracer.sent_back(request.group, original, copy, decision.to_dlq, decision.delay_level)
        return copy

    async def _append(
        self,
        original: MessageExt,
        request: SendBackRequest,
        decision: RetryDecision,
        group_config: SubscriptionGroupConfig,
        *,
        dlq_reason: str | None,
    ) -> MessageExt:
        """Store the copy ``decision`` asks for; _NeverWritable when it can never be written."""
        try:
            if decision.to_dlq:
                config = self._topics.get_or_create(dlq_topic(request.group))
            else:  # the group's retryQueueNums queues (broker/retry_topic.py)
                config = ensure_retry_topic(self._topics, group_config)
        except BadRequestError as exc:
            raise _NeverWritable(str(exc)) from None
        topic = config.name
        if not config.writable:
            raise NoPermissionError(f"topic {topic!r} is not writable (perm {config.perm})")
        uniq = original.uniq_key or original.offset_msg_id
        # a gray message's retry goes to the gray retry queue, others never do (broker/gray.py); the DLQ has 1
        queue_id = retry_queue_id(
            config.write_queue_nums, is_gray_message(original.properties), zlib.crc32(uniq.encode())
        )
        copy = retry_copy(
            original,
            topic=topic,
            queue_id=queue_id,
            delay_level=decision.delay_level,
            origin_msg_id=request.origin_msg_id,
        )
        if dlq_reason is not None:
            copy.properties[DLQ_REASON] = dlq_reason
        problem = write_problem(copy)
        if problem is not None:
            raise _NeverWritable(problem)
        if not decision.to_dlq:
            self._timer.divert(copy, config)
        result = of_put(await self._store.put_message(copy))
        if result.is_permanent:
            raise _NeverWritable(str(result))
        if not result.stored:
            raise StoreError(f"send back of {uniq} to {topic} failed: {result}")
        return copy

    def __repr__(self) -> str:
        return f"<SendBackService retried={self.retried_total} dead_lettered={self.dead_lettered_total}>"
