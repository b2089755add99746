"""The Broker facade in-process: lifecycle, registration body, dynamic config, topic deletion."""

import pytest
from tests.unit.virtual_time import advance_until

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.common.errors import BadRequestError, TopicNotExistError
from pocketmq.common.message import Message
from pocketmq.runtime.clock import ManualClock


@pytest.fixture
async def broker(tmp_path):
    b = Broker(BrokerConfig(data_dir=tmp_path, remoting_port=0, auto_create_topic_enable=True))
    await b.start(remoting_port=12345, grpc_port=23456)
    yield b
    await b.shutdown()


async def test_advertised_addresses_use_the_bound_ports(broker):
    assert broker.broker_addr == "127.0.0.1:12345"
    assert broker.grpc_addr == "127.0.0.1:23456"
    assert repr(broker).startswith("<Broker broker-a 127.0.0.1:12345 started")


async def test_registration_body_lists_topics_and_flags(broker):
    await broker.messages.send([Message.create("orders", "x")], topic="orders")
    body = broker.registration_body()
    assert "orders" in {t.name for t in body.topics}
    assert body.flags.grpc_addr == "127.0.0.1:23456"
    assert body.flags.auto_create_topic_enable is True
    assert body.data_version["counter"] == broker.topics.data_version


async def test_update_config_applies_auto_create_at_once(broker):
    broker.update_config({"autoCreateTopicEnable": "false"})
    with pytest.raises(TopicNotExistError):
        await broker.messages.send([Message.create("fresh", "x")], topic="fresh")
    assert broker.registration_body().flags.auto_create_topic_enable is False
    with pytest.raises(BadRequestError):
        broker.update_config({})


async def test_delete_topic_drops_messages_and_offsets(broker):
    await broker.messages.send([Message.create("doomed", "x")], topic="doomed", queue_id=0)
    broker.offsets.commit("g", "doomed", 0, 1)
    assert broker.delete_topic("doomed") is True
    assert broker.topics.get("doomed") is None
    assert broker.store.max_queue_offset("doomed", 0) == 0
    assert broker.offsets.query("g", "doomed", 0) is None
    assert broker.delete_topic("doomed") is False


async def test_offsets_persist_at_shutdown_and_load_at_start(tmp_path):
    config = BrokerConfig(data_dir=tmp_path, remoting_port=0)
    first = Broker(config)
    await first.start()
    first.offsets.commit("g", "t", 3, 17)
    await first.shutdown()
    second = Broker(config)
    await second.start()
    try:
        assert second.offsets.query("g", "t", 3) == 17
    finally:
        await second.shutdown()


async def test_a_failing_periodic_task_is_counted_in_the_broker_metrics_and_goes_on(tmp_path):
    clock = ManualClock()
    broker = Broker(BrokerConfig(data_dir=tmp_path, remoting_port=0, client_scan_interval_ms=1_000), clock=clock)
    await broker.start(remoting_port=12345)
    scans = []

    def expire_failing_once():
        scans.append(clock.now_ms())
        if len(scans) == 1:
            raise RuntimeError("bug")

    broker.consumers.expire = expire_failing_once
    failures = {"task": "broker-expire-clients", "error": "RuntimeError"}
    try:
        await advance_until(clock, lambda: len(scans) == 1, step_ms=100)  # virtual time: a scan a second
        assert broker.metrics.value("pocketmq_background_task_failures_total", **failures) == 1
        await advance_until(clock, lambda: len(scans) == 2, step_ms=100)  # the task went on
    finally:
        await broker.shutdown()
