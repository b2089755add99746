"""Staged-concurrent consumption against a real ``pocketmq serve``: 100 messages in one queue, stages
[10, 20, 70], a listener that works 20 ms per message and records start/end. Stage order holds, concurrency
inside the stages reaches the pool; a consumer restarted mid-stage resumes that stage from the broker's stage
offsets (QUERY/UPDATE_STAGE_OFFSETS) and no later-stage message runs early."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from pocketmq.client import Admin, ClientConfig, FunctionSelector, Message, Producer, StagedConcurrentListener
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
    from ``fail_from`` on are suspended (SUSPEND_CURRENT_QUEUE_A_MOMENT) and counted in ``failures``.

    ``meet_peaks``: a call waits (up to 10 s) until as many calls of its stage run at once as the stage allows
    (``PEAK_OF_STAGE``) before it works. A consumer that runs a stage's messages concurrently reaches that peak
    however slowly the machine schedules its threads; one that does not leaves the peak short."""

    def __init__(self, fail_from: int = 100, *, meet_peaks: bool = False) -> None:
        self.fail_from = fail_from
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
            if index >= self.fail_from:
                self.failures.append(index)
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            self.runs.append((index, start, time.monotonic()))
        return ConsumeOrderlyStatus.SUCCESS

    def failed(self) -> set[int]:
        with self.lock:
            return set(self.failures)

    def done(self) -> set[int]:
        with self.lock:
            return {i for i, _, _ in self.runs}


def produce(config, topic: str) -> None:
    with Admin(config) as admin:
        admin.create_topic(topic, queues=1)
    with Producer(config) as producer:
        for i in range(100):
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
