"""Transactional producers: ``AsyncTransactionProducer`` (asyncio) and ``TransactionProducer`` (synchronous).

``send_in_transaction(message, arg)`` does what RocketMQ's ``TransactionMQProducer`` does:

1. sends ``message`` as a *half message* (property ``TRAN_MSG=true``, ``PGROUP`` = the producer group, sys flag
   bit TRANSACTION_PREPARED; a delay is dropped: transactions cannot be delayed). The broker keeps it out of the
   topic;
2. runs ``executor(message, arg)`` (the local transaction) unless the half message was stored with a weaker
   guarantee (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE): then ROLLBACK, as the Java client;
3. ends it with END_TRANSACTION, oneway, to the broker that stored it: COMMIT makes it visible to consumers,
   ROLLBACK drops it, UNKNOWN leaves it to the broker's check. An executor that raises counts as UNKNOWN (the
   exception is logged and its text travels as the request's remark).

The broker later asks a producer of the group about messages it has no ending for (CHECK_TRANSACTION_STATE, on
the connection that producer heart-beats on): ``checker(message)`` answers, on the producer's check pool for the
synchronous form, and the answer goes back as a oneway END_TRANSACTION (``fromTransactionCheck=true``) on that
connection. Any live producer of the group may be asked, not only the one that sent the message, so every
producer of a group needs the same checker. A producer gets checks from the brokers it heart-beats, those of the
topics it has routes for: name them in ``topics`` so a producer that has sent nothing yet (one started to take
over from a crashed one) is asked too.

``executor`` and ``checker`` return a ``LocalTransactionState`` (the asyncio form also accepts coroutine
functions); a checker that raises answers UNKNOWN (the broker asks again later).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pocketmq.client.config import ClientConfig
from pocketmq.client.instance import ClientInstance
from pocketmq.client.producer import AsyncProducer, Producer, ProducerOptions, SendResult, SendStatus, _run_inline
from pocketmq.client.queue_select import QueueSelector
from pocketmq.common import properties as props
from pocketmq.common.errors import ClientError, PocketMQError
from pocketmq.common.message import (
    SYSFLAG_COMPRESSED,
    SYSFLAG_TRANSACTION_PREPARED,
    Message,
    MessageExt,
    parse_offset_msg_id,
)
from pocketmq.common.record import RecordFormatError, decode_record
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.request_headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from pocketmq.protocol.transport import RemotingConnection

log = logging.getLogger(__name__)

_DELAY_PROPERTIES = (props.DELAY_TIME_LEVEL, props.TIMER_DELIVER_MS, props.TIMER_DELAY_SEC, props.TIMER_DELAY_MS)
_REMARK_MAX_CHARS = 512
CHECK_THREADS = 4


class LocalTransactionState(enum.Enum):
    COMMIT = 8  # the values are END_TRANSACTION's commitOrRollback
    ROLLBACK = 12
    UNKNOWN = 0


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """The half message's send result, its transaction id, and how the local transaction ended."""

    send_result: SendResult
    transaction_id: str
    local_state: LocalTransactionState

    @property
    def msg_id(self) -> str:
        return self.send_result.msg_id


Executor = Callable[[Message, object], object]  # -> LocalTransactionState (or an awaitable of it: async form)
Checker = Callable[[MessageExt], object]


