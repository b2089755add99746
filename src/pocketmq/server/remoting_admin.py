"""The broker's admin request codes: topics, subscription groups, consume stats, broker config and runtime info.

Bodies are RocketMQ's JSON shapes where a standard JSON parser can read them (``TopicConfigSerializeWrapper``,
``SubscriptionGroupWrapper``, ``KVTable``, ``key=value`` config text). GET_CONSUME_STATS is the exception:
RocketMQ keys its offset table by MessageQueue *objects* (not valid JSON), so PocketMQ sends a list of entries
instead (docs/protocol.md).
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING

from pocketmq.broker.dynamic_config import config_properties
from pocketmq.broker.groups import group_config_from_json, group_config_to_json
from pocketmq.broker.topics import topic_change_refusal, topic_config_to_json
from pocketmq.common.errors import BadRequestError, IllegalTopicError
from pocketmq.common.record import STORE_TIMESTAMP_POS
from pocketmq.common.topic import (
    MessageType,
    TopicConfig,
    is_system_topic,
    topic_name_problem,
)
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.properties_text import parse_properties_text, properties_text
from pocketmq.protocol.remoting_headers import HeaderFields, json_body, json_bytes
from pocketmq.protocol.request_headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    TopicRequestHeader,
)
from pocketmq.protocol.route import topic_gray_ratio
from pocketmq.protocol.transport import RemotingConnection, RequestRouter
from pocketmq.runtime.periodic import spawn_watched

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


_MESSAGE_TYPE_ATTRIBUTE = "message.type"
# A topic create answers once the name servers have the topic, so the admin's route wait ends at its first look;
# a name server slow to answer holds the create this long at most (its registration goes on behind the answer).
REGISTER_BEFORE_ANSWER_S = 1.0
_INT64 = struct.Struct(">q")


def parse_topic_attributes(text: str) -> dict[str, str]:
    """RocketMQ 5's attribute string ``+key=value,+key2=value2`` (``-key`` removes: ignored here)."""
    attributes = {}
    for item in text.split(","):
        item = item.strip()
        if not item or item.startswith("-"):
            continue
        key, sep, value = item.lstrip("+").partition("=")
        if not sep or not key:
            raise BadRequestError(f"topic attribute {item!r} is not +key=value")
        attributes[key.strip()] = value.strip()
    return attributes


def topic_config_from_header(h: HeaderFields, *, current: TopicConfig | None, default_queue_nums: int) -> TopicConfig:
    """UPDATE_AND_CREATE_TOPIC's fields as a TopicConfig; ``messageType`` (PocketMQ) wins over the attribute.

    A field the request leaves out keeps the value ``current`` (the topic as this broker has it) has, so an
    update changes only what it names (RocketMQ's rule for attributes, here for every field; a gray ratio of 0
    ends a rollout: docs/gray.md); for a new topic it takes the default (write queues: the read queues')."""
    topic = h.str("topic")
    problem = topic_name_problem(topic)
    if problem:
        raise IllegalTopicError(problem)
    base = current if current is not None else TopicConfig(topic, default_queue_nums, default_queue_nums)
    attributes = parse_topic_attributes(h.str("attributes", ""))
    type_text = h.str("messageType", None) or attributes.get(_MESSAGE_TYPE_ATTRIBUTE)
    try:
        message_type = MessageType.parse(type_text) if type_text else base.message_type
        gray_queue_ratio = topic_gray_ratio(attributes)
    except ValueError as exc:
        raise BadRequestError(f"topic {topic!r}: {exc}") from None
    read_nums = h.int("readQueueNums", base.read_queue_nums)
    write_nums = h.int("writeQueueNums", read_nums if current is None else base.write_queue_nums)
    return TopicConfig(
        topic,
        read_nums,
        write_nums,
        h.int("perm", base.perm),
        message_type,
        h.bool("order", base.order),
        base.gray_queue_ratio if gray_queue_ratio is None else gray_queue_ratio,
    )


class AdminHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        # GET_ALL_TOPIC_CONFIG's body and the topic table version it shows: an open console polls it every few
        # seconds, and encoding thousands of topics takes tens of ms of the event loop the sends run on
        self._topic_table_body: tuple[int, bytes] | None = None

    def register(self, router: RequestRouter) -> None:
        for code, handler in (
            (RequestCode.UPDATE_AND_CREATE_TOPIC, self.update_and_create_topic),
            (RequestCode.GET_ALL_TOPIC_CONFIG, self.get_all_topic_config),
            (RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic_in_broker),
            (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_and_create_subscription_group),
            (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.get_all_subscription_group_config),
            (RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_subscription_group),
            (RequestCode.GET_CONSUME_STATS, self.get_consume_stats),
            (RequestCode.GET_BROKER_CONFIG, self.get_broker_config),
            (RequestCode.UPDATE_BROKER_CONFIG, self.update_broker_config),
            (RequestCode.GET_BROKER_RUNTIME_INFO, self.get_broker_runtime_info),
        ):
            router.register(code, handler)

    # -- topics ---------------------------------------------------------------------------------------------------
    async def update_and_create_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Create or update a topic (RocketMQ's create-or-update); fields left out keep the topic's values.
        PocketMQ adds ``createOnly`` (refuse an existing topic), ``updateOnly`` (refuse an unknown one) and
        ``force`` (allow fewer read queues although the queues dropped still store messages:
        ``topics.topic_change_refusal``). ``autoCreate=true`` (PocketMQ, sent by the name server on a route
        query for an unknown topic) applies this broker's auto-create rule instead, and never changes an
        existing topic."""
        h = HeaderFields(request.ext_fields)
        broker = self._broker
        topics = broker.topics
        if h.bool("autoCreate"):
            config = topics.get_or_create(h.str("topic"))  # TOPIC_NOT_EXIST when this broker's auto-creation is off
            # The reply carries the topic as it is here (it may have existed with other queue numbers), so the
            # name server records the truth rather than its plan.
            return request.response(ResponseCode.SUCCESS, body=json_bytes(topic_config_to_json(config)))
        topic = h.str("topic")
        if is_system_topic(topic):
            raise IllegalTopicError(f"topic {topic!r} is a system topic")
        create_only, update_only, force = h.bool("createOnly"), h.bool("updateOnly"), h.bool("force")

        def stored_messages(queue_id: int) -> int:
            return broker.store.max_queue_offset(topic, queue_id) - broker.store.min_queue_offset(topic, queue_id)

        def decide(current: TopicConfig | None) -> TopicConfig:
            config = topic_config_from_header(
                h, current=current, default_queue_nums=broker.config.default_topic_queue_nums
            )
            refusal = topic_change_refusal(
                current,
                config,
                create_only=create_only,
                update_only=update_only,
                force=force,
                stored_messages=stored_messages,
                broker_name=broker.broker_name,
            )
            if refusal is not None:
                raise refusal
            return config

        topics.change(topic, decide)
        registering = spawn_watched(broker.register_now(), f"broker-register-topic-{topic}")
        await asyncio.wait([registering], timeout=REGISTER_BEFORE_ANSWER_S)
        return request.response(ResponseCode.SUCCESS)

    async def get_all_topic_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topics = self._broker.topics
        version = topics.data_version  # read before the table: the table is replaced before the version moves
        if self._topic_table_body is None or self._topic_table_body[0] != version:
            body = json_bytes(
                {
                    "topicConfigTable": {t.name: topic_config_to_json(t) for t in topics.all()},
                    "dataVersion": self._broker.data_version(version),
                }
            )
            self._topic_table_body = (version, body)
        return request.response(ResponseCode.SUCCESS, body=self._topic_table_body[1])

    async def delete_topic_in_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Idempotent: deleting a topic this broker does not have is SUCCESS (admin tools ask every master)."""
        topic = TopicRequestHeader.parse(request.ext_fields).topic  # an illegal name is refused, not "absent"
        if is_system_topic(topic):
            raise IllegalTopicError(f"topic {topic!r} is a system topic")
        self._broker.delete_topic(topic)
        return request.response(ResponseCode.SUCCESS)

    # -- subscription groups ------------------------------------------------------------------------------------
    async def update_and_create_subscription_group(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        config = group_config_from_json(json_body(request.body, "subscription group"))
        self._broker.groups.create_or_update(config)
        return request.response(ResponseCode.SUCCESS)

    async def get_all_subscription_group_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        groups = self._broker.groups
        return request.response(
            ResponseCode.SUCCESS,
            body=json_bytes(
                {
                    "subscriptionGroupTable": {g.group: group_config_to_json(g) for g in groups.all()},
                    "dataVersion": self._broker.data_version(groups.data_version),
                }
            ),
        )

    async def delete_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.parse(request.ext_fields)  # an illegal name is refused, not "absent"
        self._broker.delete_group(h.group, clean_offsets=h.clean_offset)
        return request.response(ResponseCode.SUCCESS)

    async def get_consume_stats(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Per queue: the broker's max offset, the group's committed offset, and when the last consumed
        message was stored; ``totalDiff`` sums the lag. PocketMQ adds the group's POP state per queue
        (``popInFlight``, ``popWaitingToRevive``, ``popRetried``, ``popDeadLettered``, ``popCkRewrites``,
        ``popCkEndings``: docs/protocol.md)."""
        h = GetConsumeStatsRequestHeader.parse(request.ext_fields)
        group = h.consumer_group
        broker = self._broker
        topic = h.topic
        if topic is not None:
            topic_names = [topic]
        else:
            info = broker.consumers.table.group_info(group)
            topic_names = sorted(set(broker.offsets.topics_of_group(group)) | set(info.subscriptions if info else ()))
        pop_stats = broker.pop.group_stats(group)
        entries = []
        for name in topic_names:
            config = broker.topics.get(name)
            if config is None:
                continue
            committed = broker.offsets.offsets(group, name)
            for queue_id in range(config.read_queue_nums):
                consumer_offset = committed.get(queue_id, 0)
                entries.append(
                    {
                        "topic": name,
                        "brokerName": broker.broker_name,
                        "queueId": queue_id,
                        "brokerOffset": broker.store.max_queue_offset(name, queue_id),
                        "consumerOffset": consumer_offset,
                        "lastTimestamp": self._store_time_before(name, queue_id, consumer_offset),
                        **pop_fields(pop_stats.get((name, queue_id))),
                    }
                )
        total_diff = sum(max(0, e["brokerOffset"] - e["consumerOffset"]) for e in entries)
        return request.response(
            ResponseCode.SUCCESS, body=json_bytes({"offsetTable": entries, "consumeTps": 0.0, "totalDiff": total_diff})
        )

    def _store_time_before(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store timestamp of the message before ``queue_offset`` (the last one consumed), or 0."""
        if queue_offset <= 0:
            return 0
        got = self._broker.store.get_messages(topic, queue_id, queue_offset - 1, 1, max_bytes=1 << 20, tag_filter=None)
        if not got.records:
            return 0
        return _INT64.unpack_from(got.records[0], STORE_TIMESTAMP_POS)[0]

    # -- broker config and runtime info ---------------------------------------------------------------------------
    async def get_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        version = json_bytes(self._broker.data_version(self._broker.topics.data_version)).decode()
        return request.response(
            ResponseCode.SUCCESS, {"version": version}, body=properties_text(config_properties(self._broker.config))
        )

    async def update_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        self._broker.update_config(parse_properties_text(request.body))
        return request.response(ResponseCode.SUCCESS)

    async def get_broker_runtime_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=json_bytes({"table": self._broker.runtime_info()}))


def pop_fields(stats) -> dict:
    """The POP columns of a GET_CONSUME_STATS entry (zeros for a queue the group never popped)."""
    return {
        "popInFlight": stats.in_flight if stats else 0,
        "popWaitingToRevive": stats.waiting_to_revive if stats else 0,
        "popRetried": stats.retried if stats else 0,
        "popDeadLettered": stats.dead_lettered if stats else 0,
        "popCkRewrites": stats.rewrites if stats else 0,
        "popCkEndings": stats.endings if stats else 0,
    }
