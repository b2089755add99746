"""RocketMQ 5 gRPC v2 (``apache.rocketmq.v2``) <-> PocketMQ domain conversions.

This module and its siblings under ``pocketmq.protocol`` are the only importers of the protobuf modules of
the official client package; the gRPC servicer (``pocketmq.server.grpc_server``) reads requests through the
``decode_*`` functions and answers with the ``*_response`` builders, so it never touches a protobuf class.

What the official clients need from these messages is in ../shared/reference/grpc-v2-protocol.md; the
parts that make them hang or fail when missing are called out where they are built.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass, field

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as spb_grpc

from pocketmq.common import properties as props
from pocketmq.common.message import Message, MessageExt
from pocketmq.common.topic import DLQ_GROUP_TOPIC_PREFIX, MessageType
from pocketmq.protocol.codes import V2StatusCode

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"
add_servicer_to_server = spb_grpc.add_MessagingServiceServicer_to_server
# The stub is for tests and tools that talk to a PocketMQ gRPC port; the broker never dials gRPC itself.
MessagingServiceStub = spb_grpc.MessagingServiceStub

_PB_TYPE_TO_DOMAIN = {
    pb.NORMAL: MessageType.NORMAL,
    pb.FIFO: MessageType.FIFO,
    pb.DELAY: MessageType.DELAY,
    pb.TRANSACTION: MessageType.TRANSACTION,
    pb.PRIORITY: MessageType.PRIORITY,
    pb.LITE: MessageType.LITE,
}
_DOMAIN_TYPE_TO_PB = {v: k for k, v in _PB_TYPE_TO_DOMAIN.items()}
# A MIXED topic's (LITE needs a LITE parent).
_ALL_ACCEPTED_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION, pb.PRIORITY)

# The producer retry policy the Apache proxy hands out; Node's client throws without an exponential one.
PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1000
PRODUCER_BACKOFF_MULTIPLIER = 2.0
# The consumer retry policy (the proxy's default: customized, 17 attempts); Python honours only customized.
CONSUMER_MAX_ATTEMPTS = 17
CONSUMER_BACKOFF_SECONDS = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
CONSUMER_RECEIVE_BATCH_SIZE = 32  # Node uses it raw: 0 would break it
CONSUMER_LONG_POLLING_TIMEOUT_S = 20  # whole seconds: Python drops the nanos


# ---------------------------------------------------------------------------------------------- requests


@dataclass(slots=True)
class InboundMessage:
    """A message as a v2 producer sent it: decoded, not yet validated.

    ``message_type`` is the wire enum's name (``NORMAL`` ... ``LITE``, ``MESSAGE_TYPE_UNSPECIFIED``), kept raw
    so validation can name what it refuses. ``tag`` and ``message_group`` are None when absent or empty (an
    empty one means "none" to the proxy too).
    """

    topic: str
    body: bytes
    message_id: str
    message_type: str = "NORMAL"
    tag: str | None = None
    keys: list[str] = field(default_factory=list)
    message_group: str | None = None
    delivery_timestamp_ms: int | None = None
    born_timestamp_ms: int | None = None
    born_host: str = ""
    body_encoding: str = "IDENTITY"
    user_properties: dict[str, str] = field(default_factory=dict)
    orphaned_recovery_ms: int | None = None  # a TRANSACTION message's check immunity (no official client sets it)
    priority: int | None = None  # a PRIORITY message's level
    lite_topic: str | None = None  # a LITE message's lite topic under its (parent) topic

    @property
    def domain_type(self) -> MessageType | None:
        """The PocketMQ message type, or None for one PocketMQ does not know (unspecified)."""
        domain = MessageType.__members__.get(self.message_type)
        return None if domain is MessageType.MIXED else domain

    def to_domain(self) -> Message:
        """The message to store: system fields become RocketMQ's properties, the message id is UNIQ_KEY as sent."""
        properties = dict(self.user_properties)
        if self.tag is not None:
            properties[props.TAGS] = self.tag
        if self.keys:
            properties[props.KEYS] = " ".join(self.keys)
        properties[props.UNIQ_KEY] = self.message_id
        if self.message_group is not None:
            properties[props.SHARDING_KEY] = self.message_group
        if self.delivery_timestamp_ms is not None:
            properties[props.TIMER_DELIVER_MS] = str(self.delivery_timestamp_ms)
        if self.priority is not None:
            properties[props.PRIORITY] = str(self.priority)
        if self.lite_topic is not None:
            properties[props.LITE_TOPIC] = self.lite_topic
        return Message(topic=self.topic, body=self.body, properties=properties)


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """What a client announced on its Telemetry stream: its kind, group and topics."""

    client_type: str  # PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER ... (the wire enum's name)
    group: str | None
    topics: tuple[str, ...]
    # a consumer's (topic, filter type TAG|SQL, expression) per subscription
    filters: tuple[tuple[str, str, str], ...] = ()

    @property
    def is_consumer(self) -> bool:
        return self.client_type.endswith("CONSUMER")


