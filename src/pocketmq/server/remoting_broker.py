"""The broker's remoting front end: request codes -> broker services, replies in RocketMQ's shapes.

``build_broker_router(broker)`` returns the handler of every connection of the broker's remoting port. This
module serves messaging (send, pull, offsets, heartbeats and the consumer list, message lookup); the admin
codes live in ``remoting_admin``. docs/protocol.md lists each code with its fields.

Rules every handler follows:

- header fields are parsed into typed headers (``broker_headers``) before any work: read leniently, range-
  checked as RocketMQ's Java types; a missing or bad one is INVALID_PARAMETER with a remark naming it, and
  JSON bodies are depth-bounded (``remoting_headers.json_body``);
- the router turns a service error into a reply with its response code (``protocol.error_codes``), and any
  unexpected exception into SYSTEM_ERROR, so nothing a client sends takes the server down;
- until ``Broker.start`` has returned, and after shutdown begins, every request gets SERVICE_NOT_AVAILABLE;
- the send and pull paths do no per-message logging and no copies beyond decoding: a pull reply body is the
  stored records joined once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from pocketmq.broker.consumers import Notification
from pocketmq.broker.gray import ensure_gray_retry_queues, notify_group_once_routed
from pocketmq.broker.gray_split import held_queues
from pocketmq.broker.messages import SendRequest, SendResult
from pocketmq.broker.retry_topic import ensure_retry_topic
from pocketmq.cluster.escape import ESCAPE_REPLY_MARGIN_MS, arrived_too_late
from pocketmq.common.dead_letter_reference import REFERENCE_TOPIC
from pocketmq.common.errors import (
    BadRequestError,
    IllegalMessageError,
    ServiceNotAvailableError,
)
from pocketmq.common.gray import is_gray_client
from pocketmq.common.message import MessageExt, parse_offset_msg_id
from pocketmq.common.properties import decode_properties
from pocketmq.common.record import RecordFormatError, encode_record
from pocketmq.common.topic import TOOLS_CONSUMER_GROUP, revive_topic
from pocketmq.protocol.batch_codec import decode_batch
from pocketmq.protocol.codes import ESCAPE_PUT_MESSAGE, RequestCode, ResponseCode
from pocketmq.protocol.command import FLAG_RESPONSE, SERIALIZE_JSON, RemotingCommand, encode_frame
from pocketmq.protocol.remoting_headers import host_port, json_body, json_bytes
from pocketmq.protocol.request_headers import (
    QUERY_MESSAGE_MAX_NUMS,
    EscapePutMessageRequestHeader,
    GroupRequestHeader,
    PullMessageRequestHeader,
    PullSysFlag,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
    send_header,
)
from pocketmq.protocol.transport import RemotingConnection, RequestRouter
from pocketmq.runtime.periodic import spawn_watched
from pocketmq.server.heartbeat_body import check_client_from_json, heartbeat_from_json
from pocketmq.server.remoting_access import RemotingAccessGate
from pocketmq.server.remoting_admin import AdminHandlers
from pocketmq.server.remoting_auth_admin import AuthAdminHandlers
from pocketmq.server.remoting_consumer_admin import ConsumerAdminHandlers
from pocketmq.server.remoting_gray import GrayHandlers
from pocketmq.server.remoting_ha import HaHandlers
from pocketmq.server.remoting_pop import PopHandlers
from pocketmq.server.remoting_recall import RecallHandlers
from pocketmq.server.remoting_retry import RetryHandlers
from pocketmq.server.remoting_stages import StageOffsetHandlers
from pocketmq.server.remoting_transaction import TransactionHandlers
from pocketmq.server.request_metrics import expose_request_latency
from pocketmq.store.api import PutStatus

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

_SEND_CODE_OF_PUT = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
_MSG_REGION = "DefaultRegion"  # RocketMQ's region of a send reply (no regions here)
_CLOSE_HOOK = "pocketmq.broker.close_hook"
_BORN_HOST = "pocketmq.broker.born_host"


class BrokerRequestRouter(RequestRouter):
    """A RequestRouter that answers SERVICE_NOT_AVAILABLE while its broker is not serving, and NO_PERMISSION to
    what access control refuses (``remoting_access``), before any handler sees it."""

    def __init__(self, broker: Broker) -> None:
        super().__init__()
        self._broker = broker
        access = broker.access
        self._gate = RemotingAccessGate(access, broker.config.cluster_name) if access.enabled else None

    def __call__(self, conn: RemotingConnection, request: RemotingCommand):
        if not self._broker.started:
            return _not_serving(request)
        if self._gate is not None:
            refusal = self._gate.refusal(conn, request)
            if refusal is not None:
                return refusal
        return super().__call__(conn, request)

    def serve_all(self, conn: RemotingConnection, requests: list[RemotingCommand]):
        if not self._broker.started:
            return [_not_serving(request) for request in requests]
        if self._gate is None:
            return super().serve_all(conn, requests)
        refusals = [self._gate.refusal(conn, request) for request in requests]
        if not any(refusals):
            return super().serve_all(conn, requests)
        served = iter(super().serve_all(conn, [r for r, refusal in zip(requests, refusals) if refusal is None]))
        return [refusal if refusal is not None else next(served) for refusal in refusals]


def _not_serving(request: RemotingCommand) -> RemotingCommand:
    return request.response(ResponseCode.SERVICE_NOT_AVAILABLE, remark="broker is starting or stopping")


def build_broker_router(broker: Broker) -> BrokerRequestRouter:
    """The request handler of the broker's remoting port; also installs the consumer-change notifier."""

    router = BrokerRequestRouter(broker)
    expose_request_latency(router, broker.metrics)
    MessagingHandlers(broker).register(router)
    AdminHandlers(broker).register(router)
    AuthAdminHandlers(broker).register(router)
    PopHandlers(broker).register(router)
    RetryHandlers(broker).register(router)
    HaHandlers(broker).register(router)
    StageOffsetHandlers(broker).register(router)
    GrayHandlers(broker).register(router)
    TransactionHandlers(broker).register(router)
    RecallHandlers(broker).register(router)
    ConsumerAdminHandlers(broker).register(router)
    return router


class MessagingHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        broker.consumers.add_notifier(self._notify_consumer_ids_changed)
        self._notify_tasks: set[asyncio.Task] = set()  # held: the loop keeps only weak references to tasks

    def register(self, router: RequestRouter) -> None:
        for code, handler in (
            (ESCAPE_PUT_MESSAGE, self.escape_put_message),
            (RequestCode.PULL_MESSAGE, self.pull_message),
            (RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset),
            (RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset),
            (RequestCode.GET_MIN_OFFSET, self.get_min_offset),
            (RequestCode.GET_MAX_OFFSET, self.get_max_offset),
            (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset_by_timestamp),
            (RequestCode.GET_EARLIEST_MSG_STORETIME, self.get_earliest_msg_storetime),
            (RequestCode.HEART_BEAT, self.heart_beat),
            (RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config),
            (RequestCode.UNREGISTER_CLIENT, self.unregister_client),
            (RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.get_consumer_list_by_group),
            (RequestCode.VIEW_MESSAGE_BY_ID, self.view_message_by_id),
            (RequestCode.QUERY_MESSAGE, self.query_message),
        ):
            router.register(code, handler)
        send_messages = self.send_messages  # one bound method: a run of mixed send codes is one batch (serve_all)
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            router.register(code, self.send_message, send_messages)

    # -- send ---------------------------------------------------------------------------------------------------
    def escape_put_message(self, conn: RemotingConnection, request: RemotingCommand):
        """ESCAPE_PUT_MESSAGE (PocketMQ, cluster/escape.py): a slave acting as master writes here; a SEND_MESSAGE_V2
        that may also write this broker's revive topic (escaped CKs and ACKs) or its dead-letter references' topic
        (what the slave's revive could not read). One that comes too late for its answer to reach the sender in
        time is refused: the sender counts it as failed and writes it again."""
        deadline_ms = EscapePutMessageRequestHeader.parse(request.ext_fields).deadline_ms
        if arrived_too_late(deadline_ms, self._broker.clock.now_ms()):
            raise ServiceNotAvailableError(
                f"escaped write arrived after its sender's deadline {deadline_ms} "
                f"(less {ESCAPE_REPLY_MARGIN_MS} ms for the answer): not stored"
            )
        reference = send_header(request.ext_fields).topic == REFERENCE_TOPIC
        escaped_to = REFERENCE_TOPIC if reference else revive_topic(self._broker.config.cluster_name)
        return self.send_message(conn, request, system_topic=escaped_to)

    def send_message(self, conn: RemotingConnection, request: RemotingCommand, system_topic: str | None = None):
        """SEND_MESSAGE (full field names), SEND_MESSAGE_V2 (one-letter names), SEND_BATCH_MESSAGE. The reply comes
        at once unless the send must wait (SYNC_FLUSH, idempotent messages): then an awaitable of it.
        ``system_topic``: the one system topic this request may write (escaped writes)."""
        outcome = self.send_messages(conn, [request], system_topic)[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def send_messages(
        self, conn: RemotingConnection, requests: list[RemotingCommand], system_topic: str | None = None
    ) -> list:
        """``send_message`` for the send requests of one read: their messages share one store append
        (``MessageService.send_all_nowait``); each request gets its own reply or error."""
        born_host = self._born_host(conn)
        outcomes: list = [None] * len(requests)
        sends: list[SendRequest] = []
        sent: list[int] = []  # index in requests of each send
        for i, request in enumerate(requests):
            try:
                sends.append(_send_request(request, born_host, system_topic))
                sent.append(i)
            except Exception as exc:
                outcomes[i] = exc
        for i, outcome in zip(sent, self._broker.messages.send_all_nowait(sends) if sends else ()):
            if isinstance(outcome, Exception):
                outcomes[i] = outcome
            elif isinstance(outcome, list):
                outcomes[i] = _send_reply(requests[i], outcome)
            else:
                outcomes[i] = _send_reply_when_stored(requests[i], outcome)
        return outcomes

    @staticmethod
    def _born_host(conn: RemotingConnection) -> tuple[str, int]:
        born_host = conn.attributes.get(_BORN_HOST)
        if not isinstance(born_host, tuple):  # the first send on this connection
            born_host = conn.attributes[_BORN_HOST] = host_port(conn.remote_address)
        return born_host

    # -- pull ---------------------------------------------------------------------------------------------------
    async def pull_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = PullMessageRequestHeader.parse(request.ext_fields)
        group, topic, queue_id = h.consumer_group, h.topic, h.queue_id
        broker = self._broker
        if h.sys_flag & PullSysFlag.SUBSCRIPTION:
            read_filter = broker.filters.read_filter(h.expression_type, h.subscription)
        else:  # the client relies on the subscription it gave in its heartbeat
            read_filter = broker.filters.read_filter(*self._heartbeat_subscription(group, topic))
        # A piggy-backed commit past the queue's end is not stored (nor is a negative one): the pull is served
        # anyway, and its PULL_OFFSET_MOVED tells a client that far ahead where the queue ends.
        if (
            h.sys_flag & PullSysFlag.COMMIT_OFFSET
            and 0 <= h.commit_offset <= broker.store.max_queue_offset(topic, queue_id)
            and not broker.offset_fences.fenced(group, topic, queue_id, broker.clock.monotonic_ms())
        ):
            broker.offsets.commit(group, topic, queue_id, h.commit_offset)
        suspend_ms = h.suspend_timeout_ms if h.sys_flag & PullSysFlag.SUSPEND else 0
        outcome = await broker.messages.pull(
            group,
            topic,
            queue_id,
            h.queue_offset,
            h.max_msg_nums,
            read_filter=read_filter,
            suspend_timeout_ms=suspend_ms,
        )
        return request.response(
            outcome.status.response_code,
            {
                "nextBeginOffset": outcome.next_begin_offset,
                "minOffset": outcome.min_offset,
                "maxOffset": outcome.max_offset,
                "suggestWhichBrokerId": 0,
            },
            body=b"".join(outcome.records) if outcome.records else b"",
        )

    def _heartbeat_subscription(self, group: str, topic: str) -> tuple[str, str]:
        """(expression type, expression) of the group's subscription to ``topic``; every tag when none."""
        info = self._broker.consumers.table.group_info(group)
        subscription = info.subscriptions.get(topic) if info else None
        return (subscription.expression_type, subscription.expression) if subscription else ("TAG", "*")

    # -- offsets --------------------------------------------------------------------------------------------------
    async def query_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.parse(request.ext_fields)
        group, topic, queue_id = h.consumer_group, h.topic, h.queue_id
        offset = self._broker.offsets.query(group, topic, queue_id)
        if offset is None:
            # RocketMQ answers 0 for a group that never committed while the queue still starts at 0: some 4.x
            # clients cannot choose where a new group starts and rely on it to see the first messages.
            if h.set_zero_if_not_found and self._broker.store.min_queue_offset(topic, queue_id) <= 0:
                offset = 0
            else:
                return request.response(
                    ResponseCode.QUERY_NOT_FOUND, remark=f"group {group} has no offset for {topic}/{queue_id}"
                )
        return request.response(ResponseCode.SUCCESS, {"offset": offset})

    async def update_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Negative offsets are ignored (4.x clients send -1 for nothing consumed yet); one past the queue's end
        is INVALID_PARAMETER: commits only move forward, so a stored one would hold the group there for good."""
        h = UpdateConsumerOffsetRequestHeader.parse(request.ext_fields)
        max_offset = self._broker.store.max_queue_offset(h.topic, h.queue_id)
        if h.commit_offset > max_offset:
            raise BadRequestError(
                f"header field commitOffset={h.commit_offset} is past the end of "
                f"{h.topic}/{h.queue_id} (max offset {max_offset})"
            )
        broker = self._broker
        if not broker.offset_fences.fenced(h.consumer_group, h.topic, h.queue_id, broker.clock.monotonic_ms()):
            broker.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)  # else: stale (offset_reset)
        return request.response(ResponseCode.SUCCESS)

    async def get_min_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.parse(request.ext_fields)
        return request.response(
            ResponseCode.SUCCESS, {"offset": self._broker.store.min_queue_offset(h.topic, h.queue_id)}
        )

    async def get_max_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.parse(request.ext_fields)
        return request.response(
            ResponseCode.SUCCESS, {"offset": self._broker.store.max_queue_offset(h.topic, h.queue_id)}
        )

    async def search_offset_by_timestamp(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.parse(request.ext_fields)
        offset = self._broker.store.queue_offset_by_time(h.topic, h.queue_id, h.timestamp_ms)
        return request.response(ResponseCode.SUCCESS, {"offset": offset})

    async def get_earliest_msg_storetime(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.parse(request.ext_fields)
        return request.response(
            ResponseCode.SUCCESS, {"timestamp": self._broker.store.earliest_store_time_ms(h.topic, h.queue_id)}
        )

    # -- clients --------------------------------------------------------------------------------------------------
    async def check_client_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG: a 4.x consumer starting with an SQL92 subscription asks first and fails to start
        unless SUCCESS; a bad expression, or SQL92 with property filters off, is SUBSCRIPTION_PARSE_FAILED."""
        _group, subscription = check_client_from_json(json_body(request.body, "check client config"))
        self._broker.filters.check(subscription.expression_type, subscription.expression)
        return request.response(ResponseCode.SUCCESS)

    async def heart_beat(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        client_id, consumer_data, consumers, producer_groups = heartbeat_from_json(json_body(request.body, "heartbeat"))
        broker = self._broker
        grown: list[str] = []  # groups whose retry topic this heartbeat split
        for info in consumers:
            group_config = broker.groups.get_or_create(info.group)  # SUBSCRIPTION_GROUP_NOT_EXIST when off
            if info.group == TOOLS_CONSUMER_GROUP:
                continue  # a reader, never sent back a message: no retry topic
            retry_config = ensure_retry_topic(broker.topics, group_config)  # consumers pull it on their own
            # split the retry topic so gray retries stay gray (docs/gray.md)
            if is_gray_client(client_id) and ensure_gray_retry_queues(broker.topics, retry_config) != retry_config:
                grown.append(info.group)
        self._hook_close(conn)
        language, version, remote_address = request.language, request.version, conn.remote_address
        for info, obj in zip(consumers, consumer_data):
            broker.consumers.heartbeat(
                info.group,
                client_id,
                conn,
                info=info,
                language=language,
                version=version,
                remote_address=remote_address,
            )
            broker.gray.record_held(info.group, client_id, held_queues(obj, broker.broker_name))  # group describe
        for group in grown:  # after the heartbeat, so the newcomer is a member and is told too
            task = spawn_watched(
                notify_group_once_routed(broker.register_now, broker.consumers, group), f"broker-gray-notify-{group}"
            )
            self._notify_tasks.add(task)
            task.add_done_callback(self._notify_tasks.discard)
        for group in producer_groups:
            broker.producers.heartbeat(
                group, client_id, conn, language=language, version=version, remote_address=remote_address
            )
        return request.response(ResponseCode.SUCCESS)

    def _hook_close(self, conn: RemotingConnection) -> None:
        if conn.attributes.get(_CLOSE_HOOK):
            return
        conn.attributes[_CLOSE_HOOK] = True
        broker = self._broker

        def closed(c: RemotingConnection) -> None:
            broker.consumers.connection_closed(c)
            broker.producers.connection_closed(c)

        conn.on_close(closed)

    async def unregister_client(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = UnregisterClientRequestHeader.parse(request.ext_fields)
        if h.producer_group:
            self._broker.producers.unregister(h.producer_group, h.client_id)
        if h.consumer_group:
            self._broker.consumers.unregister(h.consumer_group, h.client_id)
        return request.response(ResponseCode.SUCCESS)

    async def get_consumer_list_by_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        # An empty list is SUCCESS too (RocketMQ says SYSTEM_ERROR): an error at startup stops some clients for good.
        group = GroupRequestHeader.parse(request.ext_fields).consumer_group
        return request.response(
            ResponseCode.SUCCESS, body=json_bytes({"consumerIdList": self._broker.consumers.client_ids(group)})
        )

    def _notify_consumer_ids_changed(self, notification: Notification) -> None:
        conn = notification.connection
        if not isinstance(conn, RemotingConnection) or conn.is_closed:
            return  # another front end's client, or gone already
        config = self._broker.groups.get(notification.group)
        if config is not None and not config.notify_consumer_ids_changed_enable:
            return
        conn.invoke_oneway(
            RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": notification.group})
        )

    # -- message lookup ---------------------------------------------------------------------------------------------
    async def view_message_by_id(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """By commit log offset (RocketMQ's ``offset``), or by offset message id (PocketMQ's ``msgId``)."""
        h = ViewMessageRequestHeader.parse(request.ext_fields)
        if h.msg_id is not None:
            try:
                _, phys_offset = parse_offset_msg_id(h.msg_id)
            except ValueError as exc:
                raise BadRequestError(f"header field msgId={h.msg_id!r}: {exc}") from None
        elif h.offset is None:
            raise BadRequestError("header field offset is missing")
        else:
            phys_offset = h.offset
        message = self._broker.store.read_message(phys_offset) if phys_offset >= 0 else None
        if message is None:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, remark=f"no message at commit log offset {phys_offset}"
            )
        return request.response(ResponseCode.SUCCESS, body=encode_record(message))

    async def query_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """By key (``KEYS``), or by the producer's id when ``_UNIQUE_KEY_QUERY`` is true; records back to back."""
        h = QueryMessageRequestHeader.parse(request.ext_fields)
        topic, key = h.topic, h.key
        max_nums = min(h.max_num, QUERY_MESSAGE_MAX_NUMS)
        store = self._broker.store
        if h.unique_key_query:
            messages = store.query_by_uniq_key(topic, key)
        else:
            messages = store.query_by_key(topic, key, max_nums, h.begin_timestamp_ms, h.end_timestamp_ms)
        if not messages:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, remark=f"no message of topic {topic} with key {key!r} in that time range"
            )
        messages = messages[:max_nums]
        last = max(messages, key=lambda m: m.phys_offset)
        return request.response(
            ResponseCode.SUCCESS,
            {"indexLastUpdateTimestamp": last.store_timestamp_ms, "indexLastUpdatePhyoffset": last.phys_offset},
            body=b"".join(encode_record(m) for m in messages),
        )


async def _send_reply_when_stored(request: RemotingCommand, outcome: Awaitable[list[SendResult]]) -> RemotingCommand:
    return _send_reply(request, await outcome)


def _send_request(request: RemotingCommand, born_host: tuple[str, int], system_topic: str | None) -> SendRequest:
    """The send a SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request asks for (its header checked)."""
    h = send_header(request.ext_fields)
    topic = h.topic
    batch = request.code == RequestCode.SEND_BATCH_MESSAGE or h.batch
    if batch:
        try:
            messages = decode_batch(request.body, topic)
        except (RecordFormatError, UnicodeDecodeError) as exc:
            raise IllegalMessageError(f"batch body does not parse: {exc}") from None
    else:
        # topic, body, properties, flag positionally and the rest set after: ~0.25 µs less than by keywords
        msg = MessageExt(topic, request.body, decode_properties(h.properties), h.flag)
        msg.sys_flag = h.sys_flag
        msg.reconsume_times = h.reconsume_times
        messages = [msg]
    queue_id = h.queue_id
    return SendRequest(
        messages,
        topic,
        queue_id if queue_id >= 0 else None,
        born_host,
        h.born_timestamp_ms,
        h.producer_group,
        None,
        batch,
        system_topic,
    )


def _send_reply(request: RemotingCommand, results: list[SendResult]) -> RemotingCommand:
    first = results[0]
    code = ResponseCode.SUCCESS
    for result in results:  # the weakest guarantee of the batch is the answer
        status_code = _SEND_CODE_OF_PUT.get(result.status, ResponseCode.SUCCESS)
        if status_code != ResponseCode.SUCCESS:
            code = status_code
    msg_id = first.offset_msg_id if len(results) == 1 else ",".join(r.offset_msg_id for r in results)
    # A half message: its END_TRANSACTION names it by this id; a delayed one: its handle recalls it (5.x brokers
    # send both).
    if first.transaction_id or first.recall_handle:
        special = {"transactionId": first.transaction_id} if first.transaction_id else {}
        if first.recall_handle and len(results) == 1:
            special["recallHandle"] = first.recall_handle
        return request.response(
            code,
            {
                "msgId": msg_id,
                "queueId": first.queue_id,
                "queueOffset": first.queue_offset,
                **special,
                "MSG_REGION": _MSG_REGION,
                "TRACE_ON": "true",
            },
        )
    # what request.response(code, fields) gives, built directly (the fields are strings already) and mostly
    # positionally (code, ext fields, body, opaque, flag): ~1 µs less per reply
    fields = {
        "msgId": msg_id,
        "queueId": str(first.queue_id),
        "queueOffset": str(first.queue_offset),
        "MSG_REGION": _MSG_REGION,
        "TRACE_ON": "true",
    }
    return _SendReply(int(code), fields, b"", request.opaque, FLAG_RESPONSE, serialize_type=request.serialize_type)


class _SendReply(RemotingCommand):
    """A send's reply (``_send_reply``), whose JSON header is one format of the parts that vary. Every send reply
    has the same header fields and ext field names, in the same order, and values that need no JSON escaping
    (hex message ids, decimal numbers), so nothing is quoted one by one as the generic encoder does: ~1 µs
    less per reply, the same bytes (tests/unit/test_send_reply.py)."""

    __slots__ = ()

    def encode(self) -> bytes:
        if self.serialize_type != SERIALIZE_JSON or self.remark is not None:
            return RemotingCommand.encode(self)
        ext = self.ext_fields
        header = (
            f'{{"code":{self.code:d},"language":"{self.language}","version":{self.version:d},'
            f'"opaque":{self.opaque:d},"flag":{self.flag:d},"serializeTypeCurrentRPC":"JSON",'
            f'"extFields":{{"msgId":"{ext["msgId"]}","queueId":"{ext["queueId"]}",'
            f'"queueOffset":"{ext["queueOffset"]}","MSG_REGION":"{_MSG_REGION}","TRACE_ON":"true"}}}}'
        ).encode()
        return encode_frame(SERIALIZE_JSON, header, self.body)
