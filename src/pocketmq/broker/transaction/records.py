"""The records of transactional messages, as they lie in the commit log (pure: no store, no clock).

- A **half message** is the producer's message parked in queue 0 of ``RMQ_SYS_TRANS_HALF_TOPIC`` with its
  real topic and queue in ``REAL_TOPIC`` / ``REAL_QID``, its transaction bits cleared from the sys flag (so the
  store indexes it like any message) and PocketMQ's ``PMQ_TRAN_OP_FROM``: the op queue's end when it was stored.
  Every op record about it is at or after that offset, which is what lets a restart read the op queue from a
  bounded place (``state.PendingTable.progress``).
- An **op record** in queue 0 of ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` is one of two kinds:

  - a *resolution* (tag ``d``, RocketMQ's): the body lists half-queue offsets, each followed by ``,``
    (RocketMQ 5.1's batched form), all ended the same way; PocketMQ adds ``PMQ_TRAN_RESOLUTION`` (COMMIT,
    ROLLBACK, DISCARD) and ``PMQ_TRAN_SOURCE`` (CLIENT, CHECK, BROKER) so a reader can tell what happened.
  - a *check mark* (tag ``pmq_check``, PocketMQ's): ``offset:checks,`` per half message checked in one round.
    It replaces RocketMQ's re-appended copy of the half message per check (docs/architecture.md): the count
    and the time of the last check (the record's store time) survive a restart and reach the slaves.
- A **committed message** is the half message back in its real topic, its transaction bits set to COMMIT and
  ``preparedTransactionOffset`` naming the half record; the transaction bookkeeping is stripped.
- A **discarded message** is a copy of the half message in ``TRANS_CHECK_MAX_TIME_TOPIC`` with the reason
  (``PMQ_TRAN_DISCARD_REASON``), the checks it had, and where its half record was.
"""

from __future__ import annotations

import enum

from pocketmq.common import properties as props
from pocketmq.common.message import (
    SYSFLAG_TRANSACTION_COMMIT,
    SYSFLAG_TRANSACTION_PREPARED,
    SYSFLAG_TRANSACTION_ROLLBACK,
    MessageExt,
)
from pocketmq.common.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

HALF_QUEUE_ID = 0
OP_QUEUE_ID = 0
DISCARD_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
DISCARD_QUEUE_ID = 0
PROGRESS_GROUP = "CID_RMQ_SYS_TRANS"  # its consumer offsets on the half and op queues are the check progress

RESOLUTION_TAG = "d"  # RocketMQ's REMOVE_TAG
CHECK_MARK_TAG = "pmq_check"

# Properties (RocketMQ's names where it has them).
TRANSACTION_ID = "__transactionId__"
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
OP_FROM = "PMQ_TRAN_OP_FROM"
RESOLUTION = "PMQ_TRAN_RESOLUTION"
SOURCE = "PMQ_TRAN_SOURCE"
DISCARD_REASON = "PMQ_TRAN_DISCARD_REASON"
HALF_QUEUE_OFFSET = "PMQ_TRAN_HALF_OFFSET"
RESUMED_FROM = "PMQ_TRAN_RESUMED_FROM"  # on a half message put back by an operator: the discarded record's offset
# What a committed message does not carry on (the rest of the half message's properties stays).
_BOOKKEEPING = (
    props.REAL_TOPIC,
    props.REAL_QUEUE_ID,
    props.TRANSACTION_PREPARED,
    OP_FROM,
    CHECK_TIMES,
    RESUMED_FROM,
)
# A transaction cannot be delayed (the Java client removes DELAY before sending a half message).
_DELAY_PROPERTIES = (props.DELAY_TIME_LEVEL, props.TIMER_DELIVER_MS, props.TIMER_DELAY_SEC, props.TIMER_DELAY_MS)
_TRANSACTION_BITS = SYSFLAG_TRANSACTION_ROLLBACK  # 0xC: the mask of the two transaction bits


class Resolution(enum.Enum):
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    DISCARD = "DISCARD"  # checked too often or too old: moved to TRANS_CHECK_MAX_TIME_TOPIC


class Source(enum.Enum):
    CLIENT = "CLIENT"  # the producer's own END_TRANSACTION
    CHECK = "CHECK"  # a producer's answer to a check
    BROKER = "BROKER"  # the check service (a discard)


class DiscardReason(enum.Enum):
    MAX_CHECKS = "MAX_CHECKS"  # transactionCheckMax checks without an answer
    EXPIRED = "EXPIRED"  # older than the store's file reserved time


