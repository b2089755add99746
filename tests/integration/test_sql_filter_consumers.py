"""SQL92 property filters end to end against a real ``pocketmq serve`` (docs/filter.md).

- the SDK's pull consumer (remoting PULL_MESSAGE with expressionType SQL92): only matching messages cross the
  wire, and a pull that finds none still moves the next offset past the filtered ones;
- a pull without the subscription flag filters by the SQL92 subscription of the group's heartbeat (4.x push
  consumers pull that way);
- the SDK's push consumer: it gets the matching messages and its committed offsets reach the queues' ends;
- the SDK's simple consumer (remoting POP);
- the official 5.x client's SimpleConsumer with ``FilterExpression(..., FilterType.SQL)`` over gRPC, and its
  receive with a bad expression refused;
- CHECK_CLIENT_CONFIG (a 4.x consumer's check at start) answers SUCCESS, or SUBSCRIPTION_PARSE_FAILED for a bad
  expression;
- a broker with ``enable_property_filter=false`` refuses SQL92 subscriptions with SUBSCRIPTION_PARSE_FAILED: pulls,
  and the SDK's push and simple consumers already at start.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from grpc_support import run_official_client

from pocketmq.client import (
    Admin,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    Message,
    MessageQueue,
    MessageSelector,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    PushConsumerOptions,
    SimpleConsumer,
)
from pocketmq.common.record import decode_records
from pocketmq.common.sql_filter import SqlFilterError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.timeout(120)

SCRIPT = Path(__file__).with_name("filter_official_client.py")
SQL = "region = 'eu' AND amount > 100"
COUNT = 40


def order(i: int) -> dict[str, str]:
    """Message i: every other one in 'eu', amounts 0, 10, 20 ...: those with i even and i > 10 match SQL."""
    return {"region": "eu" if i % 2 == 0 else "us", "amount": str(i * 10)}


MATCHING = sorted(str(i) for i in range(COUNT) if i % 2 == 0 and i * 10 > 100)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("sql"), "broker-sql").start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def config(broker) -> ClientConfig:
    return ClientConfig(namesrv_addr=broker.namesrv)


def produce(config: ClientConfig, topic: str, queues: int = 2) -> None:
    with Admin(config) as admin:
        admin.create_topic(topic, queues=queues)
    with Producer(config) as producer:
        for i in range(COUNT):
            producer.send(Message.create(topic, str(i), properties=order(i)))


def test_a_pull_carries_only_matching_messages_and_moves_past_the_rest(config):
    produce(config, "sql_pull", queues=1)
    queue = MessageQueue("sql_pull", "broker-sql", 0)
    with PullConsumer("sql_pull_group", config) as consumer:
        result = consumer.pull(queue, 0, 32, tag_expression=MessageSelector.by_sql(SQL))
        assert result.status is PullStatus.FOUND
        assert sorted(m.body.decode() for m in result.messages) == MATCHING
        assert result.next_begin_offset == COUNT  # 32 matching would have stopped it earlier: there are 14
        none = consumer.pull(queue, 0, 32, tag_expression=MessageSelector.by_sql("region = 'asia'"))
        assert none.status is PullStatus.NO_MATCHED_MSG and none.messages == []
        assert none.next_begin_offset == COUNT


async def test_a_pull_without_a_subscription_uses_the_heartbeats(broker, config):
    produce(config, "sql_heartbeat", queues=1)
    received: list[str] = []
    consumer = push_consumer(config, "sql_heartbeat", "sql_heartbeat_group", received)
    remoting = RemotingClient()
    try:  # the push consumer's heartbeat registered the SQL92 subscription of its group
        fields = {
            "consumerGroup": "sql_heartbeat_group",
            "topic": "sql_heartbeat",
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 32,
            "sysFlag": 0,  # no subscription in the request: the heartbeat's
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "expressionType": "SQL92",
        }
        reply = await remoting.invoke(broker.remoting, RemotingCommand.request(RequestCode.PULL_MESSAGE, fields), 5)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        assert sorted(m.body.decode() for m in decode_records(reply.body)) == MATCHING
    finally:
        await remoting.close()
        consumer.shutdown()


def push_consumer(config: ClientConfig, topic: str, group: str, received: list[str]) -> PushConsumer:
    lock = threading.Lock()

    def listener(messages, context):
        with lock:
            received.extend(m.body.decode() for m in messages)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    options = PushConsumerOptions(group, persist_interval_ms=200, long_poll_ms=500, rebalance_interval_ms=1000)
    consumer = PushConsumer(options, config)
    consumer.subscribe(topic, MessageSelector.by_sql(SQL))
    consumer.register_listener(listener)
    return consumer.start()


def test_a_push_consumer_gets_the_matching_messages_and_commits_past_the_rest(config):
    produce(config, "sql_push")
    received: list[str] = []
    consumer = push_consumer(config, "sql_push", "sql_push_group", received)
    try:
        wait_until(lambda: len(received) >= len(MATCHING), 30, message="the matching messages")
        with PullConsumer("sql_push_group", config) as reader:
            queues = reader.fetch_queues("sql_push")
            ends = {q: reader.max_offset(q) for q in queues}
            wait_until(lambda: all(reader.committed(q) == ends[q] for q in queues), 30, message="offsets at the end")
        assert sorted(received) == MATCHING
    finally:
        consumer.shutdown()


def test_a_simple_consumer_pops_the_matching_messages(config):
    produce(config, "sql_pop")
    got: list[str] = []
    with SimpleConsumer("sql_pop_group", {"sql_pop": MessageSelector.by_sql(SQL)}, config) as consumer:
        wait_until(lambda: got.extend(m.body.decode() for m in ack_all(consumer)) or len(got) >= len(MATCHING), 30)
        assert consumer.receive(32, 30_000, await_duration_ms=500) == []
    assert sorted(got) == MATCHING


def ack_all(consumer: SimpleConsumer):
    messages = consumer.receive(32, 30_000, await_duration_ms=500)
    if messages:
        consumer.ack_batch(messages)
    return messages


async def check_client_config(addr: str, expression_type: str, expression: str) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG, as a 4.x consumer asks it at start for a subscription that is not a TAG one."""
    body = {
        "clientId": "127.0.0.1@check",
        "group": "sql_check_group",
        "subscriptionData": {"topic": "sql_check", "subString": expression, "expressionType": expression_type},
    }
    remoting = RemotingClient()
    try:
        request = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, json.dumps(body).encode())
        return await remoting.invoke(addr, request, 5)
    finally:
        await remoting.close()


