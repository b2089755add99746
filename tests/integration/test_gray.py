"""Gray release against a real ``pocketmq serve`` (docs/gray.md): 8 queues, ratio 0.25 (queues 6 and 7 gray),
2 normal and 1 gray push consumers, a gray and a normal producer. Gray messages reach only the gray consumer,
normal ones only normal consumers, retries included; when the gray consumer leaves, normal consumers take the
gray queues over and nothing is lost; when it comes back, the gray queues move back to it.

Settings every SDK client follows without being told: the topic's ``gray.queue.ratio`` (set with ``pocketmq
topic create``) travels with the route, so producers with no selector and consumers with the default
``gray_queue_ratio`` (0.1) split by the topic's 0.25; a ratio that leaves no normal queue is refused by the CLI.
A gray consumer joining a running group gets its gray retry queue at once, not at the next 20 s rebalance."""

from __future__ import annotations

import threading
import time

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer
from pocketmq.client.listener import ConsumeConcurrentlyStatus
from pocketmq.client.push_consumer import PushConsumer, PushConsumerOptions
from pocketmq.client.queue_select import GraySelector
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import FAST_DELAY_LEVEL_ARGS, broker_process
from pocketmq.testing.processes import run_cli as pocketmq

TOPIC, GROUP, RATIO = "gray_orders", "g_gray", 0.25
GRAY_QUEUE_IDS, NORMAL_QUEUE_IDS = {6, 7}, set(range(6))
REBALANCE_INTERVAL_MS = 500
DEFAULT_REBALANCE_INTERVAL_MS = 20_000  # RocketMQ's: the tests of settings followed at once never wait for it

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("gray"), "broker-gray", extra_args=FAST_DELAY_LEVEL_ARGS)
    yield proc.start()
    assert proc.stop() == 0, proc.log_tail()


class Deliveries:
    """Every delivery as (body, consumer name, reconsume_times, when); bodies ending in ``-fail`` fail once."""

    def __init__(self):
        self.seen: list[tuple[str, str, int, float]] = []
        self.lock = threading.Lock()

    def listener(self, name: str):
        def consume(msgs, ctx):
            with self.lock:
                self.seen.extend((m.body.decode(), name, m.reconsume_times, time.monotonic()) for m in msgs)
            if any(m.body.endswith(b"-fail") and m.reconsume_times == 0 for m in msgs):
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return consume

    def consumers_of(self, body: str) -> set[str]:
        with self.lock:
            return {name for b, name, _, _ in self.seen if b == body}

    def done(self, bodies) -> bool:
        """Every body consumed successfully (a ``-fail`` body needs its retry)."""
        with self.lock:
            final = {b for b, _, rt, _ in self.seen if not b.endswith("-fail") or rt >= 1}
        return set(bodies) <= final

    def retried_at(self, body: str) -> float | None:
        """When ``body`` came back as a retry (monotonic seconds)."""
        with self.lock:
            return next((at for b, _, rt, at in self.seen if b == body and rt >= 1), None)


def config(broker, name: str, gray: bool = False, ratio: float | None = RATIO) -> ClientConfig:
    """``ratio`` None: the client's default (0.1), for topics that carry their own."""
    own = {} if ratio is None else {"gray_queue_ratio": ratio}
    return ClientConfig(namesrv_addr=broker.namesrv, instance_name=name, enable_gray_switch=gray, **own)


def consumer(
    broker,
    deliveries: Deliveries,
    name: str,
    gray: bool = False,
    *,
    topic: str = TOPIC,
    group: str = GROUP,
    ratio: float | None = RATIO,
    rebalance_interval_ms: int = REBALANCE_INTERVAL_MS,
) -> PushConsumer:
    c = PushConsumer(
        PushConsumerOptions(
            group, rebalance_interval_ms=rebalance_interval_ms, persist_interval_ms=200, long_poll_ms=500
        ),
        config(broker, name, gray, ratio),
    )
    c.subscribe(topic)
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


def create_topic_by_cli(broker, topic: str) -> None:
    done = pocketmq("topic", "create", topic, "--queues", "8", "--gray-queue-ratio", str(RATIO), namesrv=broker.namesrv)
    assert done.returncode == 0, done.stderr


