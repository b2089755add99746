"""Producer retries against real processes: a name server and two brokers, one killed after the producer
cached the route. Sync sends all succeed through the other broker with at most 2 retries each; async and
one-way sends work. (Fault avoidance is tested in virtual time in tests/unit/push/test_producer_retries.py.)"""

from __future__ import annotations

import logging

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer, ProducerOptions
from pocketmq.testing.processes import broker_process, namesrv_process

pytestmark = pytest.mark.slow


class SendFailures(logging.Handler):
    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        if "event=send_failed" in record.getMessage():
            self.count += 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("producer_retry")
    namesrv = namesrv_process(root / "ns").start()
    brokers = [broker_process(root / name, name, namesrv=namesrv.namesrv).start() for name in ("broker-a", "broker-b")]
    config = ClientConfig(namesrv_addr=namesrv.namesrv, instance_name="retry-tests")
    with Admin(config) as admin:
        assert sorted(admin.create_topic("retried", queues=4)) == ["broker-a", "broker-b"]
    yield config, brokers
    brokers[0].stop()
    namesrv.stop()


@pytest.fixture
def failures():
    handler = SendFailures()
    logger = logging.getLogger("pocketmq.client.producer")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)


def test_sync_sends_succeed_through_the_live_broker(cluster, failures):
    config, brokers = cluster
    with Producer(config, ProducerOptions(send_timeout_s=5)) as producer:
        warm = [producer.send(Message.create("retried", f"w{i}")) for i in range(4)]
        assert {r.message_queue.broker_name for r in warm} == {"broker-a", "broker-b"}  # the route has both
        brokers[1].kill()
        results = [producer.send(Message.create("retried", f"m{i}")) for i in range(40)]
    assert {r.message_queue.broker_name for r in results} == {"broker-a"}
    assert 1 <= failures.count <= 40  # a send failed at most once on broker-b (then the route dropped it)


def test_async_and_oneway_sends(cluster):
    config, _ = cluster
    received = []
    with Producer(config, ProducerOptions(send_timeout_s=5)) as producer:
        futures = [producer.send_async(Message.create("retried", f"a{i}"), callback=received.append) for i in range(10)]
        results = [f.result(timeout=10) for f in futures]
        producer.send_oneway(Message.create("retried", "oneway"))
    assert {r.message_queue.broker_name for r in results} == {"broker-a"}
    assert len(received) == 10
