"""Push consumer listeners: what user code returns, the context it may adjust, and the pure ack rules.

A concurrent listener is ``listener(messages, context: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus``;
an orderly one ``listener(messages, context: ConsumeOrderlyContext) -> ConsumeOrderlyStatus``. Listeners are
plain (synchronous) functions run on the consumer's bounded thread pool; an exception or a ``None`` return
counts as RECONSUME_LATER / SUSPEND_CURRENT_QUEUE_A_MOMENT, as in RocketMQ.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from typing import Callable

from pocketmq.common.message import MessageExt, MessageQueue

ACK_INDEX_ALL = sys.maxsize  # RocketMQ's Integer.MAX_VALUE default: every message of the batch


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """``ack_index``: with CONSUME_SUCCESS, messages after this index count as failed.
    ``delay_level_when_next_consume``: 0 lets the broker choose (3 + reconsume times), -1 sends failed
    messages straight to the DLQ, > 0 is the level to retry at."""

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = ACK_INDEX_ALL


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """``suspend_current_queue_time_ms`` > 0 overrides the consumer's suspend time for this failure."""

    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_ms: int = -1


ConcurrentListener = Callable[[list[MessageExt], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus]
OrderlyListener = Callable[[list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]


def failed_indexes(status: ConsumeConcurrentlyStatus | None, ack_index: int, count: int) -> range:
    """Which messages of a batch of ``count`` failed (RocketMQ's processConsumeResult).

    CONSUME_SUCCESS acks messages ``0..ack_index`` (``ack_index`` clamped to ``count - 1``) and fails the
    rest; RECONSUME_LATER (or anything else) fails them all.
    """
    if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
        last_ok = min(max(ack_index, -1), count - 1)
        return range(last_ok + 1, count)
    return range(count)
