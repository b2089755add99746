"""A receive: what a pop asks for (``PopRequest``), what it takes from one queue (``PoppedQueue``), what it hands
back (``PopResult``), the checks a request must pass (``admit``) and the order in which a pass over the queues
visits them (``visit_order``, pure).

``Receive`` is a request with what the engine derives from it once (its filter, the group's max attempts);
the pop modes (``pop/mode.py``) get it for every queue they pop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pocketmq.broker.pop import copies
from pocketmq.broker.pop.checkpoint import MAX_MESSAGES_PER_CK, PopCheckpoint
from pocketmq.broker.pop.fifo import ORDERLY_REVIVE_QUEUE_ID
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.subscription_filters import EVERY_MESSAGE, ReadFilter
from pocketmq.common import properties as props
from pocketmq.common.errors import BadRequestError, NoPermissionError
from pocketmq.common.message import MessageExt
from pocketmq.common.record import decode_record, record_queue_offset

INIT_MODE_MIN = 0
INIT_MODE_MAX = 1
MAX_INVISIBLE_MS = 12 * 3600 * 1000
RETRY_FIRST_EVERY = 5  # every fifth pop reads the retry topic first (RocketMQ: 20 % of pops)


@dataclass(frozen=True, slots=True)
class PopRequest:
    group: str
    topic: str
    max_count: int
    invisible_ms: int
    queue_id: int = -1  # < 0: every queue of the topic
    read_filter: ReadFilter = EVERY_MESSAGE  # the subscription's (``SubscriptionFilters.read_filter``)
    poll_ms: int = 0  # long polling: how long to wait for a message when there is none
    init_mode: int = INIT_MODE_MIN
    fifo: bool | None = None  # None: the group's consumeMessageOrderly
    client_id: str = ""  # who pops: the group's gray split decides its queues (broker/gray_split.py)
    # done when the client leaves: its long poll ends at once, so the answer reaches it before it closes its
    # channel (the official Python client logs an error for a receive still open when it shuts down)
    client_gone: asyncio.Future | None = None


@dataclass(frozen=True, slots=True)
class Receive:
    """A request with what is derived from it once, for the pop modes."""

    request: PopRequest
    keep: ReadFilter  # the subscription's filter: tags codes (TAG) or records (SQL92)
    max_attempts: int  # deliveries of a message before it is dead-lettered (the group's retry max + 1)


@dataclass(slots=True)
class PoppedQueue:
    """What one pop took from one queue: raw stored records in queue order."""

    topic: str  # the topic read: the business topic or its pop retry topic
    queue_id: int
    start_offset: int  # the CK's start offset (FIFO: unused, each handle names its own offset)
    records: list[bytes]
    retry: bool
    attempts: list[int] | None = None  # FIFO: 1-based delivery attempt per record
    reconsume_times: int = 0  # staged queues (pop/staged.py): a message handed out again in place

    @property
    def queue_offsets(self) -> list[int]:
        return [record_queue_offset(r) for r in self.records]

    @property
    def as_stored(self) -> bool:
        """The records can go to a client unchanged (not a retry copy, no FIFO attempt to set)."""
        return not self.retry and self.attempts is None and not self.reconsume_times

    def messages(self) -> list[MessageExt]:
        """The records decoded as delivered: business topic, reconsume times = attempt - 1 for FIFO."""
        out = []
        for i, record in enumerate(self.records):
            msg = decode_record(record)[0]
            if self.retry:
                msg.topic = copies.business_topic(msg)
            if self.attempts is not None:
                msg.reconsume_times = self.attempts[i] - 1
            elif self.reconsume_times:
                msg.reconsume_times = self.reconsume_times
            out.append(msg)
        return out


@dataclass(slots=True)
class PopResult:
    pop_time_ms: int
    invisible_ms: int
    revive_queue_id: int
    broker_name: str
    queues: list[PoppedQueue] = field(default_factory=list)
    rest_num: int = 0  # messages left in the queues visited

    @property
    def count(self) -> int:
        return sum(len(q.records) for q in self.queues)

    def handle(self, popped: PoppedQueue, queue_offset: int, phys_offset: int = 0) -> ReceiptHandle:
        fifo = popped.attempts is not None
        return ReceiptHandle(
            popped.topic,
            queue_offset if fifo else popped.start_offset,
            self.pop_time_ms,
            self.invisible_ms,
            ORDERLY_REVIVE_QUEUE_ID if fifo else self.revive_queue_id,
            1 if popped.retry else 0,
            self.broker_name,
            popped.queue_id,
            queue_offset,
            phys_offset,
        )

    def checkpoint(
        self, group: str, topic: str, queue_id: int, queue_offsets: list[int], attempt: int = 0
    ) -> PopCheckpoint:
        """The CK of what this pop hands out at ``queue_offsets`` of one queue (in its revive queue, the key its
        receipt handles name)."""
        return PopCheckpoint.of_offsets(
            topic,
            group,
            queue_id,
            queue_offsets,
            self.pop_time_ms,
            self.invisible_ms,
            self.broker_name,
            self.revive_queue_id,
            attempt=attempt,
        )

    def delivered(self) -> list[tuple[MessageExt, ReceiptHandle]]:
        """Every message with its receipt handle (also set as its POP_CK property)."""
        out = []
        for popped in self.queues:
            for msg in popped.messages():
                handle = self.handle(popped, msg.queue_offset, msg.phys_offset)
                msg.properties[props.POP_CK] = handle.encode()
                out.append((msg, handle))
        return out


def check_invisible_ms(invisible_ms: int) -> None:
    if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
        raise BadRequestError(f"invisible time {invisible_ms} ms is outside [0, {MAX_INVISIBLE_MS}]")


def admit(req: PopRequest, groups, topics) -> tuple:
    """The (group config, topic config) of a request the broker serves (the group is created on first use);
    BadRequestError / NoPermissionError for one it does not."""
    if not 1 <= req.max_count <= MAX_MESSAGES_PER_CK:
        raise BadRequestError(f"max message count {req.max_count} is outside [1, {MAX_MESSAGES_PER_CK}]")
    check_invisible_ms(req.invisible_ms)
    group_config = groups.get_or_create(req.group)
    if not group_config.consume_enable:
        raise NoPermissionError(f"group {req.group!r} may not consume now (consumeEnable=false)")
    topic_config = topics.require(req.topic)
    if not topic_config.readable:
        raise NoPermissionError(f"topic {req.topic!r} is not readable on this broker")
    if req.queue_id >= topic_config.read_queue_nums:
        raise BadRequestError(
            f"queue id {req.queue_id} is illegal: topic {req.topic!r} has {topic_config.read_queue_nums} read queues"
        )
    return group_config, topic_config


def visit_order(
    topic: str,
    queue_ids: list[int],
    retry_topic: str,
    retry_queue_ids: list[int],
    turn: int,
    *,
    by_priority: bool = False,
) -> list[tuple[str, int]]:
    """The (topic, queue id)s one pass of a pop reads in turn: the topic's queues from a rotating start, and the
    retry topic's after them, or first on every ``RETRY_FIRST_EVERY``-th turn.

    ``by_priority`` (a PRIORITY topic, where queue *n* holds priority *n*): the highest queue first, each followed
    by the retry topic's queue of the same priority (preceded on every ``RETRY_FIRST_EVERY``-th turn), so that a
    waiting message of a higher priority, fresh or retried, always goes before every lower one."""
    retry_first = turn % RETRY_FIRST_EVERY == 0
    if by_priority:
        retries = set(retry_queue_ids)
        plan: list[tuple[str, int]] = []
        for q in sorted(set(queue_ids) | retries, reverse=True):
            level = [(topic, q)] if q in queue_ids else []
            if q in retries:
                level.insert(0 if retry_first else len(level), (retry_topic, q))
            plan += level
        return plan
    start = turn % len(queue_ids) if queue_ids else 0
    plan = [(topic, q) for q in queue_ids[start:] + queue_ids[:start]]
    retry = [(retry_topic, q) for q in retry_queue_ids]
    return retry + plan if retry_first else plan + retry