def resource_name(resource) -> str:
    """The name of a v2 ``Resource`` (namespaces are ignored, as the Apache proxy ignores them)."""
    return resource.name


def decode_route_request(request) -> tuple[str, list[tuple[str, int]], bool]:
    """(topic, the addresses the client dialled, whether they are a DOMAIN_NAME) of a QueryRouteRequest."""
    addresses = [(a.host, a.port) for a in request.endpoints.addresses]
    return request.topic.name, addresses, request.endpoints.scheme == pb.DOMAIN_NAME


def decode_send_request(request) -> list[InboundMessage]:
    return [decode_message(m) for m in request.messages]


def decode_message(message) -> InboundMessage:
    sp = message.system_properties
    return InboundMessage(
        topic=message.topic.name,
        body=message.body,
        message_id=sp.message_id,
        message_type=_enum_name(pb.MessageType, sp.message_type),
        tag=sp.tag if sp.HasField("tag") and sp.tag != "" else None,
        keys=list(sp.keys),
        message_group=sp.message_group if sp.HasField("message_group") and sp.message_group != "" else None,
        delivery_timestamp_ms=_timestamp_ms(sp.delivery_timestamp) if sp.HasField("delivery_timestamp") else None,
        born_timestamp_ms=_timestamp_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else None,
        born_host=sp.born_host,
        body_encoding=_enum_name(pb.Encoding, sp.body_encoding),
        user_properties=dict(message.user_properties),
        orphaned_recovery_ms=(
            sp.orphaned_transaction_recovery_duration.ToMilliseconds()
            if sp.HasField("orphaned_transaction_recovery_duration")
            else None
        ),
        priority=sp.priority if sp.HasField("priority") else None,
        lite_topic=sp.lite_topic if sp.HasField("lite_topic") and sp.lite_topic != "" else None,
    )


def decode_heartbeat(request) -> tuple[str, str | None]:
    """(client type name, group or None) of a HeartbeatRequest."""
    group = request.group.name if request.HasField("group") and request.group.name else None
    return _client_type_name(request.client_type), group


def group_and_topic(request) -> tuple[str | None, str | None]:
    """The consumer group and topic a consumer RPC or EndTransaction names (access control's resources)."""
    fields = request.DESCRIPTOR.fields_by_name
    group = request.group.name if "group" in fields and request.HasField("group") else None
    if "message_queue" in fields:  # ReceiveMessage
        topic = request.message_queue.topic.name if request.HasField("message_queue") else None
    else:
        topic = request.topic.name if "topic" in fields and request.HasField("topic") else None
    return group or None, topic or None


def decode_termination(request) -> str | None:
    return request.group.name if request.HasField("group") and request.group.name else None


def telemetry_kind(command) -> str:
    """Which field of a TelemetryCommand is set: ``settings``, ``thread_stack_trace`` ... or ``""``."""
    return command.WhichOneof("command") or ""


def decode_client_settings(command) -> ClientSettings:
    settings = command.settings
    kind = settings.WhichOneof("pub_sub")
    if kind == "publishing":
        return ClientSettings(
            _client_type_name(settings.client_type), None, tuple(t.name for t in settings.publishing.topics)
        )
    if kind == "subscription":
        sub = settings.subscription
        group = sub.group.name if sub.HasField("group") and sub.group.name else None
        filters = tuple(
            (
                e.topic.name,
                pb.FilterType.Name(e.expression.type) if e.expression.type else "TAG",
                e.expression.expression,
            )
            for e in sub.subscriptions
        )
        return ClientSettings(_client_type_name(settings.client_type), group, tuple(f[0] for f in filters), filters)
    return ClientSettings(_client_type_name(settings.client_type), None, ())