class AsyncTransactionProducer(AsyncProducer):
    """The asyncio transactional producer; a plain ``send`` works as on ``AsyncProducer``."""

    _kind = "transaction producer"

    def __init__(
        self,
        config: ClientConfig | None = None,
        options: ProducerOptions | None = None,
        *,
        executor: Executor,
        checker: Checker,
        topics: Sequence[str] = (),
        selector: QueueSelector | None = None,
        instance: ClientInstance | None = None,
    ):
        super().__init__(config, options, selector=selector, instance=instance)
        self.executor = executor
        self.checker = checker
        self.topics = tuple(topics)
        self._checks: set[asyncio.Task] = set()

    async def start(self) -> None:
        await super().start()
        for topic in self.topics:  # routes, so the brokers of these topics get heartbeats and send checks here
            try:
                await self.instance.route(self.namespace.wrap(topic))
            except PocketMQError as exc:
                log.warning("event=transaction_topic_route_failed topic=%s error=%s", topic, exc)

    def _attach(self, instance: ClientInstance) -> None:
        super()._attach(instance)
        _dispatcher_of(instance).producers[self.options.group] = self

    def _detach(self, instance: ClientInstance) -> None:
        dispatcher = _dispatcher_of(instance)
        if dispatcher.producers.get(self.options.group) is self:
            del dispatcher.producers[self.options.group]
        for task in self._checks:
            task.cancel()
        super()._detach(instance)

    # -- sending ----------------------------------------------------------------------------------------------------
    async def send_in_transaction(self, message: Message, arg: object = None) -> TransactionSendResult:
        result = await self._send_half(message)
        state, remark = await self._local_state(message, arg, result)
        await self._end_oneway(result, message, state, remark)
        return TransactionSendResult(result, message.properties[props.UNIQ_KEY], state)

    def _prepare_half(self, message: Message):
        """Mark ``message`` as a half message; the builder of its SEND_MESSAGE_V2."""
        for name in _DELAY_PROPERTIES:
            message.properties.pop(name, None)
        message.properties[props.TRANSACTION_PREPARED] = "true"
        message.properties[props.PRODUCER_GROUP] = self.options.group
        return half_request_builder(self._prepare_single(message, None, None))

    async def _send_half(self, message: Message) -> SendResult:
        build = self._prepare_half(message)
        return await self._send_with_retries(message, build, None, None, self.options.retry_times_when_send_failed)

    async def _local_state(
        self, message: Message, arg: object, result: SendResult
    ) -> tuple[LocalTransactionState, str | None]:
        if result.status is not SendStatus.SEND_OK:  # stored with a weaker guarantee: not worth a transaction
            return LocalTransactionState.ROLLBACK, f"half message stored with {result.status.value}"
        try:
            state = self.executor(self.namespace.unwrap_message(message), arg)  # the user's topic
            if inspect.isawaitable(state):
                state = await state
            return _checked_state(state), None
        except Exception as exc:
            return _failed("local transaction", message, exc)

    def end_request(
        self, result: SendResult, message: Message, state: LocalTransactionState, remark: str | None
    ) -> RemotingCommand:
        """END_TRANSACTION for a half message this producer sent."""
        _, commit_log_offset = parse_offset_msg_id(result.offset_msg_id)
        uniq_key = message.properties[props.UNIQ_KEY]
        fields = EndTransactionRequestHeader.ext_fields(
            producer_group=self.options.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=str(state.value),
            from_transaction_check=False,
            msg_id=uniq_key,
            transaction_id=uniq_key,
            topic=self.namespace.wrap(message.topic),
            broker_name=result.message_queue.broker_name,
        )
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, fields)
        request.remark = remark
        return request

    async def _end_oneway(
        self, result: SendResult, message: Message, state: LocalTransactionState, remark: str | None
    ) -> None:
        instance = self.instance
        address = instance.broker_addr(result.message_queue.broker_name)
        try:
            await instance.remoting.invoke_oneway(address, self.end_request(result, message, state, remark))
        except PocketMQError as exc:  # the broker's check resolves it
            log.warning("event=end_transaction_not_sent broker=%s error=%s", address, exc)

    # -- checks -----------------------------------------------------------------------------------------------------
    def check_later(
        self, conn: RemotingConnection, check: CheckTransactionStateRequestHeader, message: MessageExt
    ) -> None:
        task = asyncio.get_running_loop().create_task(self._answer_check(conn, check, message))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(
        self, conn: RemotingConnection, check: CheckTransactionStateRequestHeader, message: MessageExt
    ) -> None:
        try:
            state = await self._run_checker(message)
            remark = None
        except Exception as exc:
            state, remark = _failed("transaction check", message, exc)
        fields = EndTransactionRequestHeader.ext_fields(
            producer_group=self.options.group,
            tran_state_table_offset=check.tran_state_table_offset,
            commit_log_offset=check.commit_log_offset,
            commit_or_rollback=str(state.value),
            from_transaction_check=True,
            msg_id=message.properties.get(props.UNIQ_KEY) or check.msg_id or check.transaction_id or "",
            transaction_id=check.transaction_id,
            topic=check.topic,
            broker_name=check.broker_name,
        )
        answer = RemotingCommand.request(RequestCode.END_TRANSACTION, fields)
        answer.remark = remark
        if conn.is_closed:
            log.warning("event=transaction_check_answer_lost reason=connection_closed msg_id=%s", message.msg_id)
            return
        conn.invoke_oneway(answer)

    async def _run_checker(self, message: MessageExt) -> LocalTransactionState:
        state = self.checker(self.namespace.unwrap_message(message))
        if inspect.isawaitable(state):
            state = await state
        return _checked_state(state)

    def __repr__(self) -> str:
        return f"<AsyncTransactionProducer group={self.options.group} started={self._started}>"


def half_request_builder(build_plain):
    """The builder of a half message's SEND_MESSAGE_V2, from the builder of the plain send: the prepared flag set."""

    def build(mq):
        request = build_plain(mq)
        request.ext_fields["f"] = str(int(request.ext_fields["f"]) | SYSFLAG_TRANSACTION_PREPARED)
        return request

    return build


