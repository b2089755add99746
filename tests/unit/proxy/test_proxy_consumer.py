"""The proxy's consumer RPCs (proxy/consumer.py) over a fake client instance: what reaches the brokers."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.protocol.codes import RequestCode, V2StatusCode
from pocketmq.proxy.consumer import ProxyConsumerRpcs
from pocketmq.runtime.clock import ManualClock
from pocketmq.server.sessions import SessionRegistry
from pocketmq.testing.polling import eventually

pytestmark = pytest.mark.timeout(10)


class FakeInstance:
    """Answers every broker request with SUCCESS and remembers it."""

    def __init__(self):
        self.clock = ManualClock()
        self.sent: list[tuple[str, int, dict]] = []

    async def invoke_broker(self, broker_name, request, timeout_s):
        self.sent.append((broker_name, request.code, dict(request.ext_fields)))
        return request.response(ext_fields={"popTime": 1, "invisibleTime": 1000, "reviveQid": 0})


def rpcs_of(instance: FakeInstance) -> ProxyConsumerRpcs:
    return ProxyConsumerRpcs(instance, None, SessionRegistry(), 1.0)  # type: ignore[arg-type]


def handle_of(topic: str) -> str:
    return ReceiptHandle(topic, 0, 0, 60_000, 0, 0, "b", 0, 5, 100).encode()


async def test_an_ack_or_change_whose_handle_names_another_topic_than_the_request_is_refused():
    """Rights are checked on the request's topic: a handle of another topic would be acked or changed there by
    the proxy's own (super) user, without the caller's right on that topic."""
    instance = FakeInstance()
    rpcs = rpcs_of(instance)
    ack = spb.AckMessageRequest(
        group=pb.Resource(name="G"),
        topic=pb.Resource(name="Allowed"),
        entries=[spb.AckMessageEntry(message_id="x", receipt_handle=handle_of("Secret"))],
    )
    reply = await rpcs.ack(ack, None)
    assert [e.status.code for e in reply.entries] == [V2StatusCode.INVALID_RECEIPT_HANDLE]
    change = spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name="G"),
        topic=pb.Resource(name="Allowed"),
        receipt_handle=handle_of("Secret"),
        message_id="x",
    )
    change.invisible_duration.seconds = 10
    reply = await rpcs.change_invisible(change, None)
    assert reply.status.code == V2StatusCode.INVALID_RECEIPT_HANDLE
    assert instance.sent == []  # nothing reached a broker

    ack.topic.name = "Secret"  # the handle's own topic: served
    reply = await rpcs.ack(ack, None)
    assert [e.status.code for e in reply.entries] == [V2StatusCode.OK]
    assert [(name, code) for name, code, _ in instance.sent] == [("b", RequestCode.ACK_MESSAGE)]


async def test_a_receive_without_a_session_cancelled_during_its_pop_hands_back_what_the_pop_brings():
    """The broker's long poll cannot be ended: a receive cancelled while it waits (a client with no session,
    so no goodbye to wait for) leaves the POP running, and what it pops goes to the hand-back, not nowhere."""
    rpcs = rpcs_of(FakeInstance())
    reply_ready = asyncio.Event()
    handed: list[str] = []

    async def pop():
        await reply_ready.wait()
        return "popped"

    rpcs._hand_back_when_popped = lambda task, group: handed.append(task.result())  # type: ignore[method-assign]
    receiving = asyncio.ensure_future(rpcs._pop_unless_gone(pop(), "G", None))
    await asyncio.sleep(0)
    receiving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await receiving
    reply_ready.set()
    await eventually(lambda: handed == ["popped"])
