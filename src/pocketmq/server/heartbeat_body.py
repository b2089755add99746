"""HEART_BEAT's JSON body, checked field by field into typed values (RocketMQ's HeartbeatData).

``{"clientID", "producerDataSet": [{"groupName"}], "consumerDataSet": [{"groupName", "consumeType",
"messageModel", "consumeFromWhere", "subscriptionDataSet": [{"topic", "subString", "expressionType",
"subVersion"}], "unitMode", "pmqHeldQueues"}]}``. Enum fields arrive as names or as ordinals (RocketMQ's enum
order); ``subVersion`` as a number or a string. Anything else is a BadRequestError (INVALID_PARAMETER) whose
remark names the field.
"""

from __future__ import annotations

from typing import Any

from pocketmq.broker.consumers import ConsumerGroupInfo, SubscriptionData
from pocketmq.common.errors import BadRequestError
from pocketmq.common.topic import group_name_problem, topic_name_problem
from pocketmq.protocol.headers import INT64_MAX, INT64_MIN, has_control_character
from pocketmq.protocol.request_headers import EXPRESSION_MAX_CHARS, NAME_MAX_CHARS

CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)
EXPRESSION_TYPES = ("TAG", "SQL92")


def heartbeat_from_json(body: Any) -> tuple[str, list[dict], list[ConsumerGroupInfo], list[str]]:
    """(client id, the raw consumer data objects, their ConsumerGroupInfo, producer group names)."""
    if not isinstance(body, dict):
        raise BadRequestError("heartbeat body must be a JSON object")
    client_id = body.get("clientID")
    if not isinstance(client_id, str) or not client_id:
        raise BadRequestError("heartbeat lacks clientID")
    _check_text(client_id, "clientID", NAME_MAX_CHARS)
    consumer_data = _list_field(body, "consumerDataSet")
    consumers = [consumer_group_info(obj) for obj in consumer_data]
    producer_groups = [
        _name(obj.get("groupName"), "producerDataSet.groupName", group_name_problem)
        for obj in _list_field(body, "producerDataSet")
    ]
    return client_id, consumer_data, consumers, producer_groups


def consumer_group_info(obj: dict) -> ConsumerGroupInfo:
    """One consumerDataSet entry."""
    group = _name(obj.get("groupName"), "consumerDataSet.groupName", group_name_problem)
    subscriptions = {}
    for sub in _list_field(obj, "subscriptionDataSet", f"heartbeat of group {group}: subscriptionDataSet"):
        data = subscription_data(sub, "subscriptionDataSet")
        subscriptions[data.topic] = data
    return ConsumerGroupInfo(
        group=group,
        consume_type=_enum(obj.get("consumeType"), CONSUME_TYPES, "CONSUME_PASSIVELY", "consumeType"),
        message_model=_enum(obj.get("messageModel"), MESSAGE_MODELS, "CLUSTERING", "messageModel"),
        consume_from_where=_enum(
            obj.get("consumeFromWhere"), CONSUME_FROM, "CONSUME_FROM_LAST_OFFSET", "consumeFromWhere"
        ),
        subscriptions=subscriptions,
    )


def subscription_data(sub: dict, where: str) -> SubscriptionData:
    """One subscription object (RocketMQ's SubscriptionData) found at ``where``."""
    topic = _name(sub.get("topic"), f"{where}.topic", topic_name_problem)
    expression = sub.get("subString") or "*"
    _check_text(expression, f"{where}.subString", EXPRESSION_MAX_CHARS)
    return SubscriptionData(
        topic,
        expression,
        _enum(sub.get("expressionType"), EXPRESSION_TYPES, "TAG", f"{where}.expressionType"),
        _int64(sub.get("subVersion"), f"{where}.subVersion"),
    )


def check_client_from_json(body: Any) -> tuple[str, SubscriptionData]:
    """CHECK_CLIENT_CONFIG's body ``{"clientId", "group", "subscriptionData": {...}}``: (group, subscription)."""
    if not isinstance(body, dict) or not isinstance(body.get("subscriptionData"), dict):
        raise BadRequestError("check client config body must be a JSON object with a subscriptionData object")
    group = _name(body.get("group"), "group", group_name_problem)
    return group, subscription_data(body["subscriptionData"], "subscriptionData")


def _list_field(body: dict, name: str, what: str | None = None) -> list[dict]:
    value = body.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise BadRequestError(f"{what or 'heartbeat ' + name} must be a list of objects")
    return value


def _check_text(value: Any, name: str, max_chars: int) -> None:
    if not isinstance(value, str):
        raise BadRequestError(f"heartbeat field {name} must be a string")
    if len(value) > max_chars:
        raise BadRequestError(f"heartbeat field {name} is longer than {max_chars} characters")
    if has_control_character(value):
        raise BadRequestError(f"heartbeat field {name} holds a control character")


def _name(value: Any, name: str, problem_of) -> str:
    if not isinstance(value, str):
        raise BadRequestError(f"heartbeat field {name} must be a string")
    problem = problem_of(value)
    if problem:
        raise BadRequestError(f"heartbeat field {name}: {problem}")
    return value


def _enum(value: Any, names: tuple[str, ...], default: str, name: str) -> str:
    """An enum field given as its name (any case) or as its ordinal."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise BadRequestError(f"heartbeat field {name}={value!r} is not one of {'|'.join(names)}")
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, int):
        if 0 <= value < len(names):
            return names[value]
    elif isinstance(value, str) and value.isascii() and value.upper() in names:
        return value.upper()
    shown = value if not isinstance(value, str) or len(value) <= 64 else value[:64] + "..."
    raise BadRequestError(f"heartbeat field {name}={shown!r} is not one of {'|'.join(names)}")


def _int64(value: Any, name: str) -> int:
    """A Java long given as a JSON number or a decimal string (absent: 0)."""
    if value is None or value == "":
        return 0
    if isinstance(value, float) and value.is_integer():  # a JavaScript client's number
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadRequestError(f"heartbeat field {name}={value!r} is not an integer")
    if isinstance(value, int):
        number = value
    else:
        try:
            number = int(value)
        except ValueError:
            raise BadRequestError(f"heartbeat field {name}={value[:64]!r} is not an integer") from None
    if not INT64_MIN <= number <= INT64_MAX:
        raise BadRequestError(f"heartbeat field {name}={value!r} is outside the int64 range")
    return number
