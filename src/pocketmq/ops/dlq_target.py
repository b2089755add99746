"""Where ``pocketmq dlq resend`` sends a dead message, and what it sends. Pure.

By default a dead message goes back to the group that let it die, and to that group only, through the retry
topic that group's consumers read (RocketMQ's console resends to one group too), so the other groups of its
topic do not get it again:

- a dead letter of POP consumption (it carries ``PMQ_DLQ_ORIGIN_QUEUE_ID``: revive past the group's max
  retries, a client's forward to the DLQ, broker/pop/copies.py) goes to the pop retry topic
  ``%RETRY%<group>_<topic>``, which every pop of the group on that topic reads;
- any other (a push consumer's send-back, the timer's dead letter of a retry that waited) goes to
  ``%RETRY%<group>``, which every clustering push consumer of the group subscribes to.

With ``to_topic`` (``--to-topic``) it goes to its original topic instead, where every group subscribed to the
topic gets it again.

The copy keeps body, tag, keys, message id and user properties; the retry and dead-letter bookkeeping is
dropped so the message starts afresh (reconsume times 0, the group's full retries ahead), except that a copy
in a retry topic names its original topic in ``RETRY_TOPIC``, which is how consumers hand it out under that
topic.
"""

from __future__ import annotations

from pocketmq.broker.pop import copies
from pocketmq.common import properties as props
from pocketmq.common.errors import ClientError
from pocketmq.common.message import Message, MessageExt
from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic, retry_topic

# Bookkeeping a resent message starts without.
_DROPPED_PROPERTIES = frozenset(
    {
        props.DELAY_TIME_LEVEL,
        props.RETRY_TOPIC,
        props.ORIGIN_MESSAGE_ID,
        props.RECONSUME_TIME,
        props.MAX_RECONSUME_TIMES,
        props.REAL_TOPIC,
        props.REAL_QUEUE_ID,
        props.TIMER_DELIVER_MS,
        props.TIMER_DELAY_SEC,
        props.TIMER_DELAY_MS,
        "TIMER_OUT_MS",
        props.POP_CK,
        props.FIRST_POP_TIME,
        props.DLQ_ORIGIN_TOPIC,
        props.DLQ_ORIGIN_MESSAGE_ID,
        copies.ORIGIN_QUEUE_ID,
        copies.ORIGIN_QUEUE_OFFSET,
        copies.DLQ_ORIGIN_QUEUE_ID,
        copies.DLQ_ORIGIN_QUEUE_OFFSET,
        copies.DLQ_REASON,
    }
)


def origin_topic(dead: MessageExt) -> str | None:
    """The topic ``dead`` was first sent to, None when the dead letter does not say."""
    origin = dead.properties.get(props.RETRY_TOPIC)
    if origin:
        return origin
    # a POP dead letter of a first delivery names it only here; the timer's names the retry topic here
    named = dead.properties.get(props.DLQ_ORIGIN_TOPIC, "")
    return None if not named or named.startswith(RETRY_GROUP_TOPIC_PREFIX) else named


def group_retry_topic(dead: MessageExt, group: str, origin: str) -> str:
    """The retry topic through which ``group``'s consumers get ``dead`` again (see the module docstring)."""
    if copies.DLQ_ORIGIN_QUEUE_ID in dead.properties and not dead.properties.get(props.DLQ_ORIGIN_TOPIC, "").startswith(
        RETRY_GROUP_TOPIC_PREFIX
    ):
        return pop_retry_topic(group, origin)
    return retry_topic(group)


def resent_copy(msg: MessageExt, destination: str, origin: str) -> Message:
    """What is sent to ``destination`` (a retry topic, or ``origin`` itself) for ``msg``."""
    properties = {k: v for k, v in msg.properties.items() if k not in _DROPPED_PROPERTIES}
    if destination != origin:
        properties[props.RETRY_TOPIC] = origin
    return Message(topic=destination, body=msg.body, properties=properties, flag=msg.flag)


def redelivery(dead: MessageExt, group: str, *, to_topic: bool) -> Message:
    """The message that resends the dead letter ``dead`` of ``group``."""
    origin = origin_topic(dead)
    if origin is None:
        raise ClientError(f"dead message {dead.msg_id} names no original topic (RETRY_TOPIC, DLQ_ORIGIN_TOPIC)")
    return resent_copy(dead, origin if to_topic else group_retry_topic(dead, group, origin), origin)
