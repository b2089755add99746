"""The proxy's consumer RPCs (proxy/consumer.py) over a fake client instance: what reaches the brokers."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.client.route_view import TopicRouteView
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.common.record import encode_record
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
        fields = {"popTime": 1, "invisibleTime": 60_000, "reviveQid": 0}
        if request.code == RequestCode.POP_MESSAGE:
            stored = []
            for offset in range(3):
                msg = MessageExt.create("T", f"m{offset}".encode())
                msg.queue_offset, msg.phys_offset = offset, 100 * offset
                stored.append(encode_record(msg))
            return request.response(ext_fields=fields, body=b"".join(stored))
        return request.response(ext_fields=fields)

    async def route(self, topic, refresh=False):
        return TopicRouteView(topic, broker_addrs={"b": "127.0.0.1:1"}, read_queues=(MessageQueue(topic, "b", 0),))


class NotFifo:
    async def is_fifo(self, group):
        return False


class Context:
    def __init__(self, client_id: str):
        self._metadata = (("x-mq-client-id", client_id),)

    def invocation_metadata(self):
        return self._metadata

    def time_remaining(self):
        return None


def rpcs_of(instance: FakeInstance, sessions: SessionRegistry | None = None) -> ProxyConsumerRpcs:
    return ProxyConsumerRpcs(instance, NotFifo(), sessions or SessionRegistry(), 1.0)  # type: ignore[arg-type]


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
    # a retried message's handle names the group's pop retry topic of the request's topic: served too
    ack.entries[0].receipt_handle = handle_of("%RETRY%G_Secret")
    reply = await rpcs.ack(ack, None)
    assert [e.status.code for e in reply.entries] == [V2StatusCode.OK]
    assert [(name, code) for name, code, _ in instance.sent] == [("b", RequestCode.ACK_MESSAGE)] * 2


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


@pytest.mark.parametrize("received", [0, 1])
async def test_a_push_receive_closed_by_its_client_mid_stream_hands_back_what_it_never_sent(received):
    """A push consumer's receive whose stream ends mid-way (the client cancelled it): the messages never sent
    are not kept invisible (renewed for hours while the client lives, or for the invisible time) but handed
    back at once; only the one at the cut may have reached the client."""
    instance = FakeInstance()
    sessions = SessionRegistry()
    sessions.heartbeat("c1", 0)
    rpcs = rpcs_of(instance, sessions)
    request = spb.ReceiveMessageRequest(group=pb.Resource(name="G"), batch_size=3, auto_renew=True)
    request.message_queue.topic.name = "T"
    request.message_queue.id = -1
    request.filter_expression.type = pb.TAG
    request.filter_expression.expression = "*"
    stream = rpcs.receive(request, Context("c1"))
    delivered = 0
    async for response in stream:  # the client goes away after the status and ``received`` messages
        delivered += response.WhichOneof("content") == "message"
        if delivered == received:
            break
    await stream.aclose()
    assert len(rpcs.renewer.renewals) <= received  # renewed: at most what it may have got

    def handed_back() -> list[dict]:
        return [s[2] for s in instance.sent if s[1] == RequestCode.CHANGE_MESSAGE_INVISIBLETIME]

    await eventually(lambda: len(handed_back()) == 3 - received)
    assert sorted(int(f["offset"]) for f in handed_back()) == list(range(received, 3))
    assert {f["invisibleTime"] for f in handed_back()} == {"0"}