class _CheckDispatcher:
    """An instance's handler of CHECK_TRANSACTION_STATE: to its producer of the body's ``PGROUP`` (RocketMQ: a group
    this process has no producer of is ignored)."""

    def __init__(self) -> None:
        self.producers: dict[str, AsyncTransactionProducer] = {}

    def __call__(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        read = read_check(conn, request)
        if read is None:
            return None
        check, message = read
        group = message.properties.get(props.PRODUCER_GROUP, "")
        producer = self.producers.get(group)
        if producer is None:
            log.info("event=transaction_check_ignored reason=no_producer_of_group group=%s", group)
            return None
        producer.check_later(conn, check, message)
        return None  # a check is oneway: the answer is a request of its own


def read_check(
    conn: RemotingConnection, request: RemotingCommand
) -> tuple[CheckTransactionStateRequestHeader, MessageExt] | None:
    """A CHECK_TRANSACTION_STATE's header and half message (body inflated); None (logged) when unreadable."""
    try:
        check = CheckTransactionStateRequestHeader.parse(request.ext_fields)
        message = decode_record(request.body)[0]
    except (PocketMQError, RecordFormatError, UnicodeDecodeError, ValueError) as exc:
        log.warning("event=transaction_check_unreadable from=%s error=%s", conn.remote_address, exc)
        return None
    if message.sys_flag & SYSFLAG_COMPRESSED:
        message.body = message.decompressed_body()
        message.sys_flag &= ~SYSFLAG_COMPRESSED
    return check, message


def _dispatcher_of(instance: ClientInstance) -> _CheckDispatcher:
    dispatcher = instance.request_handlers.get(RequestCode.CHECK_TRANSACTION_STATE)
    if not isinstance(dispatcher, _CheckDispatcher):
        dispatcher = instance.request_handlers[RequestCode.CHECK_TRANSACTION_STATE] = _CheckDispatcher()
    return dispatcher


def _checked_state(state: object) -> LocalTransactionState:
    if not isinstance(state, LocalTransactionState):
        raise ClientError(f"a transaction executor or checker must return a LocalTransactionState, not {state!r}")
    return state


def _failed(what: str, message: Message, exc: Exception) -> tuple[LocalTransactionState, str]:
    log.warning("event=transaction_callback_failed what=%s msg_id=%s error=%r", what, message.uniq_key, exc)
    return LocalTransactionState.UNKNOWN, f"{what} raised {type(exc).__name__}: {exc}"[:_REMARK_MAX_CHARS]


class TransactionProducer(Producer):
    """The synchronous transactional producer: the half message's send and the END_TRANSACTION travel on the
    calling thread's blocking connection, the executor runs in the calling thread, the checker on a pool of
    ``check_threads`` threads.

    >>> def execute(msg, order):
    ...     db.insert(order)             # the local transaction
    ...     return LocalTransactionState.COMMIT
    >>> def check(msg):
    ...     return LocalTransactionState.COMMIT if db.has(msg.keys[0]) else LocalTransactionState.ROLLBACK
    >>> with TransactionProducer(config, ProducerOptions(group="orders-tx"), executor=execute, checker=check,
    ...                          topics=["orders"]) as producer:
    ...     result = producer.send_in_transaction(Message.create("orders", b"...", keys="o-1"), order)
    """

    def __init__(
        self,
        config: ClientConfig | None = None,
        options: ProducerOptions | None = None,
        *,
        executor: Executor,
        checker: Checker,
        topics: Sequence[str] = (),
        selector: QueueSelector | None = None,
        check_threads: int = CHECK_THREADS,
    ):
        self._check_pool = concurrent.futures.ThreadPoolExecutor(check_threads, thread_name_prefix="pocketmq-tx-check")
        pool = self._check_pool

        async def check_in_pool(message: MessageExt) -> object:
            return await asyncio.get_running_loop().run_in_executor(pool, checker, message)

        core = AsyncTransactionProducer(
            config, options, executor=executor, checker=check_in_pool, topics=topics, selector=selector
        )
        super().__init__(core=core)

    def send_in_transaction(self, message: Message, arg: object = None) -> TransactionSendResult:
        self._loop.refuse_own_thread()
        core: AsyncTransactionProducer = self.core
        build = core._prepare_half(message)
        result = _run_inline(
            core._send_with_retries(message, build, None, None, core.options.retry_times_when_send_failed, io=self._io)
        )
        state, remark = _run_inline(core._local_state(message, arg, result))
        address = core.instance.broker_addr(result.message_queue.broker_name)
        try:
            self._channels.invoke_oneway(
                address, core.end_request(result, message, state, remark), core.options.send_timeout_s
            )
        except PocketMQError as exc:  # the broker's check resolves it
            log.warning("event=end_transaction_not_sent broker=%s error=%s", address, exc)
        return TransactionSendResult(result, message.properties[props.UNIQ_KEY], state)

    def shutdown(self) -> None:
        try:
            super().shutdown()
        finally:
            self._check_pool.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return f"<TransactionProducer {self.core!r}>"