def is_half_request(msg) -> bool:
    """Does a sent message ask to be a half message? RocketMQ decides by the ``TRAN_MSG`` property, not the sys
    flag; a message of a client older than 4.6.1 retried with a delay is a normal one (SendMessageProcessor)."""
    p = msg.properties
    if p.get(props.TRANSACTION_PREPARED) != "true":
        return False
    return not (getattr(msg, "reconsume_times", 0) > 0 and p.get(props.DELAY_TIME_LEVEL, "0") not in ("", "0"))


def make_half(msg: MessageExt, op_from: int) -> None:
    """Turn ``msg`` (about to be stored in its real topic and queue) into its half message, in place."""
    p = msg.properties
    for name in _DELAY_PROPERTIES:
        p.pop(name, None)
    p[props.REAL_TOPIC] = msg.topic
    p[props.REAL_QUEUE_ID] = str(msg.queue_id)
    uniq_key = p.get(props.UNIQ_KEY)
    if uniq_key:
        p[TRANSACTION_ID] = uniq_key
    p[OP_FROM] = str(op_from)
    msg.sys_flag &= ~_TRANSACTION_BITS
    msg.topic = TRANS_HALF_TOPIC
    msg.queue_id = HALF_QUEUE_ID


def transaction_id(half: MessageExt) -> str:
    """The id clients name a transaction by: the producer's UNIQ_KEY, else the half record's offset id."""
    return half.properties.get(props.UNIQ_KEY) or half.offset_msg_id


def real_topic(half: MessageExt) -> str:
    return half.properties.get(props.REAL_TOPIC, "")


def real_queue_id(half: MessageExt) -> int:
    try:
        return max(int(half.properties.get(props.REAL_QUEUE_ID, "0")), 0)
    except ValueError:
        return 0


def producer_group(half: MessageExt) -> str:
    return half.properties.get(props.PRODUCER_GROUP, "")


def op_from(half: MessageExt, default: int) -> int:
    try:
        return int(half.properties[OP_FROM])
    except (KeyError, ValueError):
        return default


def immunity_ms(half: MessageExt) -> int:
    """``CHECK_IMMUNITY_TIME_IN_SECONDS`` in ms (0: none, or not a number)."""
    try:
        return max(int(half.properties.get(CHECK_IMMUNITY_SECONDS, "0")), 0) * 1000
    except ValueError:
        return 0


def checks_carried(half: MessageExt) -> int:
    """Checks a half message had elsewhere (``TRANSACTION_CHECK_TIMES``: escaped from a slave acting as
    master, or put back by an operator with 0)."""
    try:
        return max(int(half.properties.get(CHECK_TIMES, "0")), 0)
    except ValueError:
        return 0


def is_half_record(record: MessageExt) -> bool:
    return record.topic == TRANS_HALF_TOPIC and bool(record.properties.get(props.REAL_TOPIC))


# -- op records ------------------------------------------------------------------------------------------------
def resolution_op(offsets: list[int], resolution: Resolution, source: Source) -> MessageExt:
    body = "".join(f"{offset}," for offset in offsets).encode()
    return MessageExt(
        topic=TRANS_OP_HALF_TOPIC,
        queue_id=OP_QUEUE_ID,
        body=body,
        properties={props.TAGS: RESOLUTION_TAG, RESOLUTION: resolution.value, SOURCE: source.value},
    )


def check_mark_op(checks: list[tuple[int, int]]) -> MessageExt:
    """One record for the half messages checked in one batch: (half queue offset, checks done) each."""
    body = "".join(f"{offset}:{count}," for offset, count in checks).encode()
    return MessageExt(
        topic=TRANS_OP_HALF_TOPIC, queue_id=OP_QUEUE_ID, body=body, properties={props.TAGS: CHECK_MARK_TAG}
    )


def parse_resolution(op: MessageExt) -> list[int]:
    """The half-queue offsets a resolution op ends (4.9.x's one offset, 5.1's ``a,b,`` list); bad items are
    skipped."""
    return [int(item) for item in op.body.decode("ascii", "replace").split(",") if item.strip().isdigit()]


def parse_check_mark(op: MessageExt) -> list[tuple[int, int]]:
    marks = []
    for item in op.body.decode("ascii", "replace").split(","):
        offset, sep, count = item.partition(":")
        if sep and offset.isdigit() and count.isdigit():
            marks.append((int(offset), int(count)))
    return marks


