"""gRPC pull and offsets (PullMessage, UpdateOffset, GetOffset, QueryOffset) against a real ``pocketmq serve``,
beside the SDK's remoting pull consumer on the same queue and group: both read the same messages and share the
group's committed offset. The official Python client (5.1.2) has no pull consumer, so raw v2 stubs stand in."""

from __future__ import annotations

import pytest
from grpc_support import CLIENT_ID, stub
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.client import Admin, ClientConfig, Message, Producer, PullConsumer
from pocketmq.common.message import MessageQueue
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.slow


def with_queue(request, topic: str, group: str | None = "pull_g"):
    request.message_queue.topic.name = topic
    request.message_queue.id = 0
    request.message_queue.broker.name = "broker-a"
    if group is not None:
        request.group.name = group
    return request


@pytest.mark.timeout(60)
def test_grpc_pull_and_offsets_share_the_remoting_consumers_queue_and_offsets(tmp_path):
    broker = broker_process(tmp_path / "b").start()
    channel, messaging = stub(broker.grpc)
    config = ClientConfig(namesrv_addr=broker.namesrv)
    try:
        with Admin(config) as admin:
            admin.create_topic("pull_grpc", queues=1)
        with Producer(config) as producer:
            for i in range(5):
                producer.send(Message.create("pull_grpc", f"m{i}", tags="even" if i % 2 == 0 else "odd"))

        request = with_queue(spb.PullMessageRequest(offset=1, batch_size=3), "pull_grpc")
        request.filter_expression.type = pb.TAG
        request.filter_expression.expression = "*"
        responses = list(messaging.PullMessage(request, metadata=CLIENT_ID, timeout=10))
        assert responses[0].status.code == V2StatusCode.OK
        messages = [r.message for r in responses[1:-1]]
        assert [m.body for m in messages] == [b"m1", b"m2", b"m3"] and responses[-1].next_offset == 4
        assert [m.system_properties.queue_offset for m in messages] == [1, 2, 3]
        assert [m.system_properties.tag for m in messages] == ["odd", "even", "odd"]

        update = with_queue(spb.UpdateOffsetRequest(offset=4), "pull_grpc")
        assert messaging.UpdateOffset(update, metadata=CLIENT_ID).status.code == V2StatusCode.OK
        queue = MessageQueue("pull_grpc", "broker-a", 0)
        with PullConsumer("pull_g", config) as consumer:
            assert consumer.committed(queue) == 4  # the remoting consumer sees the gRPC commit
            assert [m.body for m in consumer.pull(queue, 4, 32).messages] == [b"m4"]
            consumer.commit(queue, 5)
        got = messaging.GetOffset(with_queue(spb.GetOffsetRequest(), "pull_grpc"), metadata=CLIENT_ID)
        assert (got.status.code, got.offset) == (V2StatusCode.OK, 5)  # and the other way round

        ends = [
            messaging.QueryOffset(
                with_queue(spb.QueryOffsetRequest(query_offset_policy=policy), "pull_grpc", None), metadata=CLIENT_ID
            )
            for policy in (pb.BEGINNING, pb.END)
        ]
        assert [(e.status.code, e.offset) for e in ends] == [(V2StatusCode.OK, 0), (V2StatusCode.OK, 5)]
        missing = messaging.GetOffset(with_queue(spb.GetOffsetRequest(), "pull_grpc", "other_g"), metadata=CLIENT_ID)
        assert missing.status.code == V2StatusCode.OFFSET_NOT_FOUND
    finally:
        channel.close()
        assert broker.stop() == 0, broker.log_tail()
