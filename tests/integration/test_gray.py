"""Gray release against a real ``pocketmq serve`` (docs/gray.md): 8 queues, ratio 0.25 (queues 6 and 7 gray),
2 normal and 1 gray push consumers, a gray and a normal producer. Gray messages reach only the gray consumer,
normal ones only normal consumers, retries included; when the gray consumer leaves, normal consumers take the
gray queues over and nothing is lost; when it comes back, the gray queues move back to it."""

from __future__ import annotations

import threading

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer
from pocketmq.client.listener import ConsumeConcurrentlyStatus
from pocketmq.client.push_consumer import PushConsumer, PushConsumerOptions
from pocketmq.client.queue_select import GraySelector
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import FAST_DELAY_LEVEL_ARGS, broker_process

TOPIC, GROUP, RATIO = "gray_orders", "g_gray", 0.25
GRAY_QUEUE_IDS = {6, 7}
REBALANCE_INTERVAL_MS = 500

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("gray"), "broker-gray", extra_args=FAST_DELAY_LEVEL_ARGS)
    yield proc.start()
    assert proc.stop() == 0, proc.log_tail()


class Deliveries:
    """Every delivery as (body, consumer name, reconsume_times); bodies ending in ``-fail`` fail once."""

    def __init__(self):
        self.seen: list[tuple[str, str, int]] = []
        self.lock = threading.Lock()

    def listener(self, name: str):
        def consume(msgs, ctx):
            with self.lock:
                self.seen.extend((m.body.decode(), name, m.reconsume_times) for m in msgs)
            if any(m.body.endswith(b"-fail") and m.reconsume_times == 0 for m in msgs):
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return consume

    def consumers_of(self, body: str) -> set[str]:
        with self.lock:
            return {name for b, name, _ in self.seen if b == body}

    def done(self, bodies) -> bool:
        """Every body consumed successfully (a ``-fail`` body needs its retry)."""
        with self.lock:
            final = {b for b, _, rt in self.seen if not b.endswith("-fail") or rt >= 1}
        return set(bodies) <= final


def config(broker, name: str, gray: bool = False) -> ClientConfig:
    return ClientConfig(
        namesrv_addr=broker.namesrv, instance_name=name, enable_gray_switch=gray, gray_queue_ratio=RATIO
    )


def consumer(broker, deliveries: Deliveries, name: str, gray: bool = False) -> PushConsumer:
    c = PushConsumer(
        PushConsumerOptions(
            GROUP, rebalance_interval_ms=REBALANCE_INTERVAL_MS, persist_interval_ms=200, long_poll_ms=500
        ),
        config(broker, name, gray),
    )
    c.subscribe(TOPIC)
    c.register_listener(deliveries.listener(name))
    return c.start()


def topic_queue_ids(c: PushConsumer, topic: str = TOPIC) -> set[int]:
    return {mq.queue_id for mq in c.assignment if mq.topic == topic}


def split_is(gray_consumer, normals) -> bool:
    normal_ids = set().union(*(topic_queue_ids(n) for n in normals))
    normal_retry = set().union(*(topic_queue_ids(n, f"%RETRY%{GROUP}") for n in normals))
    return (
        topic_queue_ids(gray_consumer) == GRAY_QUEUE_IDS
        and normal_ids == set(range(6))
        and topic_queue_ids(gray_consumer, f"%RETRY%{GROUP}") == {1}
        and normal_retry == {0}
    )


def reported(admin: Admin, c: PushConsumer) -> set[tuple[str, int]] | None:
    """The queues the broker lists for ``c`` (GET_GROUP_GRAY_CLIENTS), when it lists it as gray."""
    for answer in admin.gray_clients(GROUP).values():
        for client in answer["clients"]:
            if client["clientId"] == c.core.instance.client_id and client["gray"] and client["assignedBy"] == "client":
                return {(t, q) for t, q in client["queues"]}
    return None


def test_gray_split_retries_switch_over_and_back(broker):
    with Admin(config(broker, "admin")) as admin:
        admin.create_topic(TOPIC, queues=8)
    deliveries = Deliveries()
    normals = [consumer(broker, deliveries, "normal-1"), consumer(broker, deliveries, "normal-2")]
    gray = consumer(broker, deliveries, "gray", gray=True)
    gray_producer = Producer(config(broker, "gray-producer", gray=True)).start()
    normal_producer = Producer(config(broker, "normal-producer"), selector=GraySelector(RATIO)).start()
    try:
        wait_until(lambda: split_is(gray, normals), timeout_s=15, message="gray split of topic and retry topic")
        with Admin(config(broker, "admin")) as admin:  # group describe: push consumers report what they hold
            wait_until(
                lambda: reported(admin, gray) == {(TOPIC, 6), (TOPIC, 7), (f"%RETRY%{GROUP}", 1)},
                timeout_s=5,
                message="the gray consumer's queues in group describe",
            )
        gray_bodies = [f"gray-{i}" + ("-fail" if i % 4 == 0 else "") for i in range(16)]
        normal_bodies = [f"normal-{i}" + ("-fail" if i % 4 == 0 else "") for i in range(16)]
        for g, n in zip(gray_bodies, normal_bodies):
            assert gray_producer.send(Message.create(TOPIC, g)).queue_id in GRAY_QUEUE_IDS
            assert normal_producer.send(Message.create(TOPIC, n)).queue_id not in GRAY_QUEUE_IDS
        wait_until(lambda: deliveries.done(gray_bodies + normal_bodies), timeout_s=15, message="all consumed")
        for body in gray_bodies:  # retries of failed gray messages included
            assert deliveries.consumers_of(body) == {"gray"}, body
        for body in normal_bodies:
            assert deliveries.consumers_of(body) <= {"normal-1", "normal-2"}, body

        gray.shutdown()  # released to production or crashed: normal consumers take the gray queues over
        # within one rebalance interval (the broker's NOTIFY_CONSUMER_IDS_CHANGED usually makes it at once)
        wait_until(
            lambda: set().union(*(topic_queue_ids(n) for n in normals)) == set(range(8)),
            timeout_s=REBALANCE_INTERVAL_MS / 1000 + 1.5,
            message="normal consumers own every queue",
        )
        orphans = [f"orphan-{i}" for i in range(8)]
        for body in orphans:
            assert gray_producer.send(Message.create(TOPIC, body)).queue_id in GRAY_QUEUE_IDS
        wait_until(lambda: deliveries.done(orphans), timeout_s=10, message="gray messages after the gray left")
        for body in orphans:
            assert deliveries.consumers_of(body) <= {"normal-1", "normal-2"}, body

        gray = consumer(broker, deliveries, "gray-again", gray=True)  # back: the gray queues move back
        wait_until(lambda: split_is(gray, normals), timeout_s=15, message="gray queues back with the gray")
        returned = [f"back-{i}" for i in range(6)]
        for body in returned:
            gray_producer.send(Message.create(TOPIC, body))
        wait_until(lambda: deliveries.done(returned), timeout_s=10, message="gray messages after the return")
        for body in returned:
            assert deliveries.consumers_of(body) == {"gray-again"}, body
    finally:
        for c in (gray, *normals):
            c.shutdown()
        gray_producer.shutdown()
        normal_producer.shutdown()
