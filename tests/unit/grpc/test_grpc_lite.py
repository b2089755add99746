"""Lite topics over the v2 servicer (a real in-process Broker, a real grpc.aio channel): the Settings' lite
limits, SyncLiteSubscription, a LITE send, a receive on the parent and the ack of its lite receipt."""

from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from tests.unit.grpc.test_grpc_servicer import CLIENT, Harness, next_reply, send_request

from pocketmq.common.topic import MessageType, TopicConfig
from pocketmq.protocol.codes import V2StatusCode

PARENT = "agents"


@pytest.fixture
async def h(tmp_path):
    harness = await Harness(tmp_path).start()
    harness.broker.topics.create_or_update(TopicConfig(PARENT, 2, 2, message_type=MessageType.LITE))
    yield harness
    await harness.close()


def sync_request(*lites, action=pb.PARTIAL_ADD, topic=PARENT, group="g"):
    req = spb.SyncLiteSubscriptionRequest(action=action, lite_topic_set=list(lites))
    req.topic.name, req.group.name = topic, group
    return req


async def receive(h, group="g"):
    req = spb.ReceiveMessageRequest(batch_size=8, auto_renew=False)
    req.group.name = group
    req.message_queue.topic.name = PARENT
    req.filter_expression.type = pb.TAG
    req.filter_expression.expression = "*"
    req.invisible_duration.seconds = 30
    req.long_polling_timeout.seconds = 0
    return [r async for r in h.stub.ReceiveMessage(req, metadata=CLIENT)]


async def test_lite_consumer_settings_carry_the_quota_and_the_max_name_size(tmp_path):
    h = await Harness(tmp_path).start()
    try:
        call = h.stub.Telemetry(metadata=CLIENT)
        command = spb.TelemetryCommand()
        command.settings.client_type = pb.LITE_SIMPLE_CONSUMER
        command.settings.subscription.group.name = "g"
        command.settings.subscription.subscriptions.add().topic.name = PARENT
        await call.write(command)
        sub = (await next_reply(call)).settings.subscription
        assert sub.HasField("lite_subscription_quota") and sub.HasField("max_lite_topic_size")
        assert (sub.lite_subscription_quota, sub.max_lite_topic_size) == (2_000, 64)
        call.cancel()
    finally:
        await h.close()


async def test_send_subscribe_receive_and_ack_a_lite_message(h):
    reply = await h.stub.SendMessage(send_request(PARENT, b"hello", message_type=pb.LITE, lite_topic="s1"))
    assert reply.status.code == V2StatusCode.OK
    no_lite = await h.stub.SendMessage(send_request(PARENT, b"x", message_type=pb.NORMAL, message_id="ID-2"))
    assert no_lite.status.code == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    route = await h.stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=PARENT)))
    assert {tuple(q.accept_message_types) for q in route.message_queues} == {(pb.LITE,)}
    # the official Python client sends subscribe_lite("s1") as the name's characters, in order
    synced = await h.stub.SyncLiteSubscription(sync_request("s", "1"), metadata=CLIENT)
    assert synced.status.code == V2StatusCode.OK
    assert h.broker.lite.subscriptions.of("g", PARENT, "host@1@0@abc") == {"s1"}
    responses = await receive(h)
    [message] = [r.message for r in responses if r.WhichOneof("content") == "message"]
    assert message.body == b"hello" and message.system_properties.lite_topic == "s1"
    assert message.system_properties.message_type == pb.LITE
    ack = spb.AckMessageRequest()
    ack.group.name, ack.topic.name = "g", PARENT
    ack.entries.add(
        message_id=message.system_properties.message_id, receipt_handle=message.system_properties.receipt_handle
    )
    assert (await h.stub.AckMessage(ack, metadata=CLIENT)).entries[0].status.code == V2StatusCode.OK
    again = await h.stub.AckMessage(ack, metadata=CLIENT)
    assert again.entries[0].status.code == V2StatusCode.INVALID_RECEIPT_HANDLE


async def test_sync_refusals_quota_name_and_topic_type(h):
    h.broker.lite.subscriptions.quota = 1
    assert (await h.stub.SyncLiteSubscription(sync_request("s1"), metadata=CLIENT)).status.code == V2StatusCode.OK
    over = await h.stub.SyncLiteSubscription(sync_request("s2"), metadata=CLIENT)
    assert over.status.code == V2StatusCode.LITE_SUBSCRIPTION_QUOTA_EXCEEDED
    bad = await h.stub.SyncLiteSubscription(sync_request("a b"), metadata=CLIENT)
    assert bad.status.code == V2StatusCode.ILLEGAL_LITE_TOPIC
    h.broker.topics.create_or_update(TopicConfig("plain", 1, 1))
    wrong = await h.stub.SyncLiteSubscription(sync_request("s1", topic="plain"), metadata=CLIENT)
    assert wrong.status.code == V2StatusCode.ILLEGAL_TOPIC
    removed = await h.stub.SyncLiteSubscription(sync_request("s1", action=pb.PARTIAL_REMOVE), metadata=CLIENT)
    assert removed.status.code == V2StatusCode.OK and h.broker.lite.subscriptions.group_count("g") == 0


async def test_a_lite_message_nacked_then_forwarded_lands_in_the_groups_dlq(h):
    await h.stub.SendMessage(send_request(PARENT, b"poison", message_type=pb.LITE, lite_topic="s1"))
    await h.stub.SyncLiteSubscription(sync_request("s1"), metadata=CLIENT)
    [message] = [r.message for r in await receive(h) if r.WhichOneof("content") == "message"]
    change = spb.ChangeInvisibleDurationRequest(receipt_handle=message.system_properties.receipt_handle)
    change.group.name, change.topic.name = "g", PARENT
    change.invisible_duration.seconds = 60
    changed = await h.stub.ChangeInvisibleDuration(change, metadata=CLIENT)
    assert changed.status.code == V2StatusCode.OK and changed.receipt_handle != change.receipt_handle
    forward = spb.ForwardMessageToDeadLetterQueueRequest(receipt_handle=changed.receipt_handle)
    forward.group.name, forward.topic.name = "g", PARENT
    assert (await h.stub.ForwardMessageToDeadLetterQueue(forward, metadata=CLIENT)).status.code == V2StatusCode.OK
    [dead] = h.broker.store.get_messages("%DLQ%g", 0, 0, 10).messages()
    assert dead.body == b"poison" and dead.properties["DLQ_ORIGIN_LITE_TOPIC"] == "s1"
    assert dead.properties["DLQ_ORIGIN_TOPIC"] == PARENT
