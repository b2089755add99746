"""The push consumer and consumer retries against a real ``pocketmq serve`` (shortened delay levels, 100 ms
steps): the seed scenario (fail 3 times then succeed -> seen 4 times, reconsume_times 0..3, at levels 3, 4,
5), the DLQ after exactly max_reconsume_times, broadcasting dropping failures, delay-level sends, and
``dlq resend`` to the failing group only (or, ``--to-topic``, to every group of the topic); ``async def``
listeners under the same rules."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer, PullConsumer, PullStatus
from pocketmq.client.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from pocketmq.client.push_consumer import MessageModel, PushConsumer, PushConsumerOptions
from pocketmq.common.message import MessageQueue
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

LEVELS = " ".join(f"{100 * i}ms" for i in range(1, 19))  # level n waits n * 100 ms

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(
        tmp_path_factory.mktemp("push"), "broker-push", extra_args=["--set", f"message_delay_level={LEVELS}"]
    ).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def config(broker) -> ClientConfig:
    return ClientConfig(namesrv_addr=broker.namesrv, instance_name="push-tests")


def options(group, **kw):
    return PushConsumerOptions(group, rebalance_interval_ms=500, persist_interval_ms=200, long_poll_ms=1000, **kw)


class Recorder:
    """A listener that records every delivery and fails each message ``fail_times`` times."""

    def __init__(self, fail_times: int):
        self.fail_times = fail_times
        self.seen: list[tuple[str, int, float]] = []  # (body, reconsume_times, monotonic s)
        self.lock = threading.Lock()

    def __call__(self, msgs, ctx):
        with self.lock:
            for m in msgs:
                self.seen.append((m.body.decode(), m.reconsume_times, time.monotonic()))
            failures = sum(1 for body, _, _ in self.seen if body == msgs[0].body.decode())
        if failures <= self.fail_times:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def of(self, body):
        with self.lock:
            return [(rt, t) for b, rt, t in self.seen if b == body]


def start_consumer(config, topic, group, recorder, *, queues=2, orderly=False, **option_overrides) -> PushConsumer:
    """Create ``topic``, then a started push consumer of ``group`` on it with ``recorder`` as (with ``orderly``,
    orderly) listener."""
    with Admin(config) as admin:
        admin.create_topic(topic, queues=queues)
    consumer = PushConsumer(options(group, **option_overrides), config)
    consumer.subscribe(topic)
    (consumer.register_orderly_listener if orderly else consumer.register_listener)(recorder)
    return consumer.start()


def test_fail_three_times_then_succeed(config):
    recorder = Recorder(fail_times=3)
    consumer = start_consumer(config, "push_seed", "g_seed", recorder)
    try:
        with Producer(config) as producer:
            producer.send(Message.create("push_seed", "seed"))
        wait_until(lambda: len(recorder.of("seed")) >= 4, timeout_s=20, message="4 deliveries")
        deliveries = recorder.of("seed")
        assert [rt for rt, _ in deliveries] == [0, 1, 2, 3]
        gaps = [b - a for (_, a), (_, b) in zip(deliveries, deliveries[1:])]
        for gap, level in zip(gaps, (3, 4, 5)):
            assert gap >= level * 0.1 - 0.02, (gaps, level)  # not before its level's delay
    finally:
        consumer.shutdown()
    assert len(recorder.of("seed")) == 4  # the 4th delivery succeeded: no more


def test_always_failing_goes_to_dlq_after_exactly_max(config):
    recorder = Recorder(fail_times=10**6)
    consumer = start_consumer(config, "push_dlq", "g_dlq", recorder, max_reconsume_times=3)
    try:
        with Producer(config) as producer:
            producer.send(Message.create("push_dlq", "doomed", properties={"who": "me"}))
        with PullConsumer("g_dlq_reader", config) as reader:
            queue = MessageQueue("%DLQ%g_dlq", "broker-push", 0)
            wait_until(lambda: _safe_max(reader, queue) >= 1, timeout_s=20, message="a DLQ message")
            result = reader.pull(queue, 0, 10)
        assert result.status is PullStatus.FOUND
        [dead] = result.messages
        assert dead.body == b"doomed" and dead.properties["who"] == "me" and dead.reconsume_times == 4
        assert dead.properties["RETRY_TOPIC"] == "push_dlq"
        assert [rt for rt, _ in recorder.of("doomed")] == [0, 1, 2, 3]  # 1 + max_reconsume_times deliveries
    finally:
        consumer.shutdown()


def _safe_max(reader, queue):
    try:
        return reader.max_offset(queue)
    except Exception:
        return 0


def test_broadcasting_drops_failures(config, tmp_path):
    recorder = Recorder(fail_times=1)
    consumer = start_consumer(
        config,
        "push_bcast",
        "g_bcast",
        recorder,
        queues=1,
        message_model=MessageModel.BROADCASTING,
        offset_store_dir=tmp_path,
    )
    try:
        with Producer(config) as producer:
            producer.send(Message.create("push_bcast", "fails-once"))
            wait_until(lambda: recorder.of("fails-once"), timeout_s=10, message="first delivery")
            producer.send(Message.create("push_bcast", "marker"))
        wait_until(lambda: recorder.of("marker"), timeout_s=10, message="marker delivery")
        # Both messages are done and the queue's offset is past them: with no send-back and no local retry,
        # nothing can bring the failed one back.
        queue = MessageQueue("push_bcast", "broker-push", 0)
        wait_until(lambda: consumer.core.offset_store.table.get(queue) == 2, timeout_s=10, message="offset 2")
        service = consumer.core.consume_service
        assert (service.sent_back_total, service.local_retries_total) == (0, 0)
        assert len(recorder.of("fails-once")) == 1
    finally:
        consumer.shutdown()
    assert any(tmp_path.rglob("offsets.json"))  # broadcasting offsets are kept in a local file


def test_orderly_listener_keeps_queue_order_through_a_suspend(config):
    """An orderly listener on 2 queues: message 7 of each queue asks SUSPEND_CURRENT_QUEUE_A_MOMENT once; it
    is consumed again locally (reconsume_times 1, no send-back) before anything after it in its queue."""
    deliveries: dict[int, list[tuple[int, int]]] = {0: [], 1: []}  # queue id -> [(index, reconsume_times)]
    lock = threading.Lock()

    def listener(msgs, ctx):
        [msg] = msgs  # consume_batch_size 1
        index = int(msg.body.decode().split("-")[1])
        with lock:
            deliveries[msg.queue_id].append((index, msg.reconsume_times))
            first_time = sum(1 for i, _ in deliveries[msg.queue_id] if i == index) == 1
        if index == 7 and first_time:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    with Admin(config) as admin:
        admin.create_topic("push_orderly", queues=2)
    consumer = PushConsumer(options("g_orderly", suspend_current_queue_time_ms=100), config)
    consumer.subscribe("push_orderly")
    consumer.register_orderly_listener(listener)
    consumer.start()
    try:
        wait_until(
            lambda: len([q for q in consumer.assignment if q.topic == "push_orderly"]) == 2,
            timeout_s=10,
            message="both queues assigned",
        )
        with Producer(config) as producer:
            for queue_id in (0, 1):
                queue = MessageQueue("push_orderly", "broker-push", queue_id)
                for i in range(20):
                    producer.send(Message.create("push_orderly", f"q{queue_id}-{i}"), queue=queue)
        wait_until(lambda: all(len(d) == 21 for d in deliveries.values()), timeout_s=20, message="21 deliveries each")
        expected = [(i, 0) for i in range(8)] + [(7, 1)] + [(i, 0) for i in range(8, 20)]
        assert deliveries == {0: expected, 1: expected}
    finally:
        consumer.shutdown()
    with PullConsumer("g_orderly_reader", config) as reader:  # a local retry: nothing was sent back
        assert _safe_max(reader, MessageQueue("%RETRY%g_orderly", "broker-push", 0)) == 0


def test_async_listener_retries_through_the_retry_topic(config):
    """An ``async def`` listener, awaited on the client loop, follows a plain one's rules: each failure goes back
    through %RETRY% and comes again with its reconsume count, until a success."""
    recorder = Recorder(fail_times=2)

    async def listener(msgs, ctx):
        await asyncio.sleep(0)
        return recorder(msgs, ctx)

    consumer = start_consumer(config, "push_async", "g_async", listener)
    try:
        with Producer(config) as producer:
            producer.send(Message.create("push_async", "awaited"))
        wait_until(lambda: len(recorder.of("awaited")) >= 3, timeout_s=20, message="3 deliveries")
        assert consumer.core.consume_service.sent_back_total == 2
    finally:
        consumer.shutdown()
    assert [rt for rt, _ in recorder.of("awaited")] == [0, 1, 2]


def test_async_orderly_listener_keeps_queue_order_through_a_suspend(config):
    """An orderly ``async def`` listener: message 3 asks SUSPEND_CURRENT_QUEUE_A_MOMENT once and is consumed
    again locally before anything after it."""
    deliveries: list[tuple[int, int]] = []  # (index, reconsume_times), appended on the client loop only

    async def listener(msgs, ctx):
        [msg] = msgs
        await asyncio.sleep(0)
        index = int(msg.body.decode())
        deliveries.append((index, msg.reconsume_times))
        if index == 3 and msg.reconsume_times == 0:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    consumer = start_consumer(
        config,
        "push_async_orderly",
        "g_async_orderly",
        listener,
        queues=1,
        orderly=True,
        suspend_current_queue_time_ms=50,
    )
    try:
        with Producer(config) as producer:
            for i in range(8):
                producer.send(Message.create("push_async_orderly", str(i)))
        wait_until(lambda: len(deliveries) == 9, timeout_s=20, message="9 deliveries")
        assert deliveries == [(i, 0) for i in range(4)] + [(3, 1)] + [(i, 0) for i in range(4, 8)]
    finally:
        consumer.shutdown()


def test_delay_level_send_is_visible_after_its_delay(config):
    recorder = Recorder(fail_times=0)
    consumer = start_consumer(config, "push_delay", "g_delay", recorder, queues=1)
    try:
        wait_until(lambda: consumer.assignment, timeout_s=10, message="assignment")
        with Producer(config) as producer:
            sent_at = time.monotonic()
            producer.send(Message.create("push_delay", "later", properties={"DELAY": "5"}))
        wait_until(lambda: recorder.of("later"), timeout_s=10, message="delayed delivery")
        [(rt, at)] = recorder.of("later")
        assert 0.5 - 0.02 <= at - sent_at <= 0.5 + 1.0
    finally:
        consumer.shutdown()


def test_dlq_and_retry_cli(config, capsys):
    """After test_always_failing_goes_to_dlq_after_exactly_max: list, stats, resend by id."""
    import json

    from pocketmq.cli.main import main

    ns = ["-n", config.namesrv_addr, "--json"]
    assert main(["dlq", "list", "g_dlq", *ns]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["origin_topic"] == "push_dlq" and row["body"] == "doomed" and row["reconsume_times"] == 4
    assert main(["retry", "stats", "g_dlq", *ns]) == 0
    [stats] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert stats == {"broker": "broker-push", "retried": 3, "retry_pending": 0, "dead": 1}
    with PullConsumer("g_resend_reader", config) as reader:
        queues = reader.fetch_queues("push_dlq")
        before = {q: reader.max_offset(q) for q in queues}
        assert main(["dlq", "resend", "g_dlq", "--id", row["message_id"], "--to-topic", *ns]) == 0
        capsys.readouterr()
        grown = [q for q in queues if reader.max_offset(q) > before[q]]
        [queue] = grown
        [resent] = reader.pull(queue, before[queue], 10).messages
    assert resent.body == b"doomed" and resent.properties["who"] == "me" and resent.msg_id == row["message_id"]
    assert "RETRY_TOPIC" not in resent.properties and resent.reconsume_times == 0


def test_dlq_resend_reaches_only_the_group_that_failed(config, capsys):
    """Two groups on one topic: g_fail dead-letters the message (1 + 1 deliveries), g_ok consumed it once.
    ``dlq resend g_fail`` brings it back to g_fail alone, under its own topic and with a fresh count;
    ``--to-topic`` then reaches both groups (so g_ok was listening all along)."""
    import json

    from pocketmq.cli.main import main

    ok, failing = Recorder(fail_times=0), Recorder(fail_times=2)  # g_fail: its 3rd delivery succeeds
    topics: list[str] = []

    def failing_listener(msgs, ctx):
        topics.extend(m.topic for m in msgs)
        return failing(msgs, ctx)

    consumers = [start_consumer(config, "push_two_groups", "g_ok", ok)]
    try:
        failing_consumer = PushConsumer(options("g_fail", max_reconsume_times=1), config)
        failing_consumer.subscribe("push_two_groups")
        failing_consumer.register_listener(failing_listener)
        consumers.append(failing_consumer.start())
        for consumer in consumers:
            wait_until(lambda: consumer.assignment, timeout_s=10, message="assignment")
        with Producer(config) as producer:
            producer.send(Message.create("push_two_groups", "once", properties={"who": "me"}))
        ns = ["-n", config.namesrv_addr, "--json"]

        def listed() -> bool:  # the DLQ topic is in the name server's routes a moment after its first entry
            assert main(["dlq", "list", "g_fail", *ns]) == 0
            return any('"message_id"' in line for line in capsys.readouterr().out.splitlines())

        wait_until(listed, timeout_s=20, message="g_fail's dead letter listed")
        assert [rt for rt, _ in failing.of("once")] == [0, 1] and len(ok.of("once")) == 1

        assert main(["dlq", "resend", "g_fail", "--all", *ns]) == 0
        [sent] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"topic"' in line]
        assert sent["topic"] == "%RETRY%g_fail"
        wait_until(lambda: len(failing.of("once")) == 3, timeout_s=20, message="g_fail gets it again")
        assert failing.of("once")[2][0] == 0 and topics == ["push_two_groups"] * 3  # fresh count, own topic

        assert main(["dlq", "resend", "g_fail", "--all", "--to-topic", *ns]) == 0
        wait_until(lambda: len(ok.of("once")) == 2, timeout_s=20, message="g_ok gets the republished one")
        wait_until(lambda: len(failing.of("once")) == 4, timeout_s=20, message="g_fail gets it too")
        assert len(ok.of("once")) == 2  # once sent, once republished: never the group-only resend
    finally:
        for consumer in consumers:
            consumer.shutdown()