def test_a_ratio_that_leaves_no_normal_queue_is_refused_by_the_cli(broker):
    refused = pocketmq(
        "topic", "create", "gray_tiny", "--queues", "1", "--gray-queue-ratio", "0.25", namesrv=broker.namesrv
    )
    assert refused.returncode != 0 and "makes all 1 queues gray" in refused.stderr, refused.stderr
    create_topic_by_cli(broker, "gray_kept")
    for args in (["--gray-queue-ratio", "1"], ["--queues", "1"]):  # a new ratio, or fewer queues under the kept one
        refused = pocketmq("topic", "update", "gray_kept", *args, namesrv=broker.namesrv)
        assert refused.returncode != 0 and "leaving none for normal messages" in refused.stderr, refused.stderr
    ended = pocketmq("topic", "update", "gray_kept", "--gray-queue-ratio", "0", namesrv=broker.namesrv)
    assert ended.returncode == 0, ended.stderr  # 0 ends a rollout


def test_producers_and_consumers_split_by_the_topic_ratio_with_no_setting_of_their_own(broker):
    topic, group = "gray_route", "g_gray_route"
    create_topic_by_cli(broker, topic)
    deliveries = Deliveries()
    own = {"topic": topic, "group": group, "ratio": None, "rebalance_interval_ms": DEFAULT_REBALANCE_INTERVAL_MS}
    normal = consumer(broker, deliveries, "normal", **own)
    gray = consumer(broker, deliveries, "gray", gray=True, **own)
    gray_producer = Producer(config(broker, "gray-producer", gray=True, ratio=None)).start()
    normal_producer = Producer(config(broker, "normal-producer", ratio=None)).start()  # no selector
    try:
        wait_until(
            lambda: (
                topic_queue_ids(gray, topic) == GRAY_QUEUE_IDS and topic_queue_ids(normal, topic) == NORMAL_QUEUE_IDS
            ),
            timeout_s=10,
            message="consumers split by the topic's ratio",
        )
        gray_bodies, normal_bodies = [f"gray-{i}" for i in range(8)], [f"normal-{i}" for i in range(12)]
        gray_queues = {gray_producer.send(Message.create(topic, body)).queue_id for body in gray_bodies}
        normal_queues = {normal_producer.send(Message.create(topic, body)).queue_id for body in normal_bodies}
        assert (gray_queues, normal_queues) == (GRAY_QUEUE_IDS, NORMAL_QUEUE_IDS)
        wait_until(lambda: deliveries.done(gray_bodies + normal_bodies), timeout_s=10, message="all consumed")
        assert all(deliveries.consumers_of(b) == {"gray"} for b in gray_bodies)
        assert all(deliveries.consumers_of(b) == {"normal"} for b in normal_bodies)
    finally:
        for closeable in (gray, normal, gray_producer, normal_producer):
            closeable.shutdown()


def test_a_gray_consumer_joining_a_running_group_gets_gray_retries_at_once(broker):
    """Its heartbeat grows the retry topic to 2 queues after its first rebalance has read the route; the broker
    tells the group once the name server has the new queues, so nobody waits for the 20 s rebalance."""
    topic, group = "gray_join", "g_gray_join"
    create_topic_by_cli(broker, topic)
    deliveries = Deliveries()
    own = {"topic": topic, "group": group, "rebalance_interval_ms": DEFAULT_REBALANCE_INTERVAL_MS}
    normal = consumer(broker, deliveries, "normal", **own)
    gray = None
    producer = Producer(config(broker, "gray-producer", gray=True)).start()
    try:
        assert topic_queue_ids(normal, topic) == GRAY_QUEUE_IDS | NORMAL_QUEUE_IDS
        joined_at = time.monotonic()
        gray = consumer(broker, deliveries, "gray", gray=True, **own)
        wait_until(lambda: not topic_queue_ids(normal, topic) & GRAY_QUEUE_IDS, timeout_s=5, message="handed over")
        producer.send(Message.create(topic, "gray-fail"))
        retried_at = wait_until(lambda: deliveries.retried_at("gray-fail"), timeout_s=8, message="the gray retry")
        assert deliveries.consumers_of("gray-fail") == {"gray"}
        assert retried_at - joined_at < DEFAULT_REBALANCE_INTERVAL_MS / 1000 / 3
        retry = f"%RETRY%{group}"
        assert (topic_queue_ids(gray, retry), topic_queue_ids(normal, retry)) == ({1}, {0})
    finally:
        for closeable in (gray, normal, producer):
            if closeable is not None:
                closeable.shutdown()
