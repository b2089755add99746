"""Sending and pulling messages: the checks, queue selection, idempotent sends, and pull status mapping.

``MessageService.send`` validates a request (topic, permission, body, properties, message type), picks
the queue when the sender names none (gray messages into the topic's gray queues: docs/gray.md), and appends
everything in one store call. ``MessageService.pull`` reads a queue from an offset
and holds the pull (long polling) when there is nothing new yet.

Idempotent sends: a message with property ``PMQ_IDEMPOTENT=true`` and a UNIQ_KEY already stored in its
topic is not appended again; the reply is the original's queue id, queue offset and ids. Sends of one key
are serialized; a recent-sends map covers the moment before the store's index has the original.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pocketmq.broker.long_polling import PullHoldService
from pocketmq.broker.send_back import retry_send_destination, strip_delay
from pocketmq.broker.subscription_filters import EVERY_MESSAGE, ReadFilter
from pocketmq.broker.timer.service import TIMER_OUT_MS
from pocketmq.broker.topics import TopicManager
from pocketmq.broker.traffic import Traffic
from pocketmq.common import properties as props
from pocketmq.common.errors import (
    BadRequestError,
    IllegalMessageError,
    IllegalQueueIdError,
    IllegalTopicError,
    MessageBodyEmptyError,
    MessageBodyTooLargeError,
    MessagePropertiesTooLargeError,
    MessageTypeConflictError,
    NoPermissionError,
    ServiceNotAvailableError,
    StoreError,
)
from pocketmq.common.gray import is_gray_message, placement_queues, retry_queue_id
from pocketmq.common.message import Message, MessageExt, make_offset_msg_id
from pocketmq.common.topic import (
    RETRY_GROUP_TOPIC_PREFIX,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
    MessageType,
    TopicConfig,
    is_group_topic,
    is_system_topic,
    priority_queue_id,
    topic_name_problem,
)
from pocketmq.common.trace_record import TRACE_TOPIC
from pocketmq.protocol.codes import ResponseCode
from pocketmq.store.api import GetResult, GetStatus, PutResult, PutStatus

if TYPE_CHECKING:
    from pocketmq.broker.lite.service import LiteService
    from pocketmq.broker.timer.service import TimerService
    from pocketmq.broker.tracer import Tracer
    from pocketmq.broker.transaction.service import TransactionService
    from pocketmq.broker.write_path import Replication

log = logging.getLogger(__name__)

IDEMPOTENT_PROPERTY = props.IDEMPOTENT
PULL_MAX_COUNT = 256
PULL_MAX_BYTES = 8 * 1024 * 1024
_RECENT_IDEMPOTENT_MAX = 65_536


# Not frozen, though treated as a value: a frozen dataclass costs ~0.9 µs more to build, once per sent message.
@dataclass(slots=True)
class SendResult:
    status: PutStatus
    msg_id: str  # the producer's UNIQ_KEY when it gave one, else the offset msg id
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    phys_offset: int
    topic: str = ""
    duplicate: bool = False  # an idempotent resend answered with the original's position
    transaction_id: str = ""  # a half message's: what its END_TRANSACTION names it by
    recall_handle: str = ""  # a delayed message's: what cancels it before it is due (broker.timer.recall)


@dataclass(slots=True)
class SendRequest:
    """One independent send: the arguments of ``MessageService.send_nowait``."""

    messages: Sequence[Message]  # read only: the remoting front end hands its decoded MessageExt list
    topic: str
    queue_id: int | None = None
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    born_timestamp_ms: int = 0
    producer_group: str | None = None
    message_type: MessageType | None = None
    batch: bool = False
    system_topic: str | None = None


class PullStatus(enum.Enum):
    FOUND = "FOUND"  # SUCCESS
    NO_NEW_MSG = "NO_NEW_MSG"  # PULL_NOT_FOUND
    NO_MATCHED_MSG = "NO_MATCHED_MSG"  # PULL_RETRY_IMMEDIATELY
    OFFSET_MOVED = "OFFSET_MOVED"  # PULL_OFFSET_MOVED: continue at next_begin_offset

    @property
    def response_code(self) -> int:
        return _PULL_RESPONSE_CODES[self]


_PULL_RESPONSE_CODES = {
    PullStatus.FOUND: ResponseCode.SUCCESS,
    PullStatus.NO_NEW_MSG: ResponseCode.PULL_NOT_FOUND,
    PullStatus.NO_MATCHED_MSG: ResponseCode.PULL_RETRY_IMMEDIATELY,
    PullStatus.OFFSET_MOVED: ResponseCode.PULL_OFFSET_MOVED,
}


@dataclass(slots=True)
class PullOutcome:
    status: PullStatus
    records: list[bytes] = field(default_factory=list)  # stored records, RocketMQ 4.x layout
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    get_status: GetStatus | None = None  # what the store said, for logs and the curious


def pull_status_of(get_status: GetStatus, queue_offset: int) -> PullStatus:
    """RocketMQ's mapping of a store read to a pull answer (PullMessageProcessor)."""
    if get_status is GetStatus.FOUND:
        return PullStatus.FOUND
    if get_status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING):
        return PullStatus.NO_MATCHED_MSG
    if get_status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return PullStatus.NO_NEW_MSG if queue_offset == 0 else PullStatus.OFFSET_MOVED
    if get_status in (GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.OFFSET_TOO_SMALL):
        return PullStatus.OFFSET_MOVED
    return PullStatus.NO_NEW_MSG  # OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL


def infer_message_type(msg: Message) -> MessageType:
    """The type a message declares through its properties (for senders that do not say it)."""
    if msg.properties.get(props.TRANSACTION_PREPARED) == "true":
        return MessageType.TRANSACTION
    if msg.message_group:
        return MessageType.FIFO
    if (
        msg.delay_level > 0
        or props.TIMER_DELIVER_MS in msg.properties
        or props.TIMER_DELAY_SEC in msg.properties
        or props.TIMER_DELAY_MS in msg.properties
    ):
        return MessageType.DELAY
    if props.PRIORITY in msg.properties:
        return MessageType.PRIORITY
    return MessageType.NORMAL


def check_priority(msg: Message) -> int | None:
    """The level of a priority message, None for another message; BadRequestError for a priority that is not a
    non-negative integer, or on a FIFO, delayed or transactional message (RocketMQ's types exclude each other)."""
    if props.PRIORITY not in msg.properties:
        return None
    priority = msg.priority
    if priority is None:
        raise BadRequestError(f"priority {msg.properties[props.PRIORITY]!r} is not a non-negative integer")
    kind = infer_message_type(msg)
    if kind is not MessageType.PRIORITY:
        raise BadRequestError(f"a {kind.value} message cannot have a priority")
    return priority


def select_queue(topic: TopicConfig, message_group: str | None, round_robin: int, gray: bool = False) -> int:
    """The write queue for a message: among the queues the gray rule allows (common.gray.placement_queues: a
    gray message's are the topic's gray queues), a stable hash of its message group (FIFO), else round robin.
    A group's gray and normal messages are thus two orders, each in one queue (as the SDK's GraySelector)."""
    allowed = placement_queues(topic.write_queue_nums, topic.gray_queue_ratio, gray)
    if message_group:
        return allowed[zlib.crc32(message_group.encode()) % len(allowed)]
    return allowed[round_robin % len(allowed)]


def check_message(msg: Message, *, max_body_bytes: int, max_properties_bytes: int) -> None:
    if not msg.body:
        raise MessageBodyEmptyError("message body is empty")
    if len(msg.body) > max_body_bytes:
        raise MessageBodyTooLargeError(f"message body is {len(msg.body)} bytes, more than {max_body_bytes}")
    size = len(props.encode_properties(msg.properties).encode())
    if size > max_properties_bytes:
        raise MessagePropertiesTooLargeError(f"message properties are {size} bytes, more than {max_properties_bytes}")


def idempotency_key(msg: Message) -> str | None:
    """The UNIQ_KEY a send of ``msg`` is deduplicated by, None when it asks for no idempotency (or has none)."""
    if msg.properties.get(IDEMPOTENT_PROPERTY, "").lower() != "true":
        return None
    return msg.uniq_key or None