async def test_a_4x_client_checks_its_subscription_before_it_starts(broker):
    assert (await check_client_config(broker.remoting, "SQL92", SQL)).code == ResponseCode.SUCCESS
    assert (await check_client_config(broker.remoting, "TAG", "a || b")).code == ResponseCode.SUCCESS
    bad = await check_client_config(broker.remoting, "SQL92", "amount > > 1")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "position 9" in bad.remark


def test_a_bad_expression_fails_at_subscribe_time_with_its_position():
    with pytest.raises(SqlFilterError, match="position 14"):
        MessageSelector.by_sql("region = 'eu' amount > 1")


def test_the_official_client_receives_with_an_sql_filter_over_grpc(broker, config, tmp_path):
    produce(config, "sql_official")
    spec = {
        "endpoint": broker.grpc,
        "topic": "sql_official",
        "group": "sql_official_group",
        "sql": SQL,
        "count": len(MATCHING),
        "deadline_s": 40,
        "bad_sql": "amount >",
    }
    [result] = run_official_client(spec, tmp_path / "home", timeout_s=90, script=SCRIPT)
    assert result["bodies"] == MATCHING
    assert all(result["properties"][b]["region"] == "eu" for b in MATCHING)
    assert result["error"] is not None and "position 8" in result["error"]


def test_a_broker_with_property_filters_off_refuses_sql(tmp_path):
    proc = broker_process(tmp_path, "broker-nosql", extra_args=["--set", "enable_property_filter=false"]).start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        produce(config, "sql_off", queues=1)
        with PullConsumer("sql_off_group", config) as consumer:
            with pytest.raises(RemoteServerError) as refused:
                consumer.pull(MessageQueue("sql_off", "broker-nosql", 0), 0, tag_expression=MessageSelector.by_sql(SQL))
            assert refused.value.response_code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            assert "enable_property_filter" in str(refused.value)
        checked = asyncio.run(check_client_config(proc.remoting, "SQL92", SQL))
        assert checked.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        # consumers ask at start, as 4.x consumers do: they do not start, rather than fail every pull
        with pytest.raises(RemoteServerError, match="enable_property_filter"):
            push_consumer(config, "sql_off", "sql_off_push", [])
        with pytest.raises(RemoteServerError, match="enable_property_filter"):
            SimpleConsumer("sql_off_pop", {"sql_off": MessageSelector.by_sql(SQL)}, config).start()
        with SimpleConsumer("sql_off_tags", {"sql_off": "*"}, config) as tags:  # tag subscriptions are unaffected
            assert tags.receive(1, 30_000, await_duration_ms=5000)
    finally:
        assert proc.stop() == 0, proc.log_tail()
