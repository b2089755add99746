"""What a remoting request asks of access control: the (resource, actions) pairs the user must be allowed.

RocketMQ's table (its DefaultAuthorizationContextBuilder, docs/security.md) for the messaging codes; any one of
a pair's actions will do. A retry or dead-letter topic (``%RETRY%g``, ``%DLQ%g``) is checked as ``Group:g``.
Every other code, the admin ones and PocketMQ's own cluster-internal ones included, needs the right on
``Cluster:<cluster>`` (Get for reads, the matching action for changes): for a user without Cluster rights they
are refused, which is what makes a broker safe from a raw socket. Codes a client never sends unsigned but that
need no resource (a producer's heartbeat, UNREGISTER_CLIENT of a producer) need authentication only.

Fields are read leniently here (a missing one names the empty resource, which no policy but ``*`` covers); the
handler checks them properly afterwards.
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.auth.model import Action, Resource, ResourceType
from pocketmq.common.errors import BadRequestError
from pocketmq.common.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from pocketmq.protocol.codes import (
    AUTH_READ_CODES,
    GET_GROUP_GRAY_CLIENTS,
    QUERY_STAGE_OFFSETS,
    REGISTER_POP_STAGES,
    UNREGISTER_POP_STAGES,
    UPDATE_STAGE_OFFSETS,
    RequestCode,
    canonical_request_code,
)
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.remoting_headers import json_body

Context = tuple[Resource, frozenset[Action]]

PUB = frozenset({Action.PUB})
SUB = frozenset({Action.SUB})
SUB_GET = frozenset({Action.SUB, Action.GET})
SUB_UPDATE = frozenset({Action.SUB, Action.UPDATE})
GET = frozenset({Action.GET, Action.LIST})
CREATE = frozenset({Action.CREATE})
UPDATE = frozenset({Action.UPDATE})
DELETE = frozenset({Action.DELETE})


def topic_contexts(topic: str, actions: frozenset[Action]) -> list[Context]:
    """A topic's context; a retry or dead-letter topic is its group's (Sub)."""
    group = group_of_system_topic(topic)
    if group is not None:
        return [(Resource(ResourceType.GROUP, group), SUB)]
    return [(Resource(ResourceType.TOPIC, topic), actions)]


def group_of_system_topic(topic: str) -> str | None:
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return None


def group_context(group: str, actions: frozenset[Action] = SUB) -> Context:
    return (Resource(ResourceType.GROUP, group), actions)


def _f(request: RemotingCommand, name: str) -> str:
    value = request.ext_fields.get(name)
    return "" if value is None else str(value)


def _send(request: RemotingCommand) -> list[Context]:
    fields = request.ext_fields
    v2 = "b" in fields and "topic" not in fields
    return topic_contexts(_f(request, "b" if v2 else "topic"), PUB)


def _group_topic(group_actions: frozenset[Action], topic_actions: frozenset[Action]):
    def contexts(request: RemotingCommand) -> list[Context]:
        topic = _f(request, "topic")
        found = [group_context(_f(request, "consumerGroup"), group_actions)]
        if group_of_system_topic(topic) is None:  # a group's own retry topic is covered by the group
            found.append((Resource(ResourceType.TOPIC, topic), topic_actions))
        return found

    return contexts


def _json(request: RemotingCommand):
    try:
        return json_body(request.body, "request")
    except BadRequestError:
        return {}


def _heartbeat(request: RemotingCommand) -> list[Context]:
    body = _json(request)
    found: list[Context] = []
    consumers = body.get("consumerDataSet") if isinstance(body, dict) else None
    for consumer in consumers if isinstance(consumers, list) else ():
        if isinstance(consumer, dict):
            found.extend(_group_and_topics(consumer, "groupName", "subscriptionDataSet"))
    return found


def _check_client(request: RemotingCommand) -> list[Context]:
    body = _json(request)
    return [group_context(str(body.get("group", "")) if isinstance(body, dict) else "", SUB)]


def _lock_batch(request: RemotingCommand) -> list[Context]:
    body = _json(request)
    return _group_and_topics(body, "consumerGroup", "mqSet") if isinstance(body, dict) else [group_context("")]


def _group_and_topics(obj: dict, group_key: str, list_key: str) -> list[Context]:
    """Sub on ``obj[group_key]`` and on the ``topic`` of each item of ``obj[list_key]`` but its retry topics."""
    found = [group_context(str(obj.get(group_key, "")))]
    items = obj.get(list_key)
    for item in items if isinstance(items, list) else ():
        topic = str(item.get("topic", "")) if isinstance(item, dict) else ""
        if group_of_system_topic(topic) is None:
            found.append((Resource(ResourceType.TOPIC, topic), SUB))
    return found


def _batch_ack(request: RemotingCommand) -> list[Context]:
    body = _json(request)
    acks = body.get("acks") if isinstance(body, dict) else None
    found: list[Context] = []
    for ack in acks if isinstance(acks, list) else ():
        if isinstance(ack, dict):
            found.append(group_context(str(ack.get("c", ""))))
            found.extend(topic_contexts(str(ack.get("t", "")), SUB))
    return found or [group_context("")]


def _unregister_client(request: RemotingCommand) -> list[Context]:
    group = _f(request, "consumerGroup")
    return [group_context(group)] if group else []


def _end_transaction(request: RemotingCommand) -> list[Context]:
    topic = _f(request, "topic")
    return topic_contexts(topic, PUB) if topic else []


def _topic(actions: frozenset[Action]):
    return lambda request: topic_contexts(_f(request, "topic"), actions)


def _group(field_name: str, actions: frozenset[Action]):
    return lambda request: [group_context(_f(request, field_name), actions)]


_BY_CODE: dict[int, Callable[[RemotingCommand], list[Context]]] = {
    RequestCode.SEND_MESSAGE: _send,
    RequestCode.SEND_MESSAGE_V2: _send,
    RequestCode.SEND_BATCH_MESSAGE: _send,
    RequestCode.END_TRANSACTION: _end_transaction,
    RequestCode.RECALL_MESSAGE: _topic(PUB),
    RequestCode.CONSUMER_SEND_MSG_BACK: _group("group", SUB),
    RequestCode.PULL_MESSAGE: _group_topic(SUB, SUB),
    RequestCode.QUERY_MESSAGE: _topic(SUB_GET),
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.CHECK_CLIENT_CONFIG: _check_client,
    RequestCode.UNREGISTER_CLIENT: _unregister_client,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _group("consumerGroup", SUB_GET),
    RequestCode.QUERY_CONSUMER_OFFSET: _group_topic(SUB_GET, SUB_GET),
    RequestCode.UPDATE_CONSUMER_OFFSET: _group_topic(SUB_UPDATE, SUB_UPDATE),
    RequestCode.LOCK_BATCH_MQ: _lock_batch,
    RequestCode.UNLOCK_BATCH_MQ: _lock_batch,
    RequestCode.GET_MIN_OFFSET: _topic(SUB_GET),
    RequestCode.GET_MAX_OFFSET: _topic(SUB_GET),
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: _topic(SUB_GET),
    RequestCode.GET_EARLIEST_MSG_STORETIME: _topic(SUB_GET),
    RequestCode.POP_MESSAGE: _group_topic(SUB, SUB),
    RequestCode.ACK_MESSAGE: _group_topic(SUB, SUB),
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: _group_topic(SUB, SUB),
    RequestCode.BATCH_ACK_MESSAGE: _batch_ack,
    QUERY_STAGE_OFFSETS: _group_topic(SUB_GET, SUB_GET),
    UPDATE_STAGE_OFFSETS: _group_topic(SUB_UPDATE, SUB_UPDATE),
    REGISTER_POP_STAGES: _group_topic(SUB, SUB),
    UNREGISTER_POP_STAGES: _group_topic(SUB, SUB),
    GET_GROUP_GRAY_CLIENTS: _group("consumerGroup", SUB_GET),
}

# The Cluster action of the admin codes that only read (the others need Update, or the action named here).
_CLUSTER_ACTIONS: dict[int, frozenset[Action]] = {
    RequestCode.UPDATE_AND_CREATE_TOPIC: frozenset({Action.CREATE, Action.UPDATE}),
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: frozenset({Action.CREATE, Action.UPDATE}),
    RequestCode.DELETE_TOPIC_IN_BROKER: DELETE,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DELETE,
    RequestCode.GET_ALL_TOPIC_CONFIG: GET,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: GET,
    RequestCode.GET_CONSUME_STATS: GET,
    RequestCode.GET_BROKER_CONFIG: GET,
    RequestCode.GET_BROKER_RUNTIME_INFO: GET,
    RequestCode.VIEW_MESSAGE_BY_ID: GET,  # any message of any topic, by its commit log offset
    RequestCode.GET_CONSUMER_CONNECTION_LIST: GET,
    RequestCode.GET_CONSUMER_RUNNING_INFO: GET,
    **{code: GET for code in AUTH_READ_CODES},
}


def request_contexts(request: RemotingCommand, cluster_name: str) -> list[Context]:
    """The (resource, actions) pairs ``request`` needs, in RocketMQ's order of checking."""
    code = canonical_request_code(request.code)
    build = _BY_CODE.get(code)
    if build is not None:
        return build(request)
    return [(Resource(ResourceType.CLUSTER, cluster_name), _CLUSTER_ACTIONS.get(code, UPDATE))]
