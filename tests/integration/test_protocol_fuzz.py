"""A protocol fuzzer against a real broker: structured-but-wrong requests for every served request code of the
remoting port (``pocketmq.testing.protocol_fuzz``) and every RPC of the gRPC port, in batches; after each batch
the broker is up, its RSS is under a bound, a normal client still sends and reads within its usual latency, the
state outside the fuzzer's ``fz-`` names is unchanged (topics, groups, offsets, a sentinel message), and its log
holds no traceback.

``make test`` runs a few seconds of it; ``make fuzz`` runs ``FUZZ_SECONDS`` (and ``FUZZ_SEED``). A failure
names the seed and the case index; ``FUZZ_SEED=<seed> FUZZ_FIRST=<index>`` starts there.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time

import grpc
import pytest
from grpc_support import CLIENT_ID, route_request, stub
from remoting_calls import call
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.common.record import decode_records
from pocketmq.protocol.codes import RequestCode as R
from pocketmq.protocol.codes import ResponseCode as C
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.command import SERIALIZE_ROCKETMQ, RemotingCommand
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.processes import broker_process
from pocketmq.testing.protocol_fuzz import FUZZ_PREFIX, case_rng, remoting_case

FUZZ_SECONDS = float(os.environ.get("FUZZ_SECONDS", "6"))
FUZZ_SEED = int(os.environ.get("FUZZ_SEED", str(random.SystemRandom().randrange(1 << 32))))
FUZZ_FIRST = int(os.environ.get("FUZZ_FIRST", "0"))
BATCH = 100
RSS_BOUND_BYTES = 400 * 1024 * 1024
NORMAL_LATENCY_BOUND_S = 2.0  # a send and a pull on the loaded test machine; they take milliseconds when idle
SENTINEL_TOPIC, SENTINEL_GROUP = "sentinel-topic", "sentinel-group"

pytestmark = pytest.mark.timeout(FUZZ_SECONDS + 90)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("fuzz"), "broker-fuzz").start()

    async def set_up():
        client = RemotingClient()
        try:
            await set_up_sentinel(client, proc.remoting)
        finally:
            await client.close()

    asyncio.run(set_up())
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def snapshot(client: RemotingClient, addr: str) -> dict:
    """The stored state outside the fuzzer's names."""
    topics = json.loads((await call(client, addr, R.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
    groups = json.loads((await call(client, addr, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)["subscriptionGroupTable"]
    offset = await call(
        client,
        addr,
        R.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": SENTINEL_GROUP, "topic": SENTINEL_TOPIC, "queueId": 0, "setZeroIfNotFound": False},
    )

    def ours(name: str) -> bool:
        return FUZZ_PREFIX in name

    return {
        "topics": {k: v for k, v in topics.items() if not ours(k)},
        "groups": {k: v for k, v in groups.items() if not ours(k)},
        "offset": offset.ext_fields.get("offset"),
    }


async def normal_client_round(client: RemotingClient, addr: str) -> float:
    """A send and the pull of the sentinel message; the seconds they took."""
    started = time.monotonic()
    sent = await call(client, addr, R.SEND_MESSAGE_V2, {"a": "pg", "b": SENTINEL_TOPIC, "e": 1, "i": ""}, b"probe")
    assert sent.code == C.SUCCESS, sent.remark
    pulled = await call(
        client,
        addr,
        R.PULL_MESSAGE,
        {
            "consumerGroup": "reader",
            "topic": SENTINEL_TOPIC,
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 1,
            "sysFlag": 0,
        },
    )
    assert pulled.code == C.SUCCESS and [m.body for m in decode_records(pulled.body)] == [b"sentinel"]
    return time.monotonic() - started


def check_health(broker, baseline: dict, state: dict, latency_s: float, where: str) -> None:
    assert broker.proc.poll() is None, f"{where}: the broker exited\n{broker.log_tail()}"
    assert rss_bytes(broker.proc.pid) < RSS_BOUND_BYTES, f"{where}: RSS {rss_bytes(broker.proc.pid)}"
    assert latency_s < NORMAL_LATENCY_BOUND_S, f"{where}: a normal send and pull took {latency_s:.2f} s"
    assert state == baseline, f"{where}: stored state changed"
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "handler_failed" not in log, f"{where}:\n{broker.log_tail(60)}"


async def set_up_sentinel(client: RemotingClient, addr: str) -> None:
    created = await call(client, addr, R.UPDATE_AND_CREATE_TOPIC, {"topic": SENTINEL_TOPIC, "readQueueNums": 2})
    assert created.code == C.SUCCESS, created.remark
    sent = await call(client, addr, R.SEND_MESSAGE_V2, {"a": "pg", "b": SENTINEL_TOPIC, "e": 0, "i": ""}, b"sentinel")
    assert sent.code == C.SUCCESS, sent.remark
    group = json.dumps({"groupName": SENTINEL_GROUP, "retryMaxTimes": 5}).encode()
    assert (await call(client, addr, R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group)).code == C.SUCCESS
    committed = await call(
        client,
        addr,
        R.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": SENTINEL_GROUP, "topic": SENTINEL_TOPIC, "queueId": 0, "commitOffset": 1},
    )
    assert committed.code == C.SUCCESS, committed.remark
    await normal_client_round(client, addr)  # its reader group exists from here on


async def test_remoting_fuzz(broker):
    addr = broker.remoting
    normal, fuzzing = RemotingClient(), RemotingClient()
    try:
        baseline = await snapshot(normal, addr)
        deadline = time.monotonic() + FUZZ_SECONDS / 2
        index = FUZZ_FIRST
        while time.monotonic() < deadline:
            first = index
            for index in range(first, first + BATCH):
                case = remoting_case(FUZZ_SEED, index)
                request = RemotingCommand.request(case.code, case.fields, case.body)
                if case.binary_header:
                    request.serialize_type = SERIALIZE_ROCKETMQ
                reply = await fuzzing.invoke(addr, request, 10.0)
                where = f"FUZZ_SEED={FUZZ_SEED} FUZZ_FIRST={index}: {case.describe()}"
                assert reply.code != C.SYSTEM_ERROR, f"{where} -> {reply.code} {reply.remark}"
                if case.expect is not None:
                    assert reply.code == case.expect, f"{where} -> {reply.code} {reply.remark}"
            index += 1
            latency_s = await normal_client_round(normal, addr)
            check_health(
                broker,
                baseline,
                await snapshot(normal, addr),
                latency_s,
                f"after cases {first}..{index - 1} of FUZZ_SEED={FUZZ_SEED}",
            )
    finally:
        await normal.close()
        await fuzzing.close()


# -- gRPC ---------------------------------------------------------------------------------------------------------
_BAD_NAMES = ("../x", "a/b", "t\n", "", " ", "x" * 300, "t\u00e9")


def grpc_case(seed: int, index: int, address: str):
    """(method, request or raw bytes, what is wrong) for the ``index``-th gRPC case of ``seed``."""
    rng = case_rng(seed, index)
    kind = rng.randrange(8)
    if kind == 0:
        request = spb.SendMessageRequest()
        m = request.messages.add(body=rng.choice([b"x", b""]))
        m.topic.name = rng.choice((FUZZ_PREFIX + "t0",) + _BAD_NAMES)
        m.system_properties.message_id = rng.choice(["fz-id", "", "a b", "x" * 200])
        m.system_properties.message_type = pb.NORMAL
        m.system_properties.born_timestamp.seconds = rng.choice([2**62, -(2**62), -1])
        return "SendMessage", request, "a send with a wrong born timestamp, topic, id or body"
    if kind == 1:
        return "QueryRoute", route_request(rng.choice(_BAD_NAMES), address), "a route of a bad topic"
    if kind == 2:
        request = spb.ReceiveMessageRequest(batch_size=rng.choice([-1, -(2**31)]))
        request.group.name = FUZZ_PREFIX + "g0"
        request.message_queue.topic.name = FUZZ_PREFIX + "t0"
        request.filter_expression.type = pb.TAG
        request.filter_expression.expression = "*"
        request.long_polling_timeout.seconds = rng.choice([-5, 1])
        request.invisible_duration.seconds = rng.choice([-1, 10**9, 30])
        return "ReceiveMessage", request, "a receive with a negative batch, polling or invisible time"
    if kind == 3:
        request = spb.AckMessageRequest()
        request.group.name = rng.choice((FUZZ_PREFIX + "g0",) + _BAD_NAMES)
        request.topic.name = FUZZ_PREFIX + "t0"
        request.entries.add(message_id="fz", receipt_handle=rng.choice(["", "garbage", "1 2 3", "\x00" * 40]))
        return "AckMessage", request, "an ack of a garbage receipt handle"
    if kind == 4:
        request = spb.ChangeInvisibleDurationRequest(receipt_handle="garbage", message_id="fz")
        request.group.name = FUZZ_PREFIX + "g0"
        request.topic.name = FUZZ_PREFIX + "t0"
        request.invisible_duration.seconds = rng.choice([-1, 10**12])
        return "ChangeInvisibleDuration", request, "a negative or huge invisible duration"
    if kind == 5:
        request = spb.QueryAssignmentRequest()
        request.topic.name = rng.choice(_BAD_NAMES)
        request.group.name = rng.choice(_BAD_NAMES)
        return "QueryAssignment", request, "an assignment of bad names"
    if kind == 6:
        request = spb.ForwardMessageToDeadLetterQueueRequest(
            receipt_handle="garbage", message_id="fz", delivery_attempt=rng.choice([-1, 2**31 - 1])
        )
        request.group.name = FUZZ_PREFIX + "g0"
        request.topic.name = rng.choice((FUZZ_PREFIX + "t0",) + _BAD_NAMES)
        return "ForwardMessageToDeadLetterQueue", request, "a forward of a garbage handle"
    method = rng.choice(["SendMessage", "QueryRoute", "AckMessage", "Heartbeat", "ChangeInvisibleDuration"])
    return method, bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))), "undecodable bytes"


def grpc_status(channel: grpc.Channel, method: str, request) -> int | grpc.StatusCode:
    """The v2 status code of the reply (the last one of a stream), or the gRPC status of a failed call."""
    path = f"/apache.rocketmq.v2.MessagingService/{method}"
    serialize = (lambda raw: raw) if isinstance(request, bytes) else (lambda message: message.SerializeToString())
    reply_class = getattr(spb, f"{method}Response")
    try:
        if method == "ReceiveMessage":
            call_ = channel.unary_stream(
                path, request_serializer=serialize, response_deserializer=reply_class.FromString
            )
            replies = [r for r in call_(request, timeout=10, metadata=CLIENT_ID) if r.HasField("status")]
            return replies[-1].status.code
        call_ = channel.unary_unary(path, request_serializer=serialize, response_deserializer=reply_class.FromString)
        return call_(request, timeout=10, metadata=CLIENT_ID).status.code
    except grpc.RpcError as exc:
        return exc.code()


async def test_grpc_fuzz(broker):
    normal = RemotingClient()
    channel, _ = stub(broker.grpc)
    try:
        baseline = await snapshot(normal, broker.remoting)
        deadline = time.monotonic() + FUZZ_SECONDS / 2
        index = FUZZ_FIRST
        while time.monotonic() < deadline:
            first = index
            for index in range(first, first + BATCH // 4):
                method, request, why = grpc_case(FUZZ_SEED, index, broker.grpc)
                code = await asyncio.to_thread(grpc_status, channel, method, request)
                where = f"FUZZ_SEED={FUZZ_SEED} FUZZ_FIRST={index}: {method} ({why}): {request!r:.300}"
                assert code not in (
                    V2StatusCode.INTERNAL_SERVER_ERROR,
                    grpc.StatusCode.UNKNOWN,
                    grpc.StatusCode.INTERNAL,
                ), f"{where} -> {code}"
                # random bytes may happen to decode as a valid request
                assert code != V2StatusCode.OK or isinstance(request, bytes), f"{where} -> OK"
            index += 1
            latency_s = await normal_client_round(normal, broker.remoting)
            check_health(
                broker,
                baseline,
                await snapshot(normal, broker.remoting),
                latency_s,
                f"after gRPC cases {first}..{index - 1} of FUZZ_SEED={FUZZ_SEED}",
            )
    finally:
        channel.close()
        await normal.close()
