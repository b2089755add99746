"""What the timer writes instead of a due message it cannot deliver: a dead letter, then nothing. Pure.

A due message whose delivery can never be written (its properties over 32,767 bytes, a store or another
group's master refusing it as illegal), or whose delivery kept failing past the write backoff
(``broker.write_backoff``), becomes a dead letter with the reason (``PMQ_DLQ_REASON``: ``WRITE_REFUSED`` or
``WRITE_FAILED``, as revive's):

- a consumer retry waiting for its delay (topic ``%RETRY%<group>``) goes to ``%DLQ%<group>``, where the group's
  other dead letters are;
- any other delayed message goes to ``%DLQ%PMQ_SYS_TIMER`` (``pocketmq dlq list PMQ_SYS_TIMER`` shows them).

When even that dead letter can never be written the timer writes only the tombstone, logs the message id at
ERROR and counts it (``unwritable``): one bad message never holds the timers behind it.
"""

from __future__ import annotations

from pocketmq.broker.pop.copies import dead_letter_properties
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, dlq_topic

TIMER_DLQ_GROUP = "PMQ_SYS_TIMER"


def dead_letter(real: MessageExt, reason: str) -> MessageExt | None:
    """The dead letter of ``real`` (a due message on its way to its topic), or None when ``real`` already is one."""
    if real.topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return None
    group = (
        real.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        if real.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        else TIMER_DLQ_GROUP
    )
    properties = dead_letter_properties(
        real.properties, real.topic, real.uniq_key or "", str(real.queue_id), "", reason
    )
    return MessageExt(
        topic=dlq_topic(group),
        body=real.body,
        properties=properties,
        flag=real.flag,
        queue_id=0,
        sys_flag=real.sys_flag,
        born_timestamp_ms=real.born_timestamp_ms,
        born_host=real.born_host,
        reconsume_times=real.reconsume_times,
    )
