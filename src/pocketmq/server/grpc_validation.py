"""The v2 validation table for SendMessage and QueryRoute: pure functions, each failure a v2 status code.

Codes and limits follow the Apache proxy (``GrpcValidator`` and ``SendMessageActivity``) so a client sees
what RocketMQ 5 would answer. Checks run in the proxy's order: request shape, topic, body, user
properties, tag, keys, property size, message id, message type, delivery time, message group.

Numbers are range-checked as on the remoting port (docs/protocol.md, "Validation"): timestamps within a Java
long of milliseconds, invisible and polling durations and batch sizes as the proxy bounds them.

Every failure raises a ``PocketMQError`` whose ``v2_code`` is the status to answer with; nothing here
touches the broker or a clock (``now_ms`` comes in).
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass

from pocketmq.common.errors import IllegalTopicError
from pocketmq.common.properties import SYSTEM_PROPERTY_NAMES
from pocketmq.common.topic import MessageType, is_system_topic, topic_name_problem
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.error_codes import V2StatusError
from pocketmq.protocol.grpc_codec import InboundMessage
from pocketmq.protocol.headers import INT64_MAX, has_control_character

# Types this front end stores (DELAY through the broker's timer, TRANSACTION through its transaction service,
# LITE under a LITE parent topic: broker/lite).
SUPPORTED_TYPES = frozenset(
    {
        MessageType.NORMAL,
        MessageType.FIFO,
        MessageType.DELAY,
        MessageType.TRANSACTION,
        MessageType.PRIORITY,
        MessageType.LITE,
    }
)


@dataclass(frozen=True, slots=True)
class SendLimits:
    """The proxy's defaults; ``max_body_bytes`` follows the store's max message size."""

    max_body_bytes: int = 4 * 1024 * 1024
    max_message_group_bytes: int = 64  # a group of this many UTF-8 bytes or more is refused
    max_user_properties: int = 128
    max_user_property_bytes: int = 16 * 1024  # user properties + tag + keys, UTF-8 bytes
    max_delay_ms: int = 24 * 3600 * 1000
    max_message_id_chars: int = 128


def _reject(code: V2StatusCode, message: str) -> V2StatusError:
    return V2StatusError(code, message)


def check_topic(topic: str) -> None:
    """ILLEGAL_TOPIC for a name outside ``^[%|a-zA-Z0-9_-]+$``, longer than 127, or a system topic."""
    problem = topic_name_problem(topic)
    if problem:
        raise IllegalTopicError(problem)
    if is_system_topic(topic):
        raise IllegalTopicError(f"cannot access system topic {topic!r}")


def check_send_request(messages: list[InboundMessage]) -> str:
    """The request's shape: at least one message, all for one legal topic. Returns the topic."""
    if not messages:
        raise _reject(V2StatusCode.MESSAGE_CORRUPTED, "no message to send")
    topic = messages[0].topic
    if any(m.topic != topic for m in messages):
        raise _reject(V2StatusCode.MESSAGE_CORRUPTED, "messages of one request must share their topic")
    check_topic(topic)
    return topic


def validate_message(
    msg: InboundMessage,
    *,
    topic_type: MessageType,
    limits: SendLimits,
    now_ms: int,
    supported_types: frozenset[MessageType] = SUPPORTED_TYPES,
) -> InboundMessage:
    """Check one message against the table; returns it normalized (body decoded, type resolved)."""
    body = _decoded_body(msg, limits.max_body_bytes)
    _check_user_properties(msg.user_properties, limits)
    _check_tag(msg.tag)
    for key in msg.keys:
        _check_key(key)
    size = sum(len(k.encode()) + len(v.encode()) for k, v in msg.user_properties.items())
    size += len(msg.tag.encode()) if msg.tag else 0
    size += sum(len(k.encode()) for k in msg.keys)
    if size > limits.max_user_property_bytes:
        raise _reject(
            V2StatusCode.MESSAGE_PROPERTIES_TOO_LARGE,
            f"user properties, tag and keys are {size} bytes, more than {limits.max_user_property_bytes}",
        )
    _check_message_id(msg.message_id, limits.max_message_id_chars)
    message_type = _resolve_type(msg, topic_type)
    if msg.born_timestamp_ms is not None and not 0 <= msg.born_timestamp_ms <= INT64_MAX:
        raise _reject(
            V2StatusCode.BAD_REQUEST, f"born timestamp {msg.born_timestamp_ms} ms is outside [0, {INT64_MAX}]"
        )
    if msg.delivery_timestamp_ms is not None and msg.delivery_timestamp_ms < 0:
        raise _reject(
            V2StatusCode.ILLEGAL_DELIVERY_TIME, f"delivery timestamp {msg.delivery_timestamp_ms} ms is negative"
        )
    if msg.delivery_timestamp_ms is not None and msg.delivery_timestamp_ms - now_ms > limits.max_delay_ms:
        raise _reject(
            V2StatusCode.ILLEGAL_DELIVERY_TIME, f"delivery time is more than {limits.max_delay_ms} ms ahead (max delay)"
        )
    if msg.message_group is not None:
        _check_message_group(msg.message_group, limits.max_message_group_bytes)
    if message_type not in supported_types:
        raise _reject(
            V2StatusCode.NOT_IMPLEMENTED, f"{message_type.value} messages are not implemented by this broker yet"
        )
    return dataclasses.replace(msg, body=body, body_encoding="IDENTITY", message_type=message_type.value)


