"""The v2 servicer over a real in-process Broker, through a real grpc.aio channel.

The per-code table of SendMessage/QueryRoute is exercised end to end in tests/integration/test_grpc_codes.py;
here: telemetry and sessions, malformed bytes, limits, errors that must not break anything.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.grpc_codec import MessagingServiceStub
from pocketmq.runtime.clock import ManualClock
from pocketmq.server.grpc_server import MAX_GRPC_MESSAGE_BYTES, GrpcFrontEnd

CLIENT = (("x-mq-client-id", "host@1@0@abc"), ("x-mq-language", "PYTHON"))


class Harness:
    def __init__(self, tmp_path, **front_end_options):
        self.clock = ManualClock()
        self.broker = Broker(BrokerConfig(data_dir=tmp_path, remoting_port=0, grpc_port=0), clock=self.clock)
        self.front = GrpcFrontEnd(self.broker, "127.0.0.1", 0, scan_interval_ms=5, **front_end_options)
        self.channel = None

    async def start(self, *, broker: bool = True) -> Harness:
        port = await self.front.start()
        if broker:
            await self.broker.start(remoting_port=10911, grpc_port=port)
        self.channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{port}",
            options=[
                ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
            ],
        )
        self.stub = MessagingServiceStub(self.channel)
        return self

    async def close(self) -> None:
        await self.channel.close()
        await self.front.stop(0)
        await self.broker.shutdown()

    def raw(self, method: str):
        """A call of ``method`` that sends raw bytes (to send what no protobuf class would)."""
        return self.channel.unary_unary(f"/apache.rocketmq.v2.MessagingService/{method}")


@pytest.fixture
async def h(tmp_path):
    harness = await Harness(tmp_path).start()
    yield harness
    await harness.close()


def send_request(topic="t", body=b"hello", message_id="ID-1", **system):
    req = spb.SendMessageRequest()
    m = req.messages.add(body=body)
    m.topic.name = topic
    m.system_properties.message_id = message_id
    m.system_properties.message_type = system.pop("message_type", pb.NORMAL)
    for name, value in system.items():
        setattr(m.system_properties, name, value)
    return req


def producer_settings(*topics):
    command = spb.TelemetryCommand()
    command.settings.client_type = pb.PRODUCER
    command.settings.request_timeout.seconds = 3
    for topic in topics:
        command.settings.publishing.topics.add(name=topic)
    return command


def consumer_settings(group):
    command = spb.TelemetryCommand()
    command.settings.client_type = pb.SIMPLE_CONSUMER
    command.settings.subscription.group.name = group
    command.settings.subscription.subscriptions.add().topic.name = "t"
    return command


async def next_reply(call):
    async with asyncio.timeout(5):
        return await call.read()


async def test_producer_settings_are_completed_and_the_session_remembers_the_topics(h):
    call = h.stub.Telemetry(metadata=CLIENT)
    await call.write(producer_settings("a", "b"))
    reply = await next_reply(call)
    assert reply.status.code == V2StatusCode.OK
    s = reply.settings
    assert s.publishing.max_body_size == 4 * 1024 * 1024 and s.publishing.validate_message_type
    assert s.backoff_policy.max_attempts == 3 and s.backoff_policy.HasField("exponential_backoff")
    assert not s.metric.on and s.request_timeout.seconds == 3  # the client's own settings are echoed
    session = h.front.sessions.get("host@1@0@abc")
    assert session.client_type == "PRODUCER" and session.topics == ("a", "b") and session.outbox is not None
    await call.done_writing()
    assert await next_reply(call) is grpc.aio.EOF  # the client half-closed: the stream ends


async def test_consumer_settings_carry_the_groups_fifo_flag(h):
    h.broker.groups.create_or_update(SubscriptionGroupConfig("orders", consume_message_orderly=True))
    call = h.stub.Telemetry(metadata=CLIENT)
    await call.write(consumer_settings("orders"))
    s = (await next_reply(call)).settings
    assert s.subscription.fifo and s.subscription.receive_batch_size == 32
    assert s.subscription.long_polling_timeout.seconds == 20 and s.backoff_policy.max_attempts == 17
    assert len(s.backoff_policy.customized_backoff.next) == 18
    assert h.front.sessions.get("host@1@0@abc").group == "orders"
    call.cancel()


async def test_a_bad_telemetry_command_gets_a_status_and_the_stream_goes_on(h):
    call = h.channel.stream_stream("/apache.rocketmq.v2.MessagingService/Telemetry")(metadata=CLIENT)
    await call.write(b"\xff\xff\xff")  # not a TelemetryCommand
    bad = spb.TelemetryCommand.FromString(await next_reply(call))
    assert bad.status.code == V2StatusCode.BAD_REQUEST
    unknown = producer_settings()
    unknown.settings.client_type = pb.CLIENT_TYPE_UNSPECIFIED
    await call.write(unknown.SerializeToString())
    assert spb.TelemetryCommand.FromString(await next_reply(call)).status.code == V2StatusCode.UNRECOGNIZED_CLIENT_TYPE
    await call.write(producer_settings("t").SerializeToString())
    assert spb.TelemetryCommand.FromString(await next_reply(call)).status.code == V2StatusCode.OK
    call.cancel()


async def test_telemetry_without_a_client_id_is_refused(h):
    call = h.stub.Telemetry()
    await call.write(producer_settings("t"))
    assert (await next_reply(call)).status.code == V2StatusCode.CLIENT_ID_REQUIRED
    assert await next_reply(call) is grpc.aio.EOF
    assert len(h.front.sessions) == 0


async def test_heartbeat_keeps_a_session_alive_and_silence_expires_it(h):
    call = h.stub.Telemetry(metadata=CLIENT)
    await call.write(producer_settings("t"))
    await next_reply(call)
    h.clock.advance(100_000)
    beat = await h.stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.PRODUCER), metadata=CLIENT)
    assert beat.status.code == V2StatusCode.OK and h.front.sessions.get("host@1@0@abc").language == "PYTHON"
    h.clock.advance(100_000)  # 100 s since the heartbeat: still alive
    assert h.front.sessions.expire(h.clock.now_ms()) == [] and "host@1@0@abc" in h.front.sessions
    h.clock.advance(20_000)  # 120 s of silence
    assert await next_reply(call) is grpc.aio.EOF  # the expiry closed the stream
    assert "host@1@0@abc" not in h.front.sessions


async def test_termination_drops_the_session_at_once_and_the_client_ends_its_stream(h):
    call = h.stub.Telemetry(metadata=CLIENT)
    await call.write(producer_settings("t"))
    await next_reply(call)
    reply = await h.stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(), metadata=CLIENT)
    assert reply.status.code == V2StatusCode.OK and len(h.front.sessions) == 0
    await call.done_writing()  # the server left the ending to the client (the Python client logs an error else)
    assert await next_reply(call) is grpc.aio.EOF


async def test_a_terminated_stream_the_client_keeps_open_ends_after_the_linger(h):
    h.front.servicer.clients.terminated_stream_linger_s = 0.05
    call = h.stub.Telemetry(metadata=CLIENT)
    await call.write(producer_settings("t"))
    await next_reply(call)
    await h.stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(), metadata=CLIENT)
    assert await next_reply(call) is grpc.aio.EOF


async def test_session_rpcs_need_a_client_id(h):
    assert (await h.stub.Heartbeat(spb.HeartbeatRequest())).status.code == V2StatusCode.CLIENT_ID_REQUIRED
    reply = await h.stub.NotifyClientTermination(spb.NotifyClientTerminationRequest())
    assert reply.status.code == V2StatusCode.CLIENT_ID_REQUIRED


@pytest.mark.parametrize("method", ["SendMessage", "QueryRoute", "Heartbeat", "NotifyClientTermination"])
async def test_garbage_is_invalid_argument_and_the_server_goes_on(h, method):
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await h.raw(method)(b"\x0a\xff\xff\xff\xff", metadata=CLIENT)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (await h.stub.SendMessage(send_request())).status.code == V2StatusCode.OK


async def test_send_keeps_the_clients_message_id_and_a_4_mib_body_passes(h):
    reply = await h.stub.SendMessage(send_request(body=b"x" * (4 * 1024 * 1024), message_id="MY-ID"))
    assert reply.status.code == V2StatusCode.OK, reply.status.message
    assert reply.entries[0].message_id == "MY-ID" and reply.entries[0].status.code == V2StatusCode.OK


async def test_send_keeps_the_clients_message_id(h):
    reply = await h.stub.SendMessage(send_request(body=b"x" * (1024 * 1024), message_id="MY-ID"))
    assert reply.status.code == V2StatusCode.OK and reply.entries[0].message_id == "MY-ID"


async def test_too_many_sends_in_flight_is_too_many_requests(tmp_path):
    h = await Harness(tmp_path, max_inflight_sends=1).start()
    try:
        release = asyncio.Event()
        real_send = h.broker.messages.send

        async def slow_send(*args, **kwargs):
            await release.wait()
            return await real_send(*args, **kwargs)

        h.broker.messages.send = slow_send
        first = asyncio.ensure_future(h.stub.SendMessage(send_request(message_id="A")))
        async with asyncio.timeout(5):
            while h.front.servicer._inflight_sends == 0:
                await asyncio.sleep(0.001)
        second = await h.stub.SendMessage(send_request(message_id="B"))
        assert second.status.code == V2StatusCode.TOO_MANY_REQUESTS and second.entries[0].status.code == 42900
        release.set()
        assert (await first).status.code == V2StatusCode.OK
    finally:
        await h.close()


async def test_an_internal_failure_is_internal_server_error_and_only_that_request_fails(h):
    real_send = h.broker.messages.send

    async def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    h.broker.messages.send = broken
    reply = await h.stub.SendMessage(send_request())
    assert reply.status.code == V2StatusCode.INTERNAL_SERVER_ERROR and "fire" not in reply.status.message
    h.broker.messages.send = real_send
    assert (await h.stub.SendMessage(send_request())).status.code == V2StatusCode.OK


async def test_requests_before_the_broker_started_are_refused_cleanly(tmp_path):
    h = await Harness(tmp_path).start(broker=False)
    try:
        reply = await h.stub.SendMessage(send_request())
        assert reply.status.code == V2StatusCode.INTERNAL_SERVER_ERROR and "starting" in reply.status.message
    finally:
        await h.close()


async def test_consumer_rpcs_refuse_a_request_without_group_and_end_transaction_without_id(h):
    stream = h.stub.ReceiveMessage(spb.ReceiveMessageRequest())
    replies = [r async for r in stream]
    assert [r.status.code for r in replies] == [V2StatusCode.ILLEGAL_CONSUMER_GROUP]
    for call, request in (
        (h.stub.AckMessage, spb.AckMessageRequest()),
        (h.stub.QueryAssignment, spb.QueryAssignmentRequest()),
        (h.stub.ChangeInvisibleDuration, spb.ChangeInvisibleDurationRequest()),
    ):
        assert (await call(request)).status.code == V2StatusCode.ILLEGAL_CONSUMER_GROUP
    assert (await h.stub.EndTransaction(spb.EndTransactionRequest())).status.code == V2StatusCode.INVALID_TRANSACTION_ID


async def test_stop_ends_open_streams(tmp_path):
    h = await Harness(tmp_path).start()
    call = h.stub.Telemetry(metadata=CLIENT)
    await call.write(producer_settings("t"))
    await next_reply(call)
    await h.front.stop(1)
    assert await next_reply(call) is grpc.aio.EOF
    await h.channel.close()
    await h.broker.shutdown()
