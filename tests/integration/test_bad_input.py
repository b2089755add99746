"""Bad input never takes the broker down: each gets its response code or a closed connection (that one only),
and after each the broker still serves a normal send and pull to everyone else."""

from __future__ import annotations

import asyncio
import json
import struct

import pytest
from remoting_calls import call, client, serve_for_module  # noqa: F401 (client is a fixture)

from pocketmq.common.dead_letter_reference import REFERENCE_TOPIC
from pocketmq.common.record import decode_records
from pocketmq.protocol.codes import ESCAPE_PUT_MESSAGE
from pocketmq.protocol.codes import RequestCode as R
from pocketmq.protocol.codes import ResponseCode as C
from pocketmq.protocol.command import SERIALIZE_ROCKETMQ, FrameDecoder, RemotingCommand
from pocketmq.protocol.transport import RemotingClient

MAX_MESSAGE_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from serve_for_module(tmp_path_factory, "broker-bad", ["--set", f"max_message_bytes={MAX_MESSAGE_BYTES}"])


async def assert_still_serving(addr: str, topic: str = "bad-input-canary") -> None:
    """A fresh connection sends one message and pulls it back."""
    remoting = RemotingClient()
    try:
        sent = await call(remoting, addr, R.SEND_MESSAGE_V2, {"a": "pg", "b": topic, "e": 0, "i": ""}, b"alive")
        assert sent.code == C.SUCCESS, sent.remark
        queue_offset = int(sent.ext_fields["queueOffset"])
        pulled = await call(
            remoting,
            addr,
            R.PULL_MESSAGE,
            {
                "consumerGroup": "g-canary",
                "topic": topic,
                "queueId": 0,
                "queueOffset": queue_offset,
                "maxMsgNums": 1,
                "sysFlag": 0,
            },
        )
        assert pulled.code == C.SUCCESS, pulled.remark
        assert [m.body for m in decode_records(pulled.body)] == [b"alive"]
    finally:
        await remoting.close()