# --------------------------------------------------------------------------------------------- responses


def decode_sync_lite_request(request) -> tuple[str, str, str, set[str]]:
    """(action name, parent topic, group, lite topics) of a SyncLiteSubscriptionRequest.

    The official Python client (5.1.2) sends ``subscribe_lite(name)`` as a PARTIAL_ADD whose lite topics are
    the name's characters, in order (it extends the repeated field with the string). A PARTIAL_ADD of two or
    more one-character names is read as that one name: joined back, it is what the client subscribed (and
    keeps in the set its periodic COMPLETE_ADD sends); no other client sends such a request for one-character
    lite topics in practice.
    """
    action = _enum_name(pb.LiteSubscriptionAction, request.action)
    names = list(request.lite_topic_set)
    if action == "PARTIAL_ADD" and len(names) > 1 and all(len(n) == 1 for n in names):
        names = ["".join(names)]
    return action, request.topic.name, request.group.name, set(names)


def sync_lite_response():
    return spb.SyncLiteSubscriptionResponse(status=ok_status())


def status(code: int, message: str = ""):
    """A v2 Status; ``message`` defaults to the code's name (as the proxy answers)."""
    return pb.Status(code=code, message=message or V2StatusCode(code).name)


def ok_status():
    return status(V2StatusCode.OK)


@dataclass(frozen=True, slots=True)
class RouteQueue:
    """One queue of a QueryRoute answer: which broker holds it and where that broker's gRPC port is."""

    topic: str
    queue_id: int
    broker_name: str
    endpoints: tuple[tuple[str, int], ...]  # the broker's gRPC addresses
    readable: bool = True
    writable: bool = True
    message_type: MessageType = MessageType.MIXED
    domain_name: bool = False  # the endpoints are host names (an echo of a client's DOMAIN_NAME access point)


def route_response(queues: list[RouteQueue]):
    resp = spb.QueryRouteResponse(status=ok_status())
    endpoints_cache: dict[tuple, object] = {}
    for q in queues:
        endpoints = endpoints_cache.get((q.endpoints, q.domain_name))
        if endpoints is None:
            endpoints = endpoints_cache[(q.endpoints, q.domain_name)] = make_endpoints(q.endpoints, q.domain_name)
        mq = resp.message_queues.add()
        mq.topic.name = q.topic
        mq.id = q.queue_id
        mq.permission = _permission(q.readable, q.writable)
        # Broker id 0: the Python client keeps only queues of "master" brokers.
        mq.broker.name = q.broker_name
        mq.broker.id = 0
        mq.broker.endpoints.CopyFrom(endpoints)
        mq.accept_message_types.extend(accepted_message_types(q.message_type))
    return resp


def route_error_response(code: int, message: str):
    return spb.QueryRouteResponse(status=status(code, message))


def accepted_message_types(message_type: MessageType) -> tuple[int, ...]:
    if message_type is MessageType.MIXED:
        return _ALL_ACCEPTED_TYPES
    return (_DOMAIN_TYPE_TO_PB[message_type],)


def make_endpoints(addresses: tuple[tuple[str, int], ...] | list[tuple[str, int]], domain_name: bool = False):
    """A v2 Endpoints: IPv4/IPv6 when every host is an address literal, else DOMAIN_NAME."""
    scheme = pb.DOMAIN_NAME if domain_name else _address_scheme([host for host, _ in addresses])
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=h, port=p) for h, p in addresses])


@dataclass(frozen=True, slots=True)
class SendEntry:
    """The outcome of one message of a SendMessage request."""

    code: int
    message: str = ""
    message_id: str = ""
    queue_offset: int = 0
    transaction_id: str = ""
    recall_handle: str = ""  # a delayed message's


