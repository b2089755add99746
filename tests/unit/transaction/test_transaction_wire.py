"""The transaction wire forms: the remoting send reply and CHECK_TRANSACTION_STATE (a 4.x client decodes its body
and names the half message back by its offsets), and the gRPC side over a real in-process broker: a TRANSACTION
send's entry, EndTransaction's codes, and the recovery command a producer of the topic gets on its Telemetry
stream, which the official client's ``Message.fromProtobuf`` reads."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.v5.model.message import Message as OfficialMessage
from tests.unit.grpc.test_grpc_servicer import CLIENT, Harness, producer_settings, send_request

from pocketmq.broker.transaction.channels import HalfCheck
from pocketmq.common import properties as props
from pocketmq.common.message import MessageExt, parse_offset_msg_id
from pocketmq.common.record import decode_record
from pocketmq.common.topic import TRANS_HALF_TOPIC, MessageType, TopicConfig
from pocketmq.protocol.codes import RequestCode, V2StatusCode
from pocketmq.protocol.command import RemotingCommand, decode_frame
from pocketmq.server.remoting_broker import _send_reply
from pocketmq.server.remoting_transaction import check_command


def stored_half() -> MessageExt:
    half = MessageExt(
        topic=TRANS_HALF_TOPIC,
        body=b"order",
        properties={
            props.UNIQ_KEY: "U-1",
            props.PRODUCER_GROUP: "pg",
            props.TRANSACTION_PREPARED: "true",
            props.REAL_TOPIC: "orders",
            props.REAL_QUEUE_ID: "3",
            props.TAGS: "created",
        },
        queue_offset=17,
        phys_offset=4096,
        born_timestamp_ms=1_700_000_000_000,
        store_timestamp_ms=1_700_000_000_005,
        store_host=("10.0.0.1", 10911),
        born_host=("10.0.0.2", 5555),
    )
    return half


def test_check_command_names_the_half_record_and_carries_the_real_message():
    half = stored_half()
    command = check_command(HalfCheck(half, "U-1", "broker-a"))
    parsed = decode_frame(command.encode()[4:])  # as a client reads it off the wire
    assert parsed.code == RequestCode.CHECK_TRANSACTION_STATE
    fields = parsed.ext_fields
    assert (fields["tranStateTableOffset"], fields["commitLogOffset"]) == ("17", "4096")
    assert parse_offset_msg_id(fields["offsetMsgId"]) == (("10.0.0.1", 10911), 4096)
    assert (fields["msgId"], fields["transactionId"], fields["bname"], fields["topic"]) == (
        "U-1",
        "U-1",
        "broker-a",
        "orders",
    )
    body = decode_record(parsed.body)[0]
    assert (body.topic, body.queue_id, body.queue_offset, body.phys_offset) == ("orders", 3, 17, 4096)
    assert body.properties[props.PRODUCER_GROUP] == "pg" and body.uniq_key == "U-1" and body.body == b"order"


def test_a_half_send_reply_carries_the_transaction_id():
    from pocketmq.broker.messages import SendResult
    from pocketmq.store.api import PutStatus

    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "orders"})
    half = SendResult(PutStatus.PUT_OK, "U-1", "0A00000100002A9F0000000000001000", 3, 17, 4096, "orders", False, "U-1")
    fields = _send_reply(request, [half]).ext_fields
    assert (fields["msgId"], fields["queueId"], fields["queueOffset"], fields["transactionId"]) == (
        "0A00000100002A9F0000000000001000",
        "3",
        "17",
        "U-1",
    )
    plain = SendResult(PutStatus.PUT_OK, "U-2", "0A00000100002A9F0000000000002000", 1, 5, 8192, "orders")
    assert "transactionId" not in _send_reply(request, [plain]).ext_fields


@pytest.fixture
async def h(tmp_path):
    harness = await Harness(tmp_path).start()
    harness.broker.topics.create_or_update(TopicConfig("tx", 2, 2, message_type=MessageType.TRANSACTION))
    harness.broker.topics.create_or_update(TopicConfig("plain", 2, 2, message_type=MessageType.NORMAL))
    yield harness
    await harness.close()


def end_request(transaction_id="ID-1", resolution=pb.COMMIT, source=pb.SOURCE_CLIENT, topic="tx"):
    request = spb.EndTransactionRequest(
        message_id=transaction_id, transaction_id=transaction_id, resolution=resolution, source=source
    )
    request.topic.name = topic
    return request


def visible(broker, topic="tx"):
    return [m for q in range(2) for m in broker.store.get_messages(topic, q, 0, 100).messages()]


async def test_transaction_send_end_and_bad_endings(h):
    reply = await h.stub.SendMessage(send_request("tx", message_type=pb.TRANSACTION), metadata=CLIENT)
    assert reply.status.code == V2StatusCode.OK
    [entry] = reply.entries
    assert entry.transaction_id == entry.message_id == "ID-1"
    conflict = await h.stub.SendMessage(send_request("plain", message_type=pb.TRANSACTION), metadata=CLIENT)
    assert conflict.status.code == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert visible(h.broker) == []

    unspecified = await h.stub.EndTransaction(end_request(resolution=pb.TRANSACTION_RESOLUTION_UNSPECIFIED))
    assert unspecified.status.code == V2StatusCode.OK and visible(h.broker) == []
    unknown = await h.stub.EndTransaction(end_request("NOT-AN-ID"))
    assert unknown.status.code == V2StatusCode.INVALID_TRANSACTION_ID
    other_topic = await h.stub.EndTransaction(end_request(topic="plain"))
    assert other_topic.status.code == V2StatusCode.INVALID_TRANSACTION_ID
    blank = await h.stub.EndTransaction(end_request(""))
    assert blank.status.code == V2StatusCode.INVALID_TRANSACTION_ID

    assert (await h.stub.EndTransaction(end_request())).status.code == V2StatusCode.OK
    [committed] = visible(h.broker)
    assert committed.uniq_key == "ID-1" and committed.properties[props.PRODUCER_GROUP] == "tx"
    again = await h.stub.EndTransaction(end_request(resolution=pb.ROLLBACK))
    assert again.status.code == V2StatusCode.OK and "ended already" in again.status.message
    assert len(visible(h.broker)) == 1


async def test_recovery_duration_is_the_check_immunity_and_bounded(h):
    ok = send_request("tx", message_type=pb.TRANSACTION, message_id="ID-2")
    ok.messages[0].system_properties.orphaned_transaction_recovery_duration.seconds = 90
    assert (await h.stub.SendMessage(ok, metadata=CLIENT)).status.code == V2StatusCode.OK
    [half] = h.broker.store.get_messages(TRANS_HALF_TOPIC, 0, 0, 10).messages()
    assert half.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "90"
    too_long = send_request("tx", message_type=pb.TRANSACTION, message_id="ID-3")
    too_long.messages[0].system_properties.orphaned_transaction_recovery_duration.seconds = 7200
    assert (await h.stub.SendMessage(too_long, metadata=CLIENT)).status.code == V2StatusCode.BAD_REQUEST


async def test_a_check_reaches_a_producer_of_the_topic_as_a_recovery_command(h):
    call = h.stub.Telemetry(metadata=CLIENT)
    await call.write(producer_settings("tx"))
    settings_reply = await call.read()
    assert settings_reply.status.code == V2StatusCode.OK
    await h.stub.SendMessage(send_request("tx", message_type=pb.TRANSACTION, body=b"orphan"), metadata=CLIENT)
    service = h.broker.transactions
    h.clock.advance(service._settings().timeout_ms)
    await service.run_round()
    command = await asyncio.wait_for(call.read(), 5)
    recover = command.recover_orphaned_transaction_command
    assert recover.transaction_id == "ID-1"
    message = OfficialMessage().fromProtobuf(recover.message)  # what the official client builds from it
    assert (message.topic, message.message_id, message.body) == ("tx", "ID-1", b"orphan")
    assert not message.corrupted  # its body digest checks out
    answer = end_request(source=pb.SOURCE_SERVER_CHECK)
    assert (await h.stub.EndTransaction(answer)).status.code == V2StatusCode.OK
    assert [m.body for m in visible(h.broker)] == [b"orphan"]
    assert h.broker.metrics.value("pocketmq_transaction_resolutions_total", source="CHECK", result="COMMIT") == 1
    call.cancel()