def op_kind(op: MessageExt) -> str:
    return op.properties.get(props.TAGS, "")


# -- what a resolution writes ------------------------------------------------------------------------------------
def committed_message(half: MessageExt, queue_count: int | None) -> MessageExt:
    """The real message a commit stores. ``queue_count``: the real topic's write queues (None: unknown), so a
    topic that shrank while the transaction was open still gets a queue it has."""
    p = {k: v for k, v in half.properties.items() if k not in _BOOKKEEPING}
    queue_id = real_queue_id(half)
    if queue_count:
        queue_id %= queue_count
    msg = MessageExt(topic=real_topic(half), body=half.body, properties=p, flag=half.flag, queue_id=queue_id)
    msg.sys_flag = (half.sys_flag & ~_TRANSACTION_BITS) | SYSFLAG_TRANSACTION_COMMIT
    msg.born_timestamp_ms = half.born_timestamp_ms
    msg.born_host = half.born_host
    msg.reconsume_times = half.reconsume_times
    msg.prepared_transaction_offset = half.phys_offset
    return msg


def discarded_message(half: MessageExt, reason: DiscardReason, checks: int) -> MessageExt:
    p = dict(half.properties)
    p[CHECK_TIMES] = str(checks)
    p[DISCARD_REASON] = reason.value
    p[HALF_QUEUE_OFFSET] = str(half.queue_offset)
    msg = MessageExt(topic=DISCARD_TOPIC, body=half.body, properties=p, flag=half.flag, queue_id=DISCARD_QUEUE_ID)
    msg.sys_flag = half.sys_flag
    msg.born_timestamp_ms = half.born_timestamp_ms
    msg.born_host = half.born_host
    msg.reconsume_times = half.reconsume_times
    return msg


def resumed_half(discarded: MessageExt) -> MessageExt:
    """A discarded message put back to be checked again (RESUME_CHECK_HALF_MESSAGE): a half message in its real
    topic's terms (the send path makes it a half record again), its checks back to 0, its born time kept."""
    p = {k: v for k, v in discarded.properties.items() if k not in (DISCARD_REASON, HALF_QUEUE_OFFSET, OP_FROM)}
    p[CHECK_TIMES] = "0"
    p[RESUMED_FROM] = str(discarded.phys_offset)
    p[props.TRANSACTION_PREPARED] = "true"
    msg = MessageExt(topic=real_topic(discarded), body=discarded.body, properties=p, flag=discarded.flag)
    msg.queue_id = real_queue_id(discarded)
    msg.sys_flag = discarded.sys_flag | SYSFLAG_TRANSACTION_PREPARED
    msg.born_timestamp_ms = discarded.born_timestamp_ms
    msg.born_host = discarded.born_host
    msg.reconsume_times = discarded.reconsume_times
    return msg


def escaped_half(half: MessageExt, checks: int) -> MessageExt:
    """What a slave acting as master sends to another group's master for a pending half message (RocketMQ's
    ``renewHalfMessageInner``): the message in its real topic, still a half message, its checks carried."""
    p = {k: v for k, v in half.properties.items() if k not in (props.REAL_QUEUE_ID, OP_FROM)}
    p[props.TRANSACTION_PREPARED] = "true"
    p[CHECK_TIMES] = str(checks)
    p.pop(props.REAL_TOPIC, None)
    msg = MessageExt(topic=real_topic(half), body=half.body, properties=p, flag=half.flag)
    msg.sys_flag = half.sys_flag | SYSFLAG_TRANSACTION_PREPARED
    msg.born_timestamp_ms = half.born_timestamp_ms
    msg.born_host = half.born_host
    msg.reconsume_times = half.reconsume_times
    return msg


def check_view(half: MessageExt) -> MessageExt:
    """The half message as a producer's checker sees it (the CHECK body, the gRPC recovery command): its real
    topic and queue, the half record's offsets, every property."""
    view = MessageExt(
        topic=real_topic(half),
        body=half.body,
        properties=dict(half.properties),
        flag=half.flag,
        queue_id=real_queue_id(half),
        queue_offset=half.queue_offset,
        phys_offset=half.phys_offset,
        sys_flag=half.sys_flag,
        born_timestamp_ms=half.born_timestamp_ms,
        born_host=half.born_host,
        store_timestamp_ms=half.store_timestamp_ms,
        store_host=half.store_host,
        reconsume_times=half.reconsume_times,
    )
    return view
