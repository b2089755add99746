"""What revive writes for a message that was not acked: a retry copy, or a dead letter. Pure.

- ``retry_copy``: the message again, for the pop retry topic ``%RETRY%<group>_<topic>`` (revive picks the
  queue: a gray message's is the last, broker/gray.py), with ``reconsume_times + 1`` and every property kept
  (``PMQ_GRAY`` too). The first retry also records ``1ST_POP_TIME`` (the pop time of the first delivery),
  ``RETRY_TOPIC`` (the business topic, so a pop of the retry topic hands the message out under its own
  topic), ``ORIGIN_MESSAGE_ID`` and where the message first sat (``PMQ_ORIGIN_QUEUE_ID`` /
  ``PMQ_ORIGIN_QUEUE_OFFSET``).
- ``dead_letter``: the message in queue 0 of ``%DLQ%<group>`` with ``DLQ_ORIGIN_TOPIC``,
  ``DLQ_ORIGIN_MESSAGE_ID``, the original queue id and offset (``PMQ_DLQ_ORIGIN_QUEUE_ID`` /
  ``PMQ_DLQ_ORIGIN_QUEUE_OFFSET``) and ``PMQ_DLQ_REASON`` (``MAX_ATTEMPTS``, ``CLIENT_FORWARD``, the reason of
  the read that kept failing, ``WRITE_REFUSED`` when its retry copy can never be written, ``WRITE_FAILED`` when
  writing it kept failing past the backoff table).
- ``dead_letter_reference``: for a message that could not be read at all: a ``DeadLetterReference``
  (common/dead_letter_reference.py) naming it, with the same properties, in the reference topic (not
  ``%DLQ%<group>``), until the broker can read the message and write its real dead letter (nothing is dropped
  silently).
"""

from __future__ import annotations

from pocketmq.common import properties as props
from pocketmq.common.dead_letter_reference import REFERENCE_TOPIC, STATE_OPEN, STATE_PROPERTY, DeadLetterReference
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import dlq_topic, pop_retry_topic

ORIGIN_QUEUE_ID = "PMQ_ORIGIN_QUEUE_ID"
ORIGIN_QUEUE_OFFSET = "PMQ_ORIGIN_QUEUE_OFFSET"
DLQ_ORIGIN_QUEUE_ID = "PMQ_DLQ_ORIGIN_QUEUE_ID"
DLQ_ORIGIN_QUEUE_OFFSET = "PMQ_DLQ_ORIGIN_QUEUE_OFFSET"
DLQ_REASON = "PMQ_DLQ_REASON"
REASON_MAX_ATTEMPTS = "MAX_ATTEMPTS"
REASON_CLIENT_FORWARD = "CLIENT_FORWARD"  # ForwardMessageToDeadLetterQueue
REASON_WRITE_REFUSED = "WRITE_REFUSED"  # its retry copy (or dead letter) can never be written (store/write_result.py)
REASON_WRITE_FAILED = "WRITE_FAILED"  # writing its retry copy kept failing past the backoff table


def business_topic(msg: MessageExt) -> str:
    """The topic a consumer subscribed to: a retry copy remembers it in RETRY_TOPIC."""
    return msg.properties.get(props.RETRY_TOPIC) or msg.topic


def _copy(msg: MessageExt, topic: str, properties: dict[str, str], reconsume_times: int) -> MessageExt:
    return MessageExt(
        topic=topic,
        body=msg.body,
        properties=properties,
        flag=msg.flag,
        queue_id=0,
        sys_flag=msg.sys_flag,
        born_timestamp_ms=msg.born_timestamp_ms,
        born_host=msg.born_host,
        reconsume_times=reconsume_times,
    )


def retry_copy(msg: MessageExt, group: str, first_pop_time_ms: int) -> MessageExt:
    topic = business_topic(msg)
    properties = dict(msg.properties)
    properties.pop(props.POP_CK, None)
    if props.RETRY_TOPIC not in properties:
        properties[props.RETRY_TOPIC] = topic
        properties[ORIGIN_QUEUE_ID] = str(msg.queue_id)
        properties[ORIGIN_QUEUE_OFFSET] = str(msg.queue_offset)
    properties.setdefault(props.FIRST_POP_TIME, str(first_pop_time_ms))
    properties.setdefault(props.ORIGIN_MESSAGE_ID, msg.msg_id)
    return _copy(msg, pop_retry_topic(group, topic), properties, msg.reconsume_times + 1)


def dead_letter_properties(
    base: dict[str, str], topic: str, msg_id: str, queue_id: str, queue_offset: str, reason: str
) -> dict[str, str]:
    """``base`` without what would delay the message, with where it came from and why it is dead."""
    properties = dict(base)
    for transient in (
        props.POP_CK,
        props.DELAY_TIME_LEVEL,
        props.TIMER_DELIVER_MS,
        props.TIMER_DELAY_SEC,
        props.TIMER_DELAY_MS,
    ):
        properties.pop(transient, None)  # a dead letter is readable at once (RocketMQ #2724)
    properties[props.DLQ_ORIGIN_TOPIC] = topic
    properties[props.DLQ_ORIGIN_MESSAGE_ID] = msg_id
    properties[DLQ_ORIGIN_QUEUE_ID] = queue_id
    properties[DLQ_ORIGIN_QUEUE_OFFSET] = queue_offset
    properties[DLQ_REASON] = reason
    return properties


def dead_letter(msg: MessageExt, group: str, reason: str) -> MessageExt:
    properties = msg.properties
    queue_id = properties.get(ORIGIN_QUEUE_ID, str(msg.queue_id))
    queue_offset = properties.get(ORIGIN_QUEUE_OFFSET, str(msg.queue_offset))
    msg_id = properties.get(props.ORIGIN_MESSAGE_ID) or msg.msg_id
    dead = dead_letter_properties(properties, business_topic(msg), msg_id, queue_id, queue_offset, reason)
    return _copy(msg, dlq_topic(group), dead, msg.reconsume_times)


def dead_letter_reference(ref: DeadLetterReference) -> MessageExt:
    marks = {**ref.properties(), STATE_PROPERTY: STATE_OPEN}
    dead = dead_letter_properties(marks, ref.topic, "", str(ref.queue_id), str(ref.queue_offset), ref.reason)
    return MessageExt(topic=REFERENCE_TOPIC, body=ref.to_json(), properties=dead, queue_id=0)
