"""The v2 pull consumer RPCs (PullMessage, UpdateOffset, GetOffset, QueryOffset) over a real in-process broker
and a real grpc.aio channel; the offsets are the remoting pull's (``broker.offsets``)."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from tests.unit.grpc.test_grpc_servicer import CLIENT, Harness

from pocketmq.common.message import Message
from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.testing.polling import eventually


@pytest.fixture
async def h(tmp_path):
    harness = await Harness(tmp_path).start()
    harness.broker.topics.create_or_update(TopicConfig("t", 2, 2))
    yield harness
    await harness.close()


async def send(h, *bodies: str, tag: str = "a") -> None:
    messages = [Message.create("t", b, tags=tag) for b in bodies]
    await h.broker.messages.send(messages, topic="t", queue_id=0)


def queue(request, topic="t", queue_id=0):
    request.message_queue.topic.name = topic
    request.message_queue.id = queue_id
    request.message_queue.broker.name = "broker-a"
    return request


def pull_request(offset=0, *, group="g", batch=0, expression="*", filter_type=pb.TAG, poll_ms=0, **where):
    request = queue(spb.PullMessageRequest(), **where)
    request.group.name = group
    request.offset = offset
    request.batch_size = batch
    request.filter_expression.type = filter_type
    request.filter_expression.expression = expression
    request.long_polling_timeout.FromMilliseconds(poll_ms)
    return request


async def pull(h, request):
    """(status code, bodies, next offset) of one PullMessage."""
    responses = [r async for r in h.stub.PullMessage(request, metadata=CLIENT, timeout=10)]
    kinds = [r.WhichOneof("content") for r in responses]
    assert kinds[0] == "status" and kinds[-1] == "next_offset" and set(kinds[1:-1]) <= {"message"}, kinds
    bodies = [r.message.body.decode() for r in responses[1:-1]]
    return responses[0].status.code, bodies, responses[-1].next_offset


async def test_pull_reads_a_queue_in_order_in_batches_and_says_where_to_go_on(h):
    await send(h, "m0", "m1", "m2")
    assert await pull(h, pull_request(0, batch=2)) == (V2StatusCode.OK, ["m0", "m1"], 2)
    assert await pull(h, pull_request(2)) == (V2StatusCode.OK, ["m2"], 3)
    assert await pull(h, pull_request(3)) == (V2StatusCode.MESSAGE_NOT_FOUND, [], 3)
    # past the end: RocketMQ's rule, from the queue's start when nothing was ever removed from it
    assert (await pull(h, pull_request(9)))[::2] == (V2StatusCode.ILLEGAL_OFFSET, 0)


async def test_pull_filters_by_tag_and_skips_what_does_not_match(h):
    await send(h, "a0", tag="a")
    await send(h, "b0", tag="b")
    assert await pull(h, pull_request(0, expression="b")) == (V2StatusCode.OK, ["b0"], 2)
    assert await pull(h, pull_request(0, expression="c")) == (V2StatusCode.MESSAGE_NOT_FOUND, [], 2)


async def test_pull_filters_by_sql_on_properties_and_moves_past_what_does_not_match(h):
    messages = [Message.create("t", f"m{i}", properties={"n": str(i)}) for i in range(6)]
    await h.broker.messages.send(messages, topic="t", queue_id=0)
    sql = {"filter_type": pb.SQL, "expression": "n >= 2 AND n < 4"}
    assert await pull(h, pull_request(0, **sql)) == (V2StatusCode.OK, ["m2", "m3"], 6)
    assert await pull(h, pull_request(4, **sql)) == (V2StatusCode.MESSAGE_NOT_FOUND, [], 6)


async def test_a_pull_with_nothing_new_waits_for_the_next_message(h):
    waiting = asyncio.ensure_future(pull(h, pull_request(0, poll_ms=5000)))
    await eventually(lambda: h.broker.holds.held == 1)
    await send(h, "late")
    assert await waiting == (V2StatusCode.OK, ["late"], 1)


@pytest.mark.parametrize(
    "request_, code",
    [
        (pull_request(-1), V2StatusCode.ILLEGAL_OFFSET),
        (pull_request(0, group=""), V2StatusCode.ILLEGAL_CONSUMER_GROUP),
        (pull_request(0, filter_type=pb.SQL, expression="a >"), V2StatusCode.ILLEGAL_FILTER_EXPRESSION),
        (pull_request(0, topic="nope"), V2StatusCode.TOPIC_NOT_FOUND),
        (pull_request(0, queue_id=5), V2StatusCode.BAD_REQUEST),
        (pull_request(0, batch=-1), V2StatusCode.BAD_REQUEST),
    ],
)
async def test_pull_refusals_are_one_status(h, request_, code):
    responses = [r async for r in h.stub.PullMessage(request_, metadata=CLIENT, timeout=10)]
    assert [r.status.code for r in responses] == [code]


def offset_request(cls, offset=None, group="g", **where):
    request = queue(cls(), **where)
    request.group.name = group
    if offset is not None:
        request.offset = offset
    return request


def query_request(policy, timestamp_ms=None):
    request = queue(spb.QueryOffsetRequest())
    request.query_offset_policy = policy
    if timestamp_ms is not None:
        request.timestamp.FromMilliseconds(timestamp_ms)
    return request


async def test_offsets_are_the_remoting_consumers_offsets(h):
    await send(h, "m0", "m1", "m2")
    got = await h.stub.GetOffset(offset_request(spb.GetOffsetRequest), metadata=CLIENT)
    assert got.status.code == V2StatusCode.OFFSET_NOT_FOUND
    updated = await h.stub.UpdateOffset(offset_request(spb.UpdateOffsetRequest, 2), metadata=CLIENT)
    assert updated.status.code == V2StatusCode.OK
    assert h.broker.offsets.query("g", "t", 0) == 2
    h.broker.offsets.commit("g", "t", 0, 3)  # as a remoting UPDATE_CONSUMER_OFFSET does
    got = await h.stub.GetOffset(offset_request(spb.GetOffsetRequest), metadata=CLIENT)
    assert (got.status.code, got.offset) == (V2StatusCode.OK, 3)
    for bad in (-1, 4):
        refused = await h.stub.UpdateOffset(offset_request(spb.UpdateOffsetRequest, bad), metadata=CLIENT)
        assert refused.status.code == V2StatusCode.ILLEGAL_OFFSET


async def test_query_offset_by_policy(h):
    before_ms = h.clock.now_ms()
    await send(h, "m0")
    h.clock.advance(1000)
    await send(h, "m1")
    answers = [
        await h.stub.QueryOffset(q, metadata=CLIENT)
        for q in (
            query_request(pb.BEGINNING),
            query_request(pb.END),
            query_request(pb.TIMESTAMP, before_ms + 500),
            query_request(pb.TIMESTAMP),
        )
    ]
    assert [(a.status.code, a.offset) for a in answers] == [
        (V2StatusCode.OK, 0),
        (V2StatusCode.OK, 2),
        (V2StatusCode.OK, 1),
        (V2StatusCode.BAD_REQUEST, 0),
    ]
