"""Client-side rebalancing with real processes: three push consumers join a group, one leaves; every message
is consumed at least once, the queues end up split without overlap, and the committed offsets reach the max."""

from __future__ import annotations

import threading

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer, PullConsumer
from pocketmq.client.listener import ConsumeConcurrentlyStatus
from pocketmq.client.push_consumer import PushConsumer, PushConsumerOptions
from pocketmq.common.message import MessageQueue
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.slow

TOPIC = "rebalanced"
GROUP = "g_rebalance"


def test_three_join_one_leaves_nothing_lost(tmp_path):
    proc = broker_process(tmp_path, "broker-rb").start()
    consumed: set[str] = set()
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            consumed.update(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def consumer(name: str) -> PushConsumer:
        c = PushConsumer(
            PushConsumerOptions(GROUP, rebalance_interval_ms=1000, persist_interval_ms=200, long_poll_ms=500),
            ClientConfig(namesrv_addr=proc.namesrv, instance_name=name),
        )
        c.subscribe(TOPIC)
        c.register_listener(listener)
        return c.start()

    def split_cleanly(members) -> bool:
        owned = [set(q for q in c.assignment if q.topic == TOPIC) for c in members]
        union = set().union(*owned)
        return len(union) == 8 and sum(len(o) for o in owned) == 8 and all(owned)

    try:
        config = ClientConfig(namesrv_addr=proc.namesrv, instance_name="rb-producer")
        with Admin(config) as admin:
            admin.create_topic(TOPIC, queues=8)
        members = [consumer(f"c{i}") for i in range(3)]
        wait_until(lambda: split_cleanly(members), timeout_s=15, message="three-way split")
        with Producer(config) as producer:
            for i in range(300):
                producer.send(Message.create(TOPIC, f"a-{i}"))
            wait_until(lambda: len(consumed) >= 300, timeout_s=15, message="first 300 consumed")
            members[2].shutdown()
            members = members[:2]
            wait_until(lambda: split_cleanly(members), timeout_s=15, message="two-way split")
            for i in range(300):
                producer.send(Message.create(TOPIC, f"b-{i}"))
        expected = {f"a-{i}" for i in range(300)} | {f"b-{i}" for i in range(300)}
        wait_until(lambda: expected <= consumed, timeout_s=15, message="all 600 consumed")
        for c in members:
            c.shutdown()
        with PullConsumer(GROUP, config) as reader:  # reads the group's committed offsets
            offsets = {
                q: (
                    reader.committed(MessageQueue(TOPIC, "broker-rb", q)),
                    reader.max_offset(MessageQueue(TOPIC, "broker-rb", q)),
                )
                for q in range(8)
            }
        assert all(committed == max_offset for committed, max_offset in offsets.values()), offsets
    finally:
        proc.stop()
