"""Staged POP (the POP form of staged concurrency) against a real ``pocketmq serve`` through the SDK's
``StagedSimpleConsumer``: 100 messages in one queue, stages [10, 20, 70], ten consumer threads that work a fixed
time per message and record start/end: stage order holds and the threads overlap inside a stage; a message
left un-acked comes back in its stage and holds back the next one; a ``kill -9`` of the broker mid-stage keeps
the stage's progress (nothing of the next stage before the stage is done, nothing lost); the official gRPC
SimpleConsumer of a staged group follows the stages too; definitions that are not positive sizes are refused by
the consumer and by the broker, with the reason; a registration with new definitions takes effect at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.integration.test_pop_sdk import receive_all

from pocketmq.client import Admin, ClientConfig, Message, Producer, StagedSimpleConsumer
from pocketmq.common.errors import ClientError, PocketMQError
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.slow

STAGES = [10, 20, 70]
WORK_S = 0.05  # the work per message
THREADS = 10
STAGE_OF = [0] * 10 + [1] * 20 + [2] * 70
PEAK_OF_STAGE = {0: 10, 1: 10, 2: 10}  # a stage's size, up to the ten threads


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("staged_pop"), "broker-spop").start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def produce(config: ClientConfig, topic: str, count: int) -> None:
    with Admin(config) as admin:
        admin.create_topic(topic, queues=1)
    with Producer(config) as producer:
        producer.send_batch([Message.create(topic, str(i)) for i in range(count)])


class Workers:
    """``THREADS`` threads sharing one consumer: receive one message, work ``WORK_S``, record, ack.

    Before it works, a thread holding a message waits (up to 10 s) until as many messages of its stage are held at
    once as the stage allows (``PEAK_OF_STAGE``): a consumer handed a stage's messages concurrently reaches that
    peak however slowly the machine schedules the threads and the receives; one handed them one at a time leaves
    the peak short. (A fixed work time alone let a slow receive finish the work before the next one came.)"""

    def __init__(self, consumer: StagedSimpleConsumer, want: int):
        self.consumer, self.want = consumer, want
        self.runs: list[tuple[int, float, float]] = []  # (body, start, end)
        self.lock = threading.Condition()
        self.in_flight = 0
        self.peak_by_stage: dict[int, int] = {}
        self.stages_seen: dict[int, int] = {}

    def _loop(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.runs) >= self.want:
                    return
            for msg in self.consumer.receive(1, 30_000, await_duration_ms=500):
                index = int(msg.body)
                with self.lock:
                    self.in_flight += 1
                    stage = STAGE_OF[index]
                    self.peak_by_stage[stage] = max(self.peak_by_stage.get(stage, 0), self.in_flight)
                    self.stages_seen[index] = self.consumer.stage_of(msg)
                    self.lock.notify_all()
                    self.lock.wait_for(lambda: self.peak_by_stage[stage] >= PEAK_OF_STAGE[stage], timeout=10)
                start = time.monotonic()
                time.sleep(WORK_S)  # the message's work, not a wait for a condition
                end = time.monotonic()
                with self.lock:
                    self.in_flight -= 1
                    self.runs.append((index, start, end))
                self.consumer.ack(msg)

    def run(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        threads = [threading.Thread(target=self._loop, args=(deadline,)) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def test_stage_order_and_concurrency_inside_stages(broker):
    config = ClientConfig(namesrv_addr=broker.namesrv)
    produce(config, "spop_order", 100)
    with StagedSimpleConsumer("g_spop_order", {"spop_order": "*"}, STAGES, config) as consumer:
        workers = Workers(consumer, 100)
        workers.run()
    assert sorted(index for index, _, _ in workers.runs) == list(range(100))
    assert all(workers.stages_seen[i] == STAGE_OF[i] for i in range(100))
    for stage in (1, 2):
        earlier_end = max(end for i, _, end in workers.runs if STAGE_OF[i] == stage - 1)
        later_start = min(start for i, start, _ in workers.runs if STAGE_OF[i] == stage)
        assert later_start > earlier_end, f"stage {stage} started before stage {stage - 1} was done"
    # Ten threads on a stage of ten (or more): all of them hold one at once (not one at a time, as orderly would).
    assert workers.peak_by_stage == PEAK_OF_STAGE


def test_unacked_message_comes_back_in_its_stage_and_holds_the_next(broker):
    config = ClientConfig(namesrv_addr=broker.namesrv)
    produce(config, "spop_unacked", 6)
    with StagedSimpleConsumer("g_spop_unacked", {"spop_unacked": "*"}, [3, 3], config) as consumer:
        popped_at = time.monotonic()
        first = receive_all(consumer, 3, 10, invisible_ms=1500)
        assert sorted(int(m.body) for m in first) == [0, 1, 2]
        kept = next(m for m in first if int(m.body) == 1)
        for msg in first:
            if msg is not kept:
                consumer.ack(msg)
        [again] = receive_all(consumer, 1, 10, invisible_ms=1500)  # only 1 can come: stage 1 is held back
        assert (int(again.body), again.reconsume_times) == (1, 1)
        assert time.monotonic() - popped_at >= 1.4
        consumer.ack(again)
        second = receive_all(consumer, 3, 10, invisible_ms=1500)
        assert sorted(int(m.body) for m in second) == [3, 4, 5]
        assert {m.reconsume_times for m in second} == {0}
        consumer.ack_batch(second)


def test_kill_9_mid_stage_keeps_stage_progress(tmp_path):
    proc = broker_process(tmp_path, "broker-spop-kill").start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        produce(config, "spop_kill", 30)
        with StagedSimpleConsumer("g_spop_kill", {"spop_kill": "*"}, [10, 20], config) as consumer:
            first = receive_all(consumer, 10, 10, invisible_ms=3000)
            assert sorted(int(m.body) for m in first) == list(range(10))
            acked = {int(m.body) for m in first[:6]}
            consumer.ack_batch(first[:6])
        proc.kill()
        proc.restart()
        config = ClientConfig(namesrv_addr=proc.namesrv)
        order: list[int] = []
        with StagedSimpleConsumer("g_spop_kill", {"spop_kill": "*"}, [10, 20], config) as consumer:
            deadline = time.monotonic() + 30
            while set(order) | acked != set(range(30)) and time.monotonic() < deadline:
                got = consumer.receive(32, 3000, await_duration_ms=500)
                order += [int(m.body) for m in got]
                consumer.ack_batch(got)
        assert set(order) | acked == set(range(30)), "nothing lost"
        unacked = set(range(10)) - acked
        first_later = next(i for i, body in enumerate(order) if body >= 10)
        # The un-acked messages of stage 0 came back (after their invisible time) before anything of stage 1;
        # acked ones never: even when the kill lost the consumer offset's last save, the CKs of their pops move
        # the offset past them at restart.
        assert not acked & set(order)
        assert unacked <= set(order[:first_later])
        assert all(body < 10 for body in order[:first_later])
    finally:
        proc.stop()


def test_official_grpc_simple_consumer_follows_the_registered_stages(broker, tmp_path):
    """The broker gates every pop of a staged (group, topic), whatever the client: the unmodified official
    RocketMQ 5 SimpleConsumer (gRPC) gets stage 0, then stage 1, then the rest, never two stages at once."""
    config = ClientConfig(namesrv_addr=broker.namesrv)
    produce(config, "spop_official", 20)
    with StagedSimpleConsumer("g_spop_official", {"spop_official": "*"}, [5, 5], config):
        pass  # registers the stages on the broker; they stay registered
    spec = {
        "endpoint": broker.grpc,
        "topic": "spop_official",
        "group": "g_spop_official",
        "count": 20,
        "deadline_s": 40,
    }
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("staged_official_client.py")), json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "HOME": str(home)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    receives = json.loads(out.stdout.strip().splitlines()[-1])["receives"]
    assert sorted(b for got in receives for b in got) == list(range(20))  # each once: all acked in time
    stages = [{min(b // 5, 2) for b in got} for got in receives]
    assert all(len(s) == 1 for s in stages), receives  # one stage per receive
    order = [min(s) for s in stages]
    assert order == sorted(order) and set(order) == {0, 1, 2}, receives


def test_malformed_definitions_are_refused_and_new_ones_take_effect(broker):
    config = ClientConfig(namesrv_addr=broker.namesrv)
    produce(config, "spop_redefined", 6)
    with pytest.raises(ClientError, match=r"stage sizes must be positive integers, got \[2, -1\]"):
        StagedSimpleConsumer("g_spop_redefined", {"spop_redefined": "*"}, [2, -1], config)
    bypassing = StagedSimpleConsumer("g_spop_redefined", {"spop_redefined": "*"}, [2], config)
    bypassing.core.stage_definitions = [0]  # as a client without the SDK's check would send them
    try:
        with pytest.raises(PocketMQError, match=r"stage sizes must be positive integers, got \[0\]"):
            bypassing.start()
    finally:
        bypassing.shutdown()
    with StagedSimpleConsumer("g_spop_redefined", {"spop_redefined": "*"}, [2], config) as consumer:
        first = receive_all(consumer, 2)
        assert [m.body for m in first] == [b"0", b"1"]  # one stage of two
        consumer.ack_batch(first)
    with StagedSimpleConsumer("g_spop_redefined", {"spop_redefined": "*"}, [2, 4], config) as consumer:
        # the origin stays and the new definitions apply: 2..5 are one stage, all out at once (under [2] only
        # two would leave before an ack)
        assert sorted(m.body for m in receive_all(consumer, 4)) == [b"2", b"3", b"4", b"5"]
