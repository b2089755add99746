"""Push consumer listeners: what user code returns, the context it may adjust, and the pure ack rules.

A concurrent listener is ``listener(messages, context: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus``;
an orderly one ``listener(messages, context: ConsumeOrderlyContext) -> ConsumeOrderlyStatus``. A plain
listener runs on the consumer's bounded thread pool, an ``async def`` one on the client's event loop
(``client/listener_runner.py``); an exception or a ``None`` return counts as RECONSUME_LATER /
SUSPEND_CURRENT_QUEUE_A_MOMENT, as in RocketMQ.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass(slots=True)
class ConsumeStagedConcurrentlyContext(ConsumeOrderlyContext):
    """The context of a staged listener's call (RIP-22's ``ConsumeStagedConcurrentlyContext``): the messages of
    a call share one staged sequence (``strategy_id``, ``stage_group``: what ``compute_strategy`` and
    ``compute_group`` gave; strategy None: plain concurrency) and one stage, ``stage_index`` (0 for the first;
    ``len(definitions)`` for the unbounded stage after the last definition)."""

    strategy_id: str | None = None
    stage_group: str | None = None
    stage_index: int = 0


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


class StagedConcurrentListener:
    """A staged-concurrent listener (RocketMQ's RIP-22 ``MessageListenerStagedConcurrently``; docs/staged.md).

    Subclass it and register it with ``PushConsumer.register_staged_listener``. ``consume_message`` gets
    ``consume_batch_size`` messages of one stage at a time, with a ``ConsumeStagedConcurrentlyContext`` saying
    which, and returns a ``ConsumeOrderlyStatus``. ``stage_definitions(strategy)`` gives the stage sizes of a
    strategy (``[]``: concurrent, all ones: orderly; read again at every rebalance, sizes below 1 refused);
    ``compute_strategy(msg)`` picks the strategy (None: plain concurrency) and ``compute_group(msg)`` the stage
    group, so one queue carries several independent staged sequences. ``reset_current_stage_offset_if_need``
    may replace a sequence's stage offset (return None to keep it) when the sequence is first seen and whenever
    its strategy's definitions change.
    """

    def consume_message(
        self, msgs: list[MessageExt], context: ConsumeStagedConcurrentlyContext
    ) -> ConsumeOrderlyStatus:
        raise NotImplementedError

    def stage_definitions(self, strategy: str | None = None) -> list[int]:
        return []

    def compute_strategy(self, msg: MessageExt) -> str | None:
        return ""  # one staged sequence per queue unless overridden

    def compute_group(self, msg: MessageExt) -> str | None:
        return ""

    def reset_current_stage_offset_if_need(
        self, mq: MessageQueue, strategy: str | None, group: str | None, stage_offset: int
    ) -> int | None:
        return None

    def __call__(self, msgs: list[MessageExt], context: ConsumeStagedConcurrentlyContext) -> ConsumeOrderlyStatus:
        return self.consume_message(msgs, context)
