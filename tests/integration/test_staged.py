"""Staged-concurrent consumption against a real ``pocketmq serve``: 100 messages in one queue, stages
[10, 20, 70], a listener that works 20 ms per message and records start/end. Stage order holds, concurrency
inside the stages reaches the pool; a consumer restarted mid-stage resumes that stage from the broker's stage
offsets (QUERY/UPDATE_STAGE_OFFSETS) and no later-stage message runs early. The listener is told each call's
stage; definitions are read again at a rebalance (malformed ones refused, a change asks the reset hook); a
message that keeps failing goes to the DLQ with the default retry setting and its stage completes."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

import pytest

from pocketmq.client import (
    Admin,
    ClientConfig,
    FunctionSelector,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    StagedConcurrentListener,
)
from pocketmq.client.listener import ConsumeOrderlyStatus
from pocketmq.client.push_consumer import ConsumeFromWhere, PushConsumer, PushConsumerOptions
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.slow

STAGES = [10, 20, 70]
WORK_S = 0.05  # the listener's work per message
STAGE_OF = [0] * 10 + [1] * 20 + [2] * 70
PEAK_OF_STAGE = {0: 10, 1: 20, 2: 20}  # a stage's size, up to the pool's 20 threads


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("staged"), "broker-staged").start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def config(broker) -> ClientConfig:
    return ClientConfig(namesrv_addr=broker.namesrv, instance_name="staged-tests")


class Recorder(StagedConcurrentListener):
    """Works ``WORK_S`` per message and records (index, start, end) of every successful delivery; messages
    from ``fail_from`` on and those of ``fail_only`` are suspended (SUSPEND_CURRENT_QUEUE_A_MOMENT) and counted in ``failures``.

    ``meet_peaks``: a call waits (up to 10 s) until as many calls of its stage run at once as the stage allows
    (``PEAK_OF_STAGE``) before it works. A consumer that runs a stage's messages concurrently reaches that peak
    however slowly the machine schedules its threads; one that does not leaves the peak short."""

    def __init__(self, fail_from: int = 100, *, fail_only=frozenset(), meet_peaks: bool = False) -> None:
        self.fail_from = fail_from
        self.fail_only = fail_only
        self.last_failure_end = 0.0
        self.meet_peaks = meet_peaks
        self.runs: list[tuple[int, float, float]] = []
        self.failures: list[int] = []
        self.lock = threading.Condition()
        self.in_flight = 0
        self.peak_by_stage: dict[int, int] = {}  # listener calls running at once, by the stage of the newcomer

    def stage_definitions(self, strategy=None):
        return STAGES

    def consume_message(self, msgs, context):
        index = int(msgs[0].body)
        with self.lock:
            self.in_flight += 1
            stage = STAGE_OF[index]
            self.peak_by_stage[stage] = max(self.peak_by_stage.get(stage, 0), self.in_flight)
            if self.meet_peaks:
                self.lock.notify_all()
                self.lock.wait_for(lambda: self.peak_by_stage[stage] >= PEAK_OF_STAGE[stage], timeout=10)
        start = time.monotonic()
        time.sleep(WORK_S)  # the listener's work, not a wait for a condition
        with self.lock:
            self.in_flight -= 1
            if index >= self.fail_from or index in self.fail_only:
                self.failures.append(index)
                self.last_failure_end = time.monotonic()
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            self.runs.append((index, start, time.monotonic()))
        return ConsumeOrderlyStatus.SUCCESS

    def failed(self) -> set[int]:
        with self.lock:
            return set(self.failures)

    def done(self) -> set[int]:
        with self.lock:
            return {i for i, _, _ in self.runs}


def produce(config, topic: str, indexes=range(100)) -> None:
    with Admin(config) as admin:
        admin.create_topic(topic, queues=1)
    send_more(config, topic, indexes)


def send_more(config, topic: str, indexes) -> None:
    with Producer(config) as producer:
        for i in indexes:
            producer.send(Message.create(topic, str(i)))


def consumer_of(config, topic, group, listener) -> PushConsumer:
    consumer = PushConsumer(
        PushConsumerOptions(
            group,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            consume_thread_max=20,
            suspend_current_queue_time_ms=50,
            rebalance_interval_ms=500,
            persist_interval_ms=200,
            long_poll_ms=1000,
        ),
        config,
    )
    consumer.subscribe(topic)
    consumer.register_staged_listener(listener)
    return consumer.start()


def assert_stage_order(runs):
    for stage in (1, 2):
        earlier_end = max(end for i, _, end in runs if STAGE_OF[i] == stage - 1)
        later_start = min(start for i, start, _ in runs if STAGE_OF[i] == stage)
        assert later_start >= earlier_end, f"stage {stage} started before stage {stage - 1} finished"


def test_stage_order_and_concurrency(config):
    produce(config, "staged_order")
    listener = Recorder(meet_peaks=True)
    consumer = consumer_of(config, "staged_order", "g_staged_order", listener)
    try:
        wait_until(lambda: len(listener.done()) == 100, timeout_s=20, message="100 messages consumed")
    finally:
        consumer.shutdown()
    assert sorted(i for i, _, _ in listener.runs) == list(range(100))  # each once
    assert_stage_order(listener.runs)
    assert listener.peak_by_stage[0] == 10
    assert listener.peak_by_stage[1] == 20  # the pool
    assert listener.peak_by_stage[2] == 20


def test_restart_mid_stage_resumes_the_stage(config):
    produce(config, "staged_restart")
    first = Recorder(fail_from=25)  # stage 1 cannot complete: 25-29 keep failing
    consumer = consumer_of(config, "staged_restart", "g_staged_restart", first)
    try:
        wait_until(
            lambda: first.done() == set(range(25)) and len(first.failures) >= 15,
            timeout_s=20,
            message="stage 1 stuck on retried failures",
        )
    finally:
        consumer.shutdown()  # mid stage 1: listeners in flight finish, the stage record is flushed
    done_before = first.done()
    assert done_before == set(range(25)), "the failures held back their own stage, or a later stage ran"
    assert first.failed() == set(range(25, 30))
    second = Recorder()
    consumer = consumer_of(config, "staged_restart", "g_staged_restart", second)
    try:
        wait_until(
            lambda: done_before | second.done() == set(range(100)),
            timeout_s=20,
            message="the rest consumed after the restart",
        )
    finally:
        consumer.shutdown()
    rerun = second.done() & done_before
    assert not any(STAGE_OF[i] == 0 for i in second.done()), "stage 0 ran again: the stage did not resume"
    assert not rerun  # everything done was below the committed position
    stage1_end = max(end for i, _, end in first.runs + second.runs if STAGE_OF[i] == 1)
    assert min(start for i, start, _ in second.runs if STAGE_OF[i] == 2) >= stage1_end
    assert_stage_order(second.runs + [r for r in first.runs if r[0] not in rerun])


class QueueRecorder(StagedConcurrentListener):
    """Stages [10, 20] per queue; records (queue id, index in queue, start, end) of successful deliveries."""

    def __init__(self, runs: list, lock: threading.Lock) -> None:
        self.runs, self.lock = runs, lock

    def stage_definitions(self, strategy=None):
        return [10, 20]

    def consume_message(self, msgs, context):
        start = time.monotonic()
        time.sleep(0.05)  # the listener's work
        with self.lock:
            self.runs.append((context.message_queue.queue_id, int(msgs[0].body), start, time.monotonic()))
        return ConsumeOrderlyStatus.SUCCESS


def test_rebalance_mid_stage_keeps_stage_order_per_queue(config):
    topic, group, per_queue = "staged_rebalance", "g_staged_rebalance", 60
    with Admin(config) as admin:
        admin.create_topic(topic, queues=2)
    by_tag = FunctionSelector(lambda queues, msg: queues[int(msg.tags)])  # the tag names the queue id
    with Producer(config, selector=by_tag) as producer:
        for queue_id in (0, 1):
            for i in range(per_queue):
                producer.send(Message.create(topic, str(i), tags=str(queue_id)))
    lock = threading.Lock()
    runs_a: list = []
    runs_b: list = []

    def start(runs, instance_name):  # two client ids: two owners for the broker's queue locks
        consumer = PushConsumer(
            PushConsumerOptions(
                group,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                consume_thread_max=4,
                rebalance_interval_ms=300,
                persist_interval_ms=200,
                long_poll_ms=1000,
            ),
            dataclasses.replace(config, instance_name=instance_name),
        )
        consumer.subscribe(topic)
        consumer.register_staged_listener(QueueRecorder(runs, lock))
        return consumer.start()

    def done() -> set:
        with lock:
            return {(q, i) for q, i, _, _ in runs_a + runs_b}

    first = start(runs_a, "staged-a")
    second = None
    try:
        wait_until(lambda: len(done()) >= 15, timeout_s=20, message="first consumer into stage 1")
        second = start(runs_b, "staged-b")  # takes one queue over mid-stage
        wait_until(lambda: len(done()) == 2 * per_queue, timeout_s=30, message="all consumed by the two")
    finally:
        for consumer in (second, first):
            if consumer is not None:
                consumer.shutdown()
    assert runs_b, "the second consumer never got a queue"
    stage_of = [0] * 10 + [1] * 20 + [2] * 30
    all_runs = runs_a + runs_b
    for queue_id in (0, 1):
        runs = [(i, s, e) for q, i, s, e in all_runs if q == queue_id]
        for i, started, _ in runs:  # every earlier-stage message had a completed run before this one started
            for j in range(per_queue):
                if stage_of[j] < stage_of[i]:
                    assert any(e <= started for k, _, e in runs if k == j), (
                        f"queue {queue_id}: {i} (stage {stage_of[i]}) started before {j} completed"
                    )
        # The old owner drains a dropped queue before unlocking it: no earlier-stage run is still going on
        # anywhere when a later-stage message starts.
        for i, started, _ in runs:
            for j, s, e in runs:
                assert not (stage_of[j] < stage_of[i] and s < started < e), (
                    f"queue {queue_id}: {i} (stage {stage_of[i]}) started while {j} was still running"
                )


class Prizes(StagedConcurrentListener):
    """RIP-22's example: the prize of an order is chosen by the stage its message is in (``context.stage_index``);
    the definitions and the reset hook's answer are the test's to change."""

    PRIZES = ("laptop", "tablet", "phone")

    def __init__(self, definitions) -> None:
        self.definitions = definitions
        self.reset_to: int | None = None
        self.resets: list[tuple[str | None, str | None, int]] = []
        self.prizes: dict[int, str] = {}
        self.strategies: set = set()
        self.lock = threading.Lock()

    def stage_definitions(self, strategy=None):
        return self.definitions

    def reset_current_stage_offset_if_need(self, mq, strategy, group, stage_offset):
        self.resets.append((strategy, group, stage_offset))
        return self.reset_to

    def consume_message(self, msgs, context):
        prize = self.PRIZES[context.stage_index] if context.stage_index < len(self.PRIZES) else "thanks"
        with self.lock:
            self.strategies.add(context.strategy_id)
            for msg in msgs:
                self.prizes[int(msg.body)] = prize
        return ConsumeOrderlyStatus.SUCCESS

    def done(self) -> int:
        with self.lock:
            return len(self.prizes)


def test_the_listener_branches_on_the_stage_index(config):
    produce(config, "staged_prizes")
    listener = Prizes([10, 20, 30])
    consumer = consumer_of(config, "staged_prizes", "g_staged_prizes", listener)
    try:
        wait_until(lambda: listener.done() == 100, timeout_s=20, message="100 orders consumed")
    finally:
        consumer.shutdown()
    expected = ["laptop"] * 10 + ["tablet"] * 20 + ["phone"] * 30 + ["thanks"] * 40
    assert [listener.prizes[i] for i in range(100)] == expected
    assert listener.strategies == {""}  # the default strategy: one staged sequence per queue


def test_definitions_are_read_again_at_a_rebalance(config, caplog):
    topic = "staged_redefined"
    produce(config, topic, range(10))
    listener = Prizes([5, -1])  # malformed: refused, nothing is consumed under it
    with caplog.at_level(logging.ERROR, logger="pocketmq.client.staged_consume_service"):
        consumer = consumer_of(config, topic, "g_staged_redefined", listener)
        try:
            wait_until(
                lambda: "event=stage_definitions_refused" in caplog.text, timeout_s=10, message="definitions refused"
            )
            assert "stage sizes must be positive integers, got [5, -1]" in caplog.text
            assert listener.done() == 0 and listener.resets == []
            listener.definitions = [5, 5]
            consumer.rebalance()  # read again: taken, the reset hook asked
            wait_until(lambda: listener.done() == 10, timeout_s=10, message="consumed under valid definitions")
            assert [listener.prizes[i] for i in range(10)] == ["laptop"] * 5 + ["tablet"] * 5
            assert listener.resets == [("", "", 0)]
            listener.reset_to = 0  # a new sale, from the next order on (the answer first: a periodic
            listener.definitions = [3]  # rebalance may read the definitions at any moment)
            consumer.rebalance()
            assert listener.resets == [("", "", 0), ("", "", 10)]  # every change asks the hook
            send_more(config, topic, range(10, 16))
            wait_until(lambda: listener.done() == 16, timeout_s=10, message="the new sale consumed")
        finally:
            consumer.shutdown()
    # numbered from 0 again: stage 0 of [3], then the unbounded stage (index 1)
    assert [listener.prizes[i] for i in range(10, 16)] == ["laptop"] * 3 + ["tablet"] * 3


def test_a_failing_message_goes_to_the_dlq_and_its_stage_completes(config):
    produce(config, "staged_dlq")
    listener = Recorder(fail_only={5})  # stage 0's 5 fails at every delivery
    consumer = consumer_of(config, "staged_dlq", "g_staged_dlq", listener)  # max_reconsume_times: the default
    try:
        wait_until(lambda: len(listener.done()) == 99, timeout_s=30, message="every other message consumed")
        with PullConsumer("g_staged_dlq_reader", config) as reader:
            dlq = MessageQueue("%DLQ%g_staged_dlq", "broker-staged", 0)
            wait_until(lambda: dlq_size(reader, dlq) == 1, timeout_s=10, message="5 in the DLQ")
            [dead] = reader.pull(dlq, 0, 10).messages
    finally:
        consumer.shutdown()
    assert dead.body == b"5"
    assert listener.failures == [5] * 17  # 1 + 16 retries, the concurrent listener's default
    assert listener.done() == set(range(100)) - {5}
    assert_stage_order(listener.runs)
    assert min(start for i, start, _ in listener.runs if STAGE_OF[i] == 1) >= listener.last_failure_end


def dlq_size(reader: PullConsumer, dlq: MessageQueue) -> int:
    try:
        return reader.max_offset(dlq)
    except Exception:  # the DLQ topic is created with its first message
        return 0