async def raw_exchange(addr: str, data: bytes, timeout_s: float = 5.0) -> bytes:
    """Write raw bytes on a new connection; return what comes back until the broker closes it."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(timeout_s):
            return await reader.read()  # b"" / everything until EOF: the broker closed the connection
    finally:
        writer.close()


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">i", 2) + b"xx",  # length below the 4-byte header-length field
        struct.pack(">i", 1 << 30),  # length over the frame limit
        struct.pack(">ii", 12, 8) + b"{not json",  # JSON header that does not parse
        struct.pack(">ii", 8, (9 << 24) | 0) + b"abcd",  # unknown serialization type
        struct.pack(">ii", 8, 100) + b"abcd",  # header length past the frame
    ],
    ids=["too-short", "too-long", "bad-json", "bad-serialize-type", "header-overflow"],
)
async def test_malformed_frame_closes_only_that_connection(broker, client, frame):
    bystander = await call(client, broker.remoting, R.GET_MAX_OFFSET, {"topic": "bad-input-canary", "queueId": 0})
    assert bystander.code == C.SUCCESS
    assert await raw_exchange(broker.remoting, frame) == b""
    # the connection opened before is still up and served
    again = await call(client, broker.remoting, R.GET_MAX_OFFSET, {"topic": "bad-input-canary", "queueId": 0})
    assert again.code == C.SUCCESS
    await assert_still_serving(broker.remoting)


async def test_unknown_request_code(broker, client):
    reply = await call(client, broker.remoting, 31999, {"x": "y"})
    assert reply.code == C.REQUEST_CODE_NOT_SUPPORTED
    assert "31999" in reply.remark
    await assert_still_serving(broker.remoting)


@pytest.mark.parametrize(
    "code,fields,missing",
    [
        (R.PULL_MESSAGE, {"consumerGroup": "g", "topic": "t", "queueOffset": 0}, "queueId"),
        (R.SEND_MESSAGE_V2, {"a": "pg", "e": 0}, "topic"),
        (R.QUERY_CONSUMER_OFFSET, {"topic": "t", "queueId": 0}, "consumerGroup"),
        (R.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "t", "queueId": 0}, "commitOffset"),
        (R.GET_MAX_OFFSET, {"queueId": 0}, "topic"),
        (R.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "t", "queueId": 0}, "timestamp"),
        (R.VIEW_MESSAGE_BY_ID, {}, "offset"),
        (R.QUERY_MESSAGE, {"topic": "t"}, "key"),
        (R.UNREGISTER_CLIENT, {"producerGroup": "pg"}, "clientID"),
        (R.DELETE_TOPIC_IN_BROKER, {}, "topic"),
    ],
)
async def test_missing_header_field_is_invalid_parameter_naming_it(broker, client, code, fields, missing):
    reply = await call(client, broker.remoting, code, fields)
    assert reply.code == C.INVALID_PARAMETER
    assert missing in reply.remark
    await assert_still_serving(broker.remoting)


async def test_field_of_the_wrong_type_is_invalid_parameter(broker, client):
    reply = await call(client, broker.remoting, R.GET_MIN_OFFSET, {"topic": "t", "queueId": "zero"})
    assert reply.code == C.INVALID_PARAMETER
    assert "queueId" in reply.remark


async def test_oversized_body_is_message_illegal(broker, client):
    reply = await call(
        client,
        broker.remoting,
        R.SEND_MESSAGE_V2,
        {"a": "pg", "b": "bad-input-big", "e": 0},
        b"x" * (MAX_MESSAGE_BYTES + 1),
    )
    assert reply.code == C.MESSAGE_ILLEGAL
    at_limit = await call(
        client, broker.remoting, R.SEND_MESSAGE_V2, {"a": "pg", "b": "bad-input-big", "e": 0}, b"x" * MAX_MESSAGE_BYTES
    )
    assert at_limit.code == C.SUCCESS, at_limit.remark
    await assert_still_serving(broker.remoting)


async def test_empty_body_and_broken_batch_are_message_illegal(broker, client):
    empty = await call(client, broker.remoting, R.SEND_MESSAGE_V2, {"a": "pg", "b": "bad-input-empty", "e": 0})
    assert empty.code == C.MESSAGE_ILLEGAL
    batch = await call(
        client,
        broker.remoting,
        R.SEND_BATCH_MESSAGE,
        {"a": "pg", "b": "bad-input-batch", "e": 0, "m": "true"},
        b"\x00\x00\x00\x30garbage",
    )
    assert batch.code == C.MESSAGE_ILLEGAL
    await assert_still_serving(broker.remoting)


@pytest.mark.parametrize("topic", ["has space", "a" * 200, "semi;colon", ""])
async def test_illegal_topic_names_are_refused(broker, client, topic):
    sent = await call(client, broker.remoting, R.SEND_MESSAGE_V2, {"a": "pg", "b": topic, "e": 0}, b"x")
    assert sent.code in (C.INVALID_PARAMETER, C.TOPIC_NOT_EXIST), sent.remark
    created = await call(client, broker.remoting, R.UPDATE_AND_CREATE_TOPIC, {"topic": topic, "readQueueNums": 1})
    assert created.code == C.INVALID_PARAMETER
    await assert_still_serving(broker.remoting)


async def test_send_to_a_system_topic_or_illegal_queue_is_refused(broker, client):
    system = await call(client, broker.remoting, R.SEND_MESSAGE_V2, {"a": "pg", "b": "TBW102", "e": 0}, b"x")
    assert system.code == C.INVALID_PARAMETER
    queue = await call(client, broker.remoting, R.SEND_MESSAGE_V2, {"a": "pg", "b": "bad-input-q", "e": 999}, b"x")
    assert queue.code == C.SYSTEM_ERROR and "queue id" in queue.remark
    references = {"a": "pg", "b": REFERENCE_TOPIC, "e": 0}
    sent = await call(client, broker.remoting, R.SEND_MESSAGE_V2, references, b"x")
    assert sent.code == C.INVALID_PARAMETER  # no client writes dead-letter references
    # a slave acting as master escapes the references its revive writes (as it escapes CKs)
    escaped = await call(client, broker.remoting, ESCAPE_PUT_MESSAGE, references, b"x")
    assert escaped.code == C.SUCCESS, escaped.remark
    other = {"a": "pg", "b": "TBW102", "e": 0}
    assert (await call(client, broker.remoting, ESCAPE_PUT_MESSAGE, other, b"x")).code == C.INVALID_PARAMETER


async def test_pull_of_an_unknown_topic_is_topic_not_exist(broker, client):
    reply = await call(
        client,
        broker.remoting,
        R.PULL_MESSAGE,
        {
            "consumerGroup": "g",
            "topic": "bad-input-never-created",
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 1,
            "sysFlag": 0,
        },
    )
    assert reply.code == C.TOPIC_NOT_EXIST


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[1, 2]",
        json.dumps({"consumerDataSet": []}).encode(),
        json.dumps({"clientID": "c", "consumerDataSet": [{"groupName": "bad group"}]}).encode(),
        json.dumps({"clientID": "c", "consumerDataSet": "nope"}).encode(),
    ],
)
async def test_bad_heartbeats_are_invalid_parameter(broker, client, body):
    reply = await call(client, broker.remoting, R.HEART_BEAT, body=body)
    assert reply.code == C.INVALID_PARAMETER
    await assert_still_serving(broker.remoting)


async def test_binary_header_request_is_answered_in_binary(broker):
    request = RemotingCommand.request(R.GET_MAX_OFFSET, {"topic": "bad-input-canary", "queueId": "0"})
    request.serialize_type = SERIALIZE_ROCKETMQ
    host, port = broker.remoting.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request.encode())
        await writer.drain()
        decoder = FrameDecoder()
        replies = []
        async with asyncio.timeout(5):
            while not replies:
                replies = decoder.feed(await reader.read(65536))
    finally:
        writer.close()
    (reply,) = replies
    assert (reply.serialize_type, reply.code, reply.opaque, reply.is_response) == (
        SERIALIZE_ROCKETMQ,
        C.SUCCESS,
        request.opaque,
        True,
    )
    assert "offset" in reply.ext_fields


async def test_lenient_field_forms_are_accepted(broker):
    """Numbers and booleans as JSON numbers/booleans (as some 4.x clients send them), not strings."""
    header = {
        "code": R.PULL_MESSAGE,
        "language": "NODE_JS",
        "version": 317,
        "opaque": 77,
        "flag": 0,
        "extFields": {
            "consumerGroup": "g-lenient",
            "topic": "bad-input-canary",
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 32.0,
            "sysFlag": 0,
            "commitOffset": -1,
            "suspendTimeoutMillis": 0,
            "subscription": "*",
            "subVersion": 0,
            "AccessKey": "",
            "Signature": "",
        },
    }
    raw = json.dumps(header).encode()
    frame = struct.pack(">ii", 4 + len(raw), len(raw)) + raw
    host, port = broker.remoting.rsplit(":", 1)
    await assert_still_serving(broker.remoting)  # the canary topic has a message now
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(frame)
        await writer.drain()
        decoder = FrameDecoder()
        replies = []
        async with asyncio.timeout(5):
            while not replies:
                replies = decoder.feed(await reader.read(1 << 20))
    finally:
        writer.close()
    assert replies[0].opaque == 77
    assert replies[0].code == C.SUCCESS, replies[0].remark