def send_response(entries: list[SendEntry]):
    """Entries plus a top-level status: Node reads the entry's status, Python the top-level one.

    The top-level code is the entries' code when they agree, MULTIPLE_RESULTS when they do not (as the proxy).
    """
    resp = spb.SendMessageResponse()
    codes = set()
    for e in entries:
        resp.entries.add(
            status=status(e.code, e.message),
            message_id=e.message_id,
            transaction_id=e.transaction_id,
            offset=e.queue_offset,
            recall_handle=e.recall_handle,
        )
        codes.add(e.code)
    if len(codes) == 1:
        only = entries[0]
        resp.status.CopyFrom(status(only.code, only.message))
    elif codes:
        resp.status.CopyFrom(status(V2StatusCode.MULTIPLE_RESULTS))
    else:
        resp.status.CopyFrom(status(V2StatusCode.MESSAGE_CORRUPTED, "no message to send"))
    return resp


def send_error_response(code: int, message: str, message_count: int):
    """A refused request: one failed entry per message (Node reads entries), and the same top-level status."""
    return send_response([SendEntry(code, message)] * max(message_count, 1))


def heartbeat_response(code: int = V2StatusCode.OK, message: str = ""):
    return spb.HeartbeatResponse(status=status(code, message))


def termination_response(code: int = V2StatusCode.OK, message: str = ""):
    return spb.NotifyClientTerminationResponse(status=status(code, message))


def settings_reply(
    command,
    *,
    max_body_bytes: int,
    fifo: bool = False,
    consumer_max_attempts: int = CONSUMER_MAX_ATTEMPTS,
    consumer_backoff_seconds: tuple[int, ...] = CONSUMER_BACKOFF_SECONDS,
    metric_endpoint: tuple[str, int] | None = None,
    lite_subscription_quota: int = 0,
    max_lite_topic_size: int = 0,
):
    """The server's answer to a client's Settings: the client's own Settings echoed, completed per client kind.

    Python ignores Settings unless the status is OK; both clients reject every send when max_body_size is 0;
    Node's producer throws without an exponential backoff (reference §3). Consumers get their group's FIFO
    flag, max attempts (retry max times + 1) and the customized backoff a push consumer's nack uses as the
    message's next invisible duration (whole seconds: the Python client reads only the seconds), and the lite
    limits (the group's lite subscription quota, the longest lite topic name), which a lite consumer waits for.
    Client metrics are on, towards ``metric_endpoint`` (OTLP/gRPC), when it is given.
    """
    settings = pb.Settings()
    settings.CopyFrom(command.settings)
    kind = settings.WhichOneof("pub_sub")
    if kind == "publishing" or settings.client_type == pb.PRODUCER:
        settings.backoff_policy.Clear()
        settings.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
        exp = settings.backoff_policy.exponential_backoff
        exp.initial.FromMilliseconds(PRODUCER_BACKOFF_INITIAL_MS)
        exp.max.FromMilliseconds(PRODUCER_BACKOFF_MAX_MS)
        exp.multiplier = PRODUCER_BACKOFF_MULTIPLIER
        settings.publishing.max_body_size = max_body_bytes
        settings.publishing.validate_message_type = True
    elif kind == "subscription" or _client_type_name(settings.client_type).endswith("CONSUMER"):
        settings.backoff_policy.Clear()
        settings.backoff_policy.max_attempts = consumer_max_attempts
        for seconds in consumer_backoff_seconds:
            settings.backoff_policy.customized_backoff.next.add(seconds=seconds)
        sub = settings.subscription
        sub.fifo = fifo
        sub.receive_batch_size = CONSUMER_RECEIVE_BATCH_SIZE
        sub.long_polling_timeout.Clear()
        sub.long_polling_timeout.seconds = CONSUMER_LONG_POLLING_TIMEOUT_S
        sub.lite_subscription_quota = lite_subscription_quota
        sub.max_lite_topic_size = max_lite_topic_size
    settings.metric.Clear()
    settings.metric.on = metric_endpoint is not None  # on: the client starts an OTLP exporter to the endpoint
    if metric_endpoint is not None:
        settings.metric.endpoints.CopyFrom(make_endpoints([metric_endpoint]))
    return spb.TelemetryCommand(status=ok_status(), settings=settings)


def decode_recall_request(request) -> tuple[str, str]:
    """(topic, recall handle) of a RecallMessageRequest."""
    return resource_name(request.topic), request.recall_handle


def recall_response(message_id: str):
    return spb.RecallMessageResponse(status=ok_status(), message_id=message_id)


