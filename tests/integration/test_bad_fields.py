"""Every header field and body of the broker's remoting port is checked before any work is done: a value out of
its Java type's range, a bad enum, an illegal name or a body nested too deep is INVALID_PARAMETER with a remark
naming the field, nothing is stored, and the broker logs no traceback for a client's mistake."""

from __future__ import annotations

import json

import pytest
from remoting_calls import call, client, serve_for_module  # noqa: F401 (client is a fixture)

from pocketmq.protocol.codes import RequestCode as R
from pocketmq.protocol.codes import ResponseCode as C

pytestmark = pytest.mark.timeout(60)
TOPIC = "bad-fields"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from serve_for_module(tmp_path_factory, "broker-fields", [])


@pytest.fixture(autouse=True)
def no_traceback_logged(broker):
    yield
    log = broker.log_path.read_text(errors="replace")
    assert "event=" in log  # the broker's log is where this looks
    assert "Traceback" not in log and "handler_failed" not in log, broker.log_tail()


async def send(client, addr, body=b"x", **fields):
    return await call(client, addr, R.SEND_MESSAGE_V2, {"a": "pg", "b": TOPIC, "e": 0, **fields}, body)


async def max_offset(client, addr, topic=TOPIC, queue_id=0) -> int:
    reply = await call(client, addr, R.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
    assert reply.code == C.SUCCESS, reply.remark
    return int(reply.ext_fields["offset"])


def refused(reply, field: str) -> None:
    assert reply.code == C.INVALID_PARAMETER, (reply.code, reply.remark)
    assert field in reply.remark, reply.remark


@pytest.mark.parametrize(
    "short,field,value",
    [
        ("f", "sysFlag", 2**40),
        ("h", "flag", 2**40),
        ("j", "reconsumeTimes", 2**40),
        ("g", "bornTimestamp", 2**70),
        ("f", "sysFlag", -1),
        ("j", "reconsumeTimes", -3),
        ("e", "queueId", 2**31),
        ("f", "sysFlag", 0x10),  # the born host IPv6 flag is the broker's to set
    ],
)
async def test_send_fields_out_of_range_are_refused_and_nothing_is_stored(broker, client, short, field, value):
    assert (await send(client, broker.remoting)).code == C.SUCCESS  # the topic exists
    before = await max_offset(client, broker.remoting)
    refused(await send(client, broker.remoting, **{short: value}), field)
    # the same field under its SEND_MESSAGE (V1) name
    v1 = await call(
        client,
        broker.remoting,
        R.SEND_MESSAGE,
        {"producerGroup": "pg", "topic": TOPIC, "queueId": 0, field: value},
        b"x",
    )
    refused(v1, field)
    assert await max_offset(client, broker.remoting) == before


async def test_heartbeat_nested_deep_is_invalid_parameter(broker, client):
    deep = b'{"clientID": "c", "consumerDataSet": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    refused(await call(client, broker.remoting, R.HEART_BEAT, body=deep), "nested")
    just_deeper = {"clientID": "c", "x": json.loads("[" * 40 + "]" * 40)}
    refused(await call(client, broker.remoting, R.HEART_BEAT, body=json.dumps(just_deeper).encode()), "nested")


@pytest.mark.parametrize(
    "field,value",
    [
        ("consumeType", "²"),
        ("consumeType", "CONSUME_SOMEHOW"),
        ("messageModel", 7),
        ("consumeFromWhere", True),
    ],
)
async def test_heartbeat_enum_fields_are_checked_and_no_group_is_made(broker, client, field, value):
    group = f"g-hb-{field}"
    body = {"clientID": "c1", "consumerDataSet": [{"groupName": group, field: value, "subscriptionDataSet": []}]}
    refused(await call(client, broker.remoting, R.HEART_BEAT, body=json.dumps(body).encode()), field)
    groups = json.loads((await call(client, broker.remoting, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
    assert group not in groups["subscriptionGroupTable"]


async def test_heartbeat_subscription_topic_and_version_are_checked(broker, client):
    for sub, field in (
        ({"topic": "../x"}, "topic"),
        ({"topic": "t", "subVersion": 2**70}, "subVersion"),
        ({"topic": "t", "expressionType": "XPATH"}, "expressionType"),
    ):
        body = {"clientID": "c1", "consumerDataSet": [{"groupName": "g-hb-sub", "subscriptionDataSet": [sub]}]}
        refused(await call(client, broker.remoting, R.HEART_BEAT, body=json.dumps(body).encode()), field)


async def test_consumer_offsets_out_of_range_or_past_the_end_are_not_stored(broker, client):
    addr = broker.remoting
    assert (await send(client, addr)).code == C.SUCCESS
    key = {"consumerGroup": "g-offsets", "topic": TOPIC, "queueId": 0}
    for value in (2**70, "1e400"):
        refused(await call(client, addr, R.UPDATE_CONSUMER_OFFSET, {**key, "commitOffset": value}), "commitOffset")
    past = await call(client, addr, R.UPDATE_CONSUMER_OFFSET, {**key, "commitOffset": "1e18"})
    refused(past, "commitOffset")
    assert "past the end" in past.remark
    pull = {**key, "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 1, "commitOffset": 2**63}
    refused(await call(client, addr, R.PULL_MESSAGE, pull), "commitOffset")
    # a pull's piggy-backed commit past the end is not stored, and the pull itself is served
    served = await call(client, addr, R.PULL_MESSAGE, {**pull, "commitOffset": 10**18})
    assert served.code == C.SUCCESS, served.remark
    stored = await call(client, addr, R.QUERY_CONSUMER_OFFSET, {**key, "setZeroIfNotFound": False})
    assert stored.code == C.QUERY_NOT_FOUND, stored.ext_fields
    ok = await call(client, addr, R.UPDATE_CONSUMER_OFFSET, {**key, "commitOffset": 1})
    assert ok.code == C.SUCCESS, ok.remark


@pytest.mark.parametrize(
    "fields,field",
    [
        ({"maxMsgNums": -5}, "maxMsgNums"),
        ({"maxMsgNums": 0}, "maxMsgNums"),
        ({"queueOffset": -1}, "queueOffset"),
        ({"queueId": -1}, "queueId"),
        ({"suspendTimeoutMillis": -1}, "suspendTimeoutMillis"),
        ({"expressionType": "TÄG"}, "expressionType"),
        ({"subscription": "a\x00b"}, "subscription"),
    ],
)
async def test_pull_fields_out_of_range_are_refused(broker, client, fields, field):
    pull = {"consumerGroup": "g-pull", "topic": TOPIC, "queueId": 0, "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 0}
    refused(await call(client, broker.remoting, R.PULL_MESSAGE, {**pull, **fields}), field)


async def test_group_config_ranges(broker, client):
    addr = broker.remoting

    async def create(**fields):
        body = json.dumps({"groupName": "g-ranges", **fields}).encode()
        return await call(client, addr, R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)

    for fields, field in (
        ({"retryMaxTimes": -2}, "retryMaxTimes"),
        ({"retryMaxTimes": 2**40}, "retryMaxTimes"),
        ({"retryMaxTimes": "many"}, "retryMaxTimes"),
        ({"brokerId": -1}, "brokerId"),
        ({"retryQueueNums": 0}, "retryQueueNums"),
    ):
        refused(await create(**fields), field)
    groups = json.loads((await call(client, addr, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
    assert "g-ranges" not in groups["subscriptionGroupTable"]
    assert (await create(retryMaxTimes=-1)).code == C.SUCCESS  # -1: the default, 16 (docs/protocol.md)


async def test_deletes_of_illegal_names_are_errors(broker, client):
    refused(await call(client, broker.remoting, R.DELETE_TOPIC_IN_BROKER, {"topic": "../../x"}), "topic")
    refused(await call(client, broker.remoting, R.DELETE_SUBSCRIPTIONGROUP, {"groupName": "../g"}), "groupName")
    absent = await call(client, broker.remoting, R.DELETE_TOPIC_IN_BROKER, {"topic": "bad-fields-never-made"})
    assert absent.code == C.SUCCESS  # a legal name this broker does not have: still idempotent


async def test_a_topic_name_with_a_trailing_newline_is_refused_everywhere(broker, client):
    addr = broker.remoting
    refused(await call(client, addr, R.UPDATE_AND_CREATE_TOPIC, {"topic": "nl\n", "readQueueNums": 1}), "topic")
    refused(await send(client, addr, b=f"{TOPIC}\n"), "topic")
    refused(await call(client, addr, R.GET_MAX_OFFSET, {"topic": "nl\n", "queueId": 0}), "topic")
    topics = json.loads((await call(client, addr, R.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
    assert not [name for name in topics if "\n" in name]
    data_dir = broker.workdir / "data"
    assert not [p for p in data_dir.rglob("*") if "\n" in p.name]


@pytest.mark.parametrize(
    "code,fields,field",
    [
        (R.POP_MESSAGE, {"consumerGroup": "g", "topic": TOPIC, "queueId": -1, "invisibleTime": -1}, "invisibleTime"),
        (
            R.POP_MESSAGE,
            {"consumerGroup": "g", "topic": TOPIC, "queueId": -1, "invisibleTime": 1000, "maxMsgNums": 33},
            "maxMsgNums",
        ),
        (R.POP_MESSAGE, {"consumerGroup": "g", "topic": TOPIC, "invisibleTime": 1000, "initMode": 2}, "initMode"),
        (R.ACK_MESSAGE, {"consumerGroup": "g", "topic": TOPIC, "queueId": 0, "extraInfo": "x", "offset": -4}, "offset"),
        (R.CONSUMER_SEND_MSG_BACK, {"group": "g", "offset": 2**64}, "offset"),
        (R.QUERY_MESSAGE, {"topic": TOPIC, "key": "k", "maxNum": -1}, "maxNum"),
        (R.VIEW_MESSAGE_BY_ID, {"offset": -1}, "offset"),
        (R.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": TOPIC, "queueId": 0, "timestamp": 2**64}, "timestamp"),
        (R.UNREGISTER_CLIENT, {"clientID": "c\n1"}, "clientID"),
        (R.GET_CONSUME_STATS, {"consumerGroup": "g", "topic": "a/b"}, "topic"),
    ],
)
async def test_other_codes_check_their_fields(broker, client, code, fields, field):
    refused(await call(client, broker.remoting, code, fields), field)