class MessageService:
    """Send and pull on one broker's store; the facade exposes it as ``broker.messages``."""

    def __init__(
        self,
        store,
        topics: TopicManager,
        groups,
        holds: PullHoldService,
        *,
        max_body_bytes: int,
        max_properties_bytes: int,
        long_polling_enable: bool,
        short_polling_ms: int,
        timer: TimerService,
        transactions: TransactionService | None = None,
        replication: Replication | None = None,
        read_only_reason: str | None = None,
        lite: LiteService | None = None,
        traffic: Traffic,
    ):
        self._store = store
        self._topics = topics
        self._groups = groups
        self._holds = holds
        self._max_body_bytes = max_body_bytes
        self._max_properties_bytes = max_properties_bytes
        self._long_polling_enable = long_polling_enable
        self._short_polling_ms = short_polling_ms
        self._round_robin = itertools.count()
        self._gray_round_robin = itertools.count()  # gray messages' turns (select_queue)
        self._key_locks: dict[tuple[str, str], list] = {}  # (topic, uniq key) -> [lock, users]
        self._recent: OrderedDict[tuple[str, str], SendResult] = OrderedDict()
        self.put_messages_total = 0  # messages stored since start (runtime info)
        self.got_messages_total = 0  # messages handed to pulls since start
        self._timer = timer  # delayed messages are diverted to it
        self._transactions = transactions  # half messages are diverted to it
        self._replication = replication  # the HaMaster of a SYNC_MASTER: sends wait for a slave's ack
        self._read_only_reason = read_only_reason  # a slave's: sends are refused (SERVICE_NOT_AVAILABLE)
        self._lite = lite  # checks messages to LITE parent topics and picks their queue (docs/lite.md)
        self.tracer: Tracer | None = None  # told of every message stored (broker/tracer.py)
        self._traffic = traffic  # messages in and out (docs/metrics.md)

    def configure(self, *, max_properties_bytes: int, long_polling_enable: bool, short_polling_ms: int) -> None:
        """Apply changed settings of a running broker (UPDATE_BROKER_CONFIG)."""
        self._max_properties_bytes = max_properties_bytes
        self._long_polling_enable = long_polling_enable
        self._short_polling_ms = short_polling_ms

    # -- send ---------------------------------------------------------------------------------------------------
    async def send(self, messages: list[Message], **options) -> list[SendResult]:
        """Validate and append ``messages``; one SendResult per message, in order (``send_nowait``, awaited)."""
        outcome = self.send_nowait(messages, **options)
        return outcome if isinstance(outcome, list) else await outcome

    def send_nowait(
        self,
        messages: list[Message],
        *,
        topic: str,
        queue_id: int | None = None,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        born_timestamp_ms: int = 0,
        producer_group: str | None = None,
        message_type: MessageType | None = None,
        batch: bool = False,
        system_topic: str | None = None,
    ) -> list[SendResult] | Awaitable[list[SendResult]]:
        """Validate and append ``messages`` to ``topic``: one SendResult per message, in order, at once when
        nothing must wait (ASYNC_FLUSH, no idempotent message), else an awaitable of them.

        ``queue_id`` None lets the broker pick (round robin, or the message group's hash for FIFO, within the
        gray or normal queues: ``select_queue``); a ``batch`` goes to one queue. ``message_type`` None skips the
        type check (remoting senders do not declare one). Messages that are ``MessageExt`` keep their sys_flag and
        reconsume_times. ``system_topic`` names the one system topic this send may write (a slave acting as master
        escaping CKs here).
        """
        outcome = self.send_all_nowait(
            [
                SendRequest(
                    messages,
                    topic,
                    queue_id,
                    born_host,
                    born_timestamp_ms,
                    producer_group,
                    message_type,
                    batch,
                    system_topic,
                )
            ]
        )[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def send_all_nowait(
        self, sends: list[SendRequest]
    ) -> list[list[SendResult] | Awaitable[list[SendResult]] | Exception]:
        """``send_nowait`` for several independent sends (those of one socket read): each gets its own outcome,
        in order, or the exception that refused it (a send refused for its own reason fails no other).

        The sends that need no idempotency check share one store append (one commit log write, one consume queue
        write per queue, one arrival notice per queue) instead of one each; when the store refuses the merged
        append, each send is appended on its own so a message's own problem fails only its send.
        """
        outcomes: list = [None] * len(sends)
        plain: list[tuple[int, list[MessageExt]]] = []  # (index in sends, stored messages) of the merged append
        checked_topics: dict[tuple[str, str | None], TopicConfig] = {}  # the sends of a read mostly share a topic
        for i, send in enumerate(sends):
            try:
                stored, keys = self._prepare(send, checked_topics)
            except Exception as exc:
                outcomes[i] = exc
                continue
            if keys:
                outcomes[i] = self._replicated(self._send_idempotent_locked(stored, keys))
            else:
                plain.append((i, stored))
        if not plain:
            return outcomes
        store = self._store
        merged = [msg for _, stored in plain for msg in stored] if len(plain) > 1 else plain[0][1]
        puts = store.append_messages(merged)
        if len(plain) > 1 and not puts[0].status.stored:
            puts = [put for _, stored in plain for put in store.append_messages(stored)]
        start = 0
        for i, stored in plain:
            own_puts = puts[start : start + len(stored)]
            start += len(stored)
            outcome: list[SendResult] | Awaitable[list[SendResult]]
            if store.sync_flush and own_puts[0].status.stored:
                outcome = self._results_when_durable(stored, own_puts)
            else:
                try:
                    outcome = self._results(stored, own_puts)
                except Exception as exc:
                    outcomes[i] = exc
                    continue
            outcomes[i] = self._replicated(outcome)
        return outcomes

    def _prepare(
        self, send: SendRequest, checked_topics: dict[tuple[str, str | None], TopicConfig]
    ) -> tuple[list[MessageExt], list[tuple[str, str]]]:
        """Check a send and turn its messages into the records to store (queues picked, delays diverted); also
        the (topic, UNIQ_KEY) locks its idempotent messages need (none: the plain append). ``checked_topics``:
        the topics (with the system topic they were checked for) that passed ``_check_topic`` in this call."""
        if self._read_only_reason is not None:  # RocketMQ's store refuses puts on a slave the same way
            raise ServiceNotAvailableError(self._read_only_reason)
        messages, topic, queue_id = send.messages, send.topic, send.queue_id
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and len(messages) == 1:
            topic = self._retry_destination(topic, messages[0])  # a client's own retry may be due for the DLQ
        config = checked_topics.get((topic, send.system_topic))
        if config is None:
            config = checked_topics[topic, send.system_topic] = self._check_topic(topic, send.system_topic)
        if not messages:
            raise BadRequestError("no message to send")
        if queue_id is not None and not 0 <= queue_id < config.write_queue_nums:
            raise IllegalQueueIdError(
                f"queue id {queue_id} is illegal: topic {topic!r} has {config.write_queue_nums} write queues"
            )
        message_type = send.message_type
        for msg in messages:
            check_message(msg, max_body_bytes=self._max_body_bytes, max_properties_bytes=self._max_properties_bytes)
            if message_type is None and props.LITE_TOPIC in msg.properties:
                message_type = MessageType.LITE  # remoting senders declare no type: a lite topic says it
            if message_type is not None and not config.message_type.accepts(message_type):
                raise MessageTypeConflictError(
                    f"topic {topic!r} accepts {config.message_type.value} messages, not {message_type.value}"
                )
        if config.message_type is MessageType.LITE and self._lite is not None:
            self._lite.admit(config, messages)
        queue_ids = self._pick_queues(config, messages, queue_id, send.batch)
        stored = [
            self._to_stored(m, topic, q, send.born_host, send.born_timestamp_ms, send.producer_group)
            for m, q in zip(messages, queue_ids)
        ]
        transactions = self._transactions
        for msg in stored:
            # a half message waits for its ending in the half topic, a delayed one in the timer topic
            if transactions is None or not transactions.divert(msg, config):
                self._timer.divert(msg, config)
        return stored, sorted({(topic, key) for m in messages if (key := idempotency_key(m)) is not None})

    def _replicated(self, outcome):
        if self._replication is not None:  # SYNC_MASTER: answer once a slave has the records
            return self._replication.replicated(outcome)
        return outcome

    async def _send_idempotent_locked(self, stored: list[MessageExt], keys: list[tuple[str, str]]) -> list[SendResult]:
        async with _KeyLocks(self._key_locks, keys):
            return await self._send_idempotent(stored)

    def _check_topic(self, topic: str, system_topic: str | None = None) -> TopicConfig:
        problem = topic_name_problem(topic)
        if problem:
            raise IllegalTopicError(problem)
        # the trace topic is the one system topic clients write: 4.x clients' enableMsgTrace (docs/trace.md)
        if is_system_topic(topic) and topic not in (system_topic, TRACE_TOPIC):
            raise IllegalTopicError(f"topic {topic!r} is a system topic; clients cannot send to it")
        config = self._topics.get_or_create(topic)
        if not config.writable:
            raise NoPermissionError(f"topic {topic!r} is not writable on this broker (perm {config.perm})")
        return config

    def _retry_destination(self, topic: str, msg: Message) -> str:
        group_config = self._groups.get(topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
        max_times = group_config.retry_max_times if group_config is not None else -1
        destination = retry_send_destination(topic, getattr(msg, "reconsume_times", 0), msg.properties, max_times)
        if destination != topic:
            strip_delay(msg.properties)  # the DLQ copy is visible at once (#2724)
        return destination

    def _pick_queues(
        self, config: TopicConfig, messages: Sequence[Message], queue_id: int | None, batch: bool
    ) -> list[int]:
        if config.message_type is MessageType.LITE and self._lite is not None:  # a lite topic keeps to one queue
            return [self._lite.queue_of(config, m) for m in messages]
        retry = config.name.startswith(RETRY_GROUP_TOPIC_PREFIX)
        priorities = [None if retry else check_priority(m) for m in messages]
        if priorities[0] is not None:  # its level picks the queue, whatever the client chose (RocketMQ's RIP-80)
            if batch:  # one queue: the first message's
                return [priority_queue_id(priorities[0], config.write_queue_nums)] * len(messages)
            return [priority_queue_id(p or 0, config.write_queue_nums) for p in priorities]
        if queue_id is not None:
            return [queue_id] * len(messages)
        if retry:  # a client's own retry: gray ones stay gray (gray.md)
            return [
                retry_queue_id(config.write_queue_nums, is_gray_message(m.properties), next(self._round_robin))
                for m in messages
            ]
        if batch:  # one queue: the first message's
            return [self._select_queue(config, messages[0])] * len(messages)
        return [self._select_queue(config, m) for m in messages]

    def _select_queue(self, config: TopicConfig, msg: Message) -> int:
        # Gray and normal messages count apart: interleaved sends must not always give one kind the same turn.
        gray = is_gray_message(msg.properties)
        turn = next(self._gray_round_robin if gray else self._round_robin)
        return select_queue(config, msg.message_group, turn, gray)

    @staticmethod
    def _to_stored(
        msg: Message, topic: str, queue_id: int, born_host, born_timestamp_ms: int, producer_group: str | None
    ) -> MessageExt:
        """The record to store. A ``MessageExt`` (the remoting front end decodes into one) is filled in place,
        which saves a copy per message on the hot path; a plain ``Message`` is copied."""
        if isinstance(msg, MessageExt):
            stored = msg
            stored.topic = topic
        else:
            stored = MessageExt(topic=topic, body=msg.body, properties=dict(msg.properties), flag=msg.flag)
        stored.queue_id = queue_id
        stored.born_timestamp_ms = born_timestamp_ms
        stored.born_host = born_host
        if producer_group and stored.properties.get(props.TRANSACTION_PREPARED) == "true":
            stored.properties.setdefault(props.PRODUCER_GROUP, producer_group)  # the transaction check-back
        return stored

    async def _append(self, stored: list[MessageExt]) -> list[SendResult]:
        return self._results(stored, await self._store.put_messages(stored))

    async def _results_when_durable(self, stored: list[MessageExt], puts: list[PutResult]) -> list[SendResult]:
        return self._results(stored, await self._store.wait_puts_durable(puts))

    def _results(self, stored: list[MessageExt], puts: list[PutResult]) -> list[SendResult]:
        self.put_messages_total += len(stored)
        results = [self._result(msg, put) for msg, put in zip(stored, puts)]
        self._traffic.received(results[0].topic, len(stored), sum([len(msg.body) for msg in stored]))
        if self._lite is not None:
            self._lite.appended(stored)
        if self.tracer is not None:
            self.tracer.sent(stored, results)
        return results

    def _result(self, msg: MessageExt, put: PutResult) -> SendResult:
        if not put.status.stored:
            _raise_put_failure(put)
        offset_msg_id = put.offset_msg_id or make_offset_msg_id(msg.store_host, put.phys_offset)
        topic, queue_id = msg.topic, msg.queue_id
        transaction_id = recall_handle = ""
        # Delayed and half messages answer with their real topic and queue; a half message with its half queue
        # offset and transaction id, which its END_TRANSACTION names; a delayed one with its recall handle.
        if topic == TIMER_TOPIC or topic == TRANS_HALF_TOPIC:
            real_topic = msg.properties[props.REAL_TOPIC]
            if topic == TRANS_HALF_TOPIC:
                transaction_id = msg.uniq_key or offset_msg_id
                if self._transactions is not None:  # its END_TRANSACTION, which usually comes next, reads no record
                    self._transactions.stored(msg)
            elif not real_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # a retry is the broker's own, not recallable
                recall_handle = self._timer.recall_handle(
                    real_topic, msg.uniq_key or offset_msg_id, int(msg.properties[TIMER_OUT_MS]), put.queue_offset
                )
            topic, queue_id = real_topic, int(msg.properties[props.REAL_QUEUE_ID])
        # status, msg_id, offset_msg_id, queue_id, queue_offset, phys_offset, topic: positional is ~0.3 µs cheaper
        return SendResult(
            put.status,
            msg.uniq_key or offset_msg_id,
            offset_msg_id,
            queue_id,
            put.queue_offset,
            put.phys_offset,
            topic,
            False,
            transaction_id,
            recall_handle,
        )

    async def _send_idempotent(self, stored: list[MessageExt]) -> list[SendResult]:
        originals: dict[int, SendResult] = {}  # index -> the earlier send's result (answered as a duplicate)
        first_of_key: dict[str, int] = {}
        copy_of: dict[int, int] = {}  # a second copy within this request -> the index of the first
        fresh: list[int] = []
        for i, msg in enumerate(stored):
            key = idempotency_key(msg)
            if key is None:
                fresh.append(i)
            elif (original := self._find_original(msg.topic, key)) is not None:
                originals[i] = original
            elif key in first_of_key:
                copy_of[i] = first_of_key[key]
            else:
                first_of_key[key] = i
                fresh.append(i)
        appended = dict(zip(fresh, await self._append([stored[i] for i in fresh]) if fresh else []))
        for i in first_of_key.values():
            self._remember(appended[i])
        return [
            appended[i] if i in appended else originals[i] if i in originals else _as_duplicate(appended[copy_of[i]])
            for i in range(len(stored))
        ]

    def _find_original(self, topic: str, uniq_key: str) -> SendResult | None:
        recent = self._recent.get((topic, uniq_key))
        if recent is not None:
            return _as_duplicate(recent)
        found = self._store.query_by_uniq_key(topic, uniq_key)
        if isinstance(found, list):
            found = found[0] if found else None
        if found is None:
            return None
        return SendResult(
            status=PutStatus.PUT_OK,
            msg_id=uniq_key,
            offset_msg_id=found.offset_msg_id,
            queue_id=found.queue_id,
            queue_offset=found.queue_offset,
            phys_offset=found.phys_offset,
            topic=topic,
            duplicate=True,
        )

    def _remember(self, result: SendResult) -> None:
        self._recent[(result.topic, result.msg_id)] = result
        if len(self._recent) > _RECENT_IDEMPOTENT_MAX:
            self._recent.popitem(last=False)

    # -- pull ---------------------------------------------------------------------------------------------------
    async def pull(
        self,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int,
        *,
        read_filter: ReadFilter = EVERY_MESSAGE,
        suspend_timeout_ms: int = 0,
    ) -> PullOutcome:
        """Read up to ``max_count`` records of one queue from ``queue_offset``, those ``read_filter`` keeps (the
        subscription's, from ``SubscriptionFilters``); ``next_begin_offset`` is past those it dropped.

        When nothing is there yet and ``suspend_timeout_ms`` > 0 the pull is held until a message arrives
        in the queue or the time is up (``short_polling_ms`` when long polling is off), then read again.
        """
        config = self._check_readable(topic, queue_id)
        group_config = self._groups.get_or_create(group)
        if not group_config.consume_enable:
            raise NoPermissionError(f"group {group!r} may not consume now (consumeEnable=false)")
        if queue_offset < 0:
            raise BadRequestError(f"queue offset {queue_offset} is negative")
        max_count = max(1, min(max_count, PULL_MAX_COUNT))
        outcome = self._read(config.name, queue_id, queue_offset, max_count, read_filter)
        if outcome.status is PullStatus.NO_NEW_MSG and suspend_timeout_ms > 0:
            hold_ms = suspend_timeout_ms if self._long_polling_enable else self._short_polling_ms
            if await self._holds.wait(topic, queue_id, queue_offset, hold_ms):
                outcome = self._read(config.name, queue_id, queue_offset, max_count, read_filter)
        if outcome.records:
            self._traffic.delivered(topic, group, outcome.records)
        return outcome

    def _check_readable(self, topic: str, queue_id: int) -> TopicConfig:
        config = self._topics.get(topic)
        if config is None:
            config = self._topics.get_or_create(topic) if is_group_topic(topic) else self._topics.require(topic)
        if not config.readable:
            raise NoPermissionError(f"topic {topic!r} is not readable on this broker (perm {config.perm})")
        if not 0 <= queue_id < config.read_queue_nums:
            raise IllegalQueueIdError(
                f"queue id {queue_id} is illegal: topic {topic!r} has {config.read_queue_nums} read queues"
            )
        return config

    def _read(self, topic: str, queue_id: int, queue_offset: int, max_count: int, keep: ReadFilter) -> PullOutcome:
        got: GetResult = self._store.get_messages(
            topic,
            queue_id,
            queue_offset,
            max_count,
            max_bytes=PULL_MAX_BYTES,
            tag_filter=keep.tags_code,
            record_filter=keep.record,
        )
        status = pull_status_of(got.status, queue_offset)
        if status is PullStatus.FOUND and not got.records:
            status = PullStatus.NO_MATCHED_MSG  # SUCCESS must carry at least one message
        if status is PullStatus.FOUND:
            self.got_messages_total += len(got.records)
        return PullOutcome(
            status=status,
            records=got.records if status is PullStatus.FOUND else [],
            next_begin_offset=got.next_begin_offset,
            min_offset=got.min_offset,
            max_offset=got.max_offset,
            get_status=got.status,
        )

    def __repr__(self) -> str:
        return f"<MessageService held_pulls={self._holds.held} idempotent_recent={len(self._recent)}>"


def _as_duplicate(result: SendResult) -> SendResult:
    return SendResult(
        status=PutStatus.PUT_OK,
        msg_id=result.msg_id,
        offset_msg_id=result.offset_msg_id,
        queue_id=result.queue_id,
        queue_offset=result.queue_offset,
        phys_offset=result.phys_offset,
        topic=result.topic,
        duplicate=True,
    )


def _raise_put_failure(put: PutResult) -> None:
    reason = put.reason or put.status.value
    if put.status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        raise IllegalMessageError(f"store refused the message: {reason}")
    if put.status is PutStatus.SERVICE_NOT_AVAILABLE:
        raise ServiceNotAvailableError(f"store not available: {reason}")
    raise StoreError(f"store failed to append: {reason}")


class _KeyLocks:
    """Hold one asyncio.Lock per key (taken in sorted order, so two batches never deadlock)."""

    def __init__(self, table: dict, keys: list):
        self._table = table
        self._keys = keys

    async def __aenter__(self):
        for key in self._keys:
            entry = self._table.setdefault(key, [asyncio.Lock(), 0])
            entry[1] += 1
            await entry[0].acquire()

    async def __aexit__(self, *exc):
        for key in self._keys:
            entry = self._table[key]
            entry[0].release()
            entry[1] -= 1
            if entry[1] == 0:
                del self._table[key]