def _decoded_body(msg: InboundMessage, max_body_bytes: int) -> bytes:
    """The body as stored: IDENTITY as is, GZIP inflated (bounded, so a zip bomb costs nothing)."""
    body = msg.body
    if not body:
        raise _reject(V2StatusCode.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(body) > max_body_bytes:
        raise _reject(
            V2StatusCode.MESSAGE_BODY_TOO_LARGE,
            f"message body is {len(body)} bytes, more than the max {max_body_bytes}",
        )
    if msg.body_encoding in ("IDENTITY", "ENCODING_UNSPECIFIED"):
        return body
    if msg.body_encoding != "GZIP":
        raise _reject(V2StatusCode.MESSAGE_CORRUPTED, f"unknown body encoding {msg.body_encoding}")
    inflater = zlib.decompressobj(wbits=31)
    try:
        plain = inflater.decompress(body, max_body_bytes + 1)
    except zlib.error as exc:
        raise _reject(V2StatusCode.MESSAGE_CORRUPTED, f"GZIP body does not inflate: {exc}") from None
    if len(plain) > max_body_bytes:
        raise _reject(
            V2StatusCode.MESSAGE_BODY_TOO_LARGE, f"inflated message body is more than the max {max_body_bytes}"
        )
    if not inflater.eof:
        raise _reject(V2StatusCode.MESSAGE_CORRUPTED, "GZIP body is truncated")
    if not plain:
        raise _reject(V2StatusCode.MESSAGE_BODY_EMPTY, "message body is empty")
    return plain


def _check_user_properties(user_properties: dict[str, str], limits: SendLimits) -> None:
    if len(user_properties) > limits.max_user_properties:
        raise _reject(
            V2StatusCode.MESSAGE_PROPERTIES_TOO_LARGE,
            f"{len(user_properties)} user properties, more than {limits.max_user_properties}",
        )
    for key, value in user_properties.items():
        if key in SYSTEM_PROPERTY_NAMES:
            raise _reject(V2StatusCode.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {key!r} is used by the system")
        if not key.strip():
            raise _reject(V2StatusCode.ILLEGAL_MESSAGE_PROPERTY_KEY, "a property key is blank")
        if has_control_character(key):
            raise _reject(V2StatusCode.ILLEGAL_MESSAGE_PROPERTY_KEY, "a property key cannot contain control characters")
        if has_control_character(value):
            raise _reject(
                V2StatusCode.ILLEGAL_MESSAGE_PROPERTY_KEY,
                f"the value of property {key!r} cannot contain control characters",
            )


def _check_tag(tag: str | None) -> None:
    if tag is None:
        return
    if not tag.strip():
        raise _reject(V2StatusCode.ILLEGAL_MESSAGE_TAG, "tag cannot be whitespace only")
    if "|" in tag:
        raise _reject(V2StatusCode.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
    if has_control_character(tag):
        raise _reject(V2StatusCode.ILLEGAL_MESSAGE_TAG, "tag cannot contain control characters")


def _check_key(key: str) -> None:
    if not key.strip():
        raise _reject(V2StatusCode.ILLEGAL_MESSAGE_KEY, "a message key cannot be blank")
    if has_control_character(key):
        raise _reject(V2StatusCode.ILLEGAL_MESSAGE_KEY, "a message key cannot contain control characters")


def _check_message_id(message_id: str, max_chars: int) -> None:
    if not message_id.strip():
        raise _reject(V2StatusCode.ILLEGAL_MESSAGE_ID, "message id is empty")
    # Stored verbatim as UNIQ_KEY and answered back: keep it a printable token of bounded length.
    if len(message_id) > max_chars or has_control_character(message_id) or any(c.isspace() for c in message_id):
        raise _reject(
            V2StatusCode.ILLEGAL_MESSAGE_ID,
            f"message id must be at most {max_chars} printable characters without spaces",
        )


def _check_message_group(group: str, max_bytes: int) -> None:
    if not group.strip():
        raise _reject(V2StatusCode.ILLEGAL_MESSAGE_GROUP, "message group cannot be whitespace only")
    if len(group.encode()) >= max_bytes:
        raise _reject(V2StatusCode.ILLEGAL_MESSAGE_GROUP, f"message group must be shorter than {max_bytes} bytes")
    if has_control_character(group):
        raise _reject(V2StatusCode.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control characters")


def _resolve_type(msg: InboundMessage, topic_type: MessageType) -> MessageType:
    """The message's type, checked against its own properties and its topic's type.

    An unspecified type is inferred from the properties (as a 4.x client's message would be). A type that
    contradicts the message's properties or the topic's type is MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; a type
    PocketMQ does not know is NOT_IMPLEMENTED.
    """
    if msg.message_type == "MESSAGE_TYPE_UNSPECIFIED":
        if msg.lite_topic is not None:
            message_type = MessageType.LITE
        elif msg.message_group is not None:
            message_type = MessageType.FIFO
        elif msg.delivery_timestamp_ms is not None:
            message_type = MessageType.DELAY
        elif msg.priority is not None:
            message_type = MessageType.PRIORITY
        else:
            message_type = MessageType.NORMAL
    else:
        declared = msg.domain_type
        if declared is None:
            raise _reject(V2StatusCode.NOT_IMPLEMENTED, f"message type {msg.message_type} is not supported")
        message_type = declared
    conflict = _property_conflict(msg, message_type)
    if conflict:
        raise _reject(V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, conflict)
    if not topic_type.accepts(message_type):
        raise _reject(
            V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"topic {msg.topic} accepts {topic_type.value} messages, not {message_type.value}",
        )
    return message_type


def _property_conflict(msg: InboundMessage, message_type: MessageType) -> str | None:
    has_group = msg.message_group is not None
    has_delivery = msg.delivery_timestamp_ms is not None
    if message_type is MessageType.FIFO and not has_group:
        return "a FIFO message needs a message group"
    if message_type is MessageType.DELAY and not has_delivery:
        return "a DELAY message needs a delivery timestamp"
    if message_type is not MessageType.FIFO and has_group:
        return f"a {message_type.value} message cannot have a message group"
    if message_type is not MessageType.DELAY and has_delivery:
        return f"a {message_type.value} message cannot have a delivery timestamp"
    if message_type is MessageType.PRIORITY and (msg.priority is None or msg.priority < 0):
        return "a PRIORITY message needs a priority of 0 or more"
    if message_type is not MessageType.PRIORITY and msg.priority is not None:
        return f"a {message_type.value} message cannot have a priority"
    if message_type is MessageType.LITE and msg.lite_topic is None:
        return "a LITE message needs a lite topic"
    if message_type is not MessageType.LITE and msg.lite_topic is not None:
        return f"a {message_type.value} message cannot have a lite topic"
    return None


def check_invisible_ms(invisible_ms: int, max_invisible_ms: int, *, zero_ok: bool) -> None:
    """ILLEGAL_INVISIBLE_TIME outside (0, max] for a receive, [0, max] for a change (0: visible again now)."""
    low = 0 if zero_ok else 1
    if not low <= invisible_ms <= max_invisible_ms:
        raise _reject(
            V2StatusCode.ILLEGAL_INVISIBLE_TIME,
            f"invisible duration {invisible_ms} ms is outside [{low}, {max_invisible_ms}]",
        )


def check_receive_numbers(batch_size: int, long_polling_ms: int | None) -> None:
    """A negative batch size is BAD_REQUEST (0, proto3's unset, means the default); a negative long polling
    timeout ILLEGAL_POLLING_TIME. Larger ones are capped by the caller, as the proxy does."""
    if batch_size < 0:
        raise _reject(V2StatusCode.BAD_REQUEST, f"batch size {batch_size} is negative")
    if long_polling_ms is not None and long_polling_ms < 0:
        raise _reject(V2StatusCode.ILLEGAL_POLLING_TIME, f"long polling timeout {long_polling_ms} ms is negative")