def telemetry_error(code: int, message: str):
    """A status-only command; used only to answer a malformed client command (never unsolicited: Node would
    reject its pending startup)."""
    return spb.TelemetryCommand(status=status(code, message))


def error_response(method: str, code: int, message: str):
    """A response of RPC ``method`` carrying only a status."""
    return getattr(spb, f"{method}Response")(status=status(code, message))


# ------------------------------------------------------------------------------------ delivered messages


def body_digest(body: bytes) -> str:
    """MD5, upper-case hex: the one digest both the Python and the Node client accept (reference §5)."""
    return hashlib.md5(body).hexdigest().upper()


def domain_message_type(msg: Message) -> MessageType:
    """The v2 type of a stored message, from the properties its send left on it."""
    p = msg.properties
    if p.get(props.TRANSACTION_PREPARED) == "true":
        return MessageType.TRANSACTION
    if props.SHARDING_KEY in p:
        return MessageType.FIFO
    if props.TIMER_DELIVER_MS in p or props.DELAY_TIME_LEVEL in p:
        return MessageType.DELAY
    if props.PRIORITY in p:
        return MessageType.PRIORITY
    if props.LITE_TOPIC in p:
        return MessageType.LITE
    return MessageType.NORMAL


def encode_delivered_message(
    msg: MessageExt,
    *,
    receipt_handle: str | None = None,
    delivery_attempt: int | None = None,
    invisible_duration_ms: int | None = None,
):
    """A stored message as a v2 consumer (or a transaction checker) receives it (reference §5).

    The body digest is always present: Node's client throws without one.
    """
    body = msg.decompressed_body()
    out = pb.Message(body=body)
    out.topic.name = msg.topic
    out.user_properties.update(msg.user_properties())
    sp = out.system_properties
    tag = msg.tags
    if tag:
        sp.tag = tag
    sp.keys.extend(msg.keys)
    sp.message_id = msg.msg_id
    sp.body_digest.type = pb.MD5
    sp.body_digest.checksum = body_digest(body)
    sp.body_encoding = pb.IDENTITY
    sp.message_type = _DOMAIN_TYPE_TO_PB[domain_message_type(msg)]
    sp.born_timestamp.FromMilliseconds(msg.born_timestamp_ms)
    sp.born_host = msg.born_host[0]
    sp.store_timestamp.FromMilliseconds(msg.store_timestamp_ms)
    sp.store_host = f"{msg.store_host[0]}:{msg.store_host[1]}"
    deliver_ms = msg.properties.get(props.TIMER_DELIVER_MS)
    if deliver_ms and deliver_ms.isdigit():
        sp.delivery_timestamp.FromMilliseconds(int(deliver_ms))
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    if invisible_duration_ms is not None:
        sp.invisible_duration.FromMilliseconds(invisible_duration_ms)
    sp.delivery_attempt = delivery_attempt if delivery_attempt is not None else msg.reconsume_times + 1
    group = msg.message_group
    if group:
        sp.message_group = group
    priority = msg.priority
    if priority is not None:
        sp.priority = priority
    lite_topic = msg.properties.get(props.LITE_TOPIC)
    if lite_topic:
        sp.lite_topic = lite_topic
    if msg.topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        sp.dead_letter_queue.topic = msg.properties.get(props.DLQ_ORIGIN_TOPIC, "")
        sp.dead_letter_queue.message_id = msg.properties.get(props.DLQ_ORIGIN_MESSAGE_ID, "")
    return out


# --------------------------------------------------------------------------------------------- helpers


def _timestamp_ms(ts) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def _client_type_name(value: int) -> str:
    return _enum_name(pb.ClientType, value)


def _enum_name(wrapper, value: int) -> str:
    """The name of a wire enum value; proto3 enums are open, so an unknown number comes back as its digits."""
    return wrapper.Name(value) if value in wrapper.values() else str(value)


def _permission(readable: bool, writable: bool) -> int:
    if readable and writable:
        return pb.READ_WRITE
    if readable:
        return pb.READ
    if writable:
        return pb.WRITE
    return pb.NONE


def _address_scheme(hosts: list[str]) -> int:
    try:
        versions = {ipaddress.ip_address(h).version for h in hosts}
    except ValueError:
        return pb.DOMAIN_NAME
    return pb.IPv6 if versions == {6} else pb.IPv4
