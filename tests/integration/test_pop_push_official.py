"""The unmodified official RocketMQ 5 Python PushConsumer (gRPC) against ``pocketmq serve``.

One broker (revive every 100 ms, delay levels of 1 s so a nack's backoff is short) serves three groups:

- a PushConsumer consumes 200 messages concurrently (listener calls overlap), each once;
- a PushConsumer whose listener fails every time: each message is delivered exactly retryMaxTimes + 1 = 3
  times (attempts 1, 2, 3), then lands in ``%DLQ%<group>`` with its reason and original topic, queue and offset;
- a FIFO group (``--fifo``): each message group is consumed in send order although every message fails on its
  first attempt, and no two messages of a group are ever in the listener at once.

The client runs in its own process with HOME set to a temporary directory (see push_official_client.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.broker.pop.copies import (
    DLQ_ORIGIN_QUEUE_ID,
    DLQ_ORIGIN_QUEUE_OFFSET,
    DLQ_REASON,
    REASON_MAX_ATTEMPTS,
)
from pocketmq.client import Admin, ClientConfig, Message, Producer, SimpleConsumer
from pocketmq.common import properties as props
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

SCRIPT = Path(__file__).with_name("push_official_client.py")
BROKER_SETTINGS = ["--set", "pop_revive_interval_ms=100", "--set", "message_delay_level=1s 1s 1s 1s"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("push"), "broker-push", extra_args=BROKER_SETTINGS).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def config(broker) -> ClientConfig:
    return ClientConfig(namesrv_addr=broker.namesrv)


def run_push_consumer(broker, tmp_path: Path, **spec) -> dict:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    spec = {"endpoint": broker.grpc, "deadline_s": 40, **spec}
    out = subprocess.run(
        [sys.executable, str(SCRIPT), json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "HOME": str(home)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_push_consumer_consumes_concurrently(broker, config, tmp_path):
    with Admin(config) as admin:
        admin.create_topic("push_ok", queues=4)
    with Producer(config) as producer:
        producer.send_batch([Message.create("push_ok", str(i)) for i in range(200)])
    result = run_push_consumer(
        broker, tmp_path, topic="push_ok", group="push_ok_group", expect=200, mode="ok", work_s=0.02
    )
    assert sorted(result["consumed"], key=int) == [str(i) for i in range(200)]
    assert {attempt for _, attempt, _ in result["calls"]} == {1}
    assert result["max_running"] > 1  # the listener ran concurrently
    assert result["settings"]["fifo"] is False


def test_failing_push_consumer_dead_letters_after_max_attempts(broker, config, tmp_path):
    with Admin(config) as admin:
        admin.create_topic("push_fail", queues=2)
        admin.create_group("push_fail_group", retry_max_times=2)
    with Producer(config) as producer:
        sent = producer.send_batch([Message.create("push_fail", f"f{i}") for i in range(6)])  # one queue
    result = run_push_consumer(
        broker, tmp_path, topic="push_fail", group="push_fail_group", expect=6, mode="fail", idle_s=3
    )
    attempts: dict[str, list[int]] = {}
    for body, attempt, _ in result["calls"]:
        attempts.setdefault(body, []).append(attempt)
    assert {body: sorted(a) for body, a in attempts.items()} == {f"f{i}": [1, 2, 3] for i in range(6)}
    with SimpleConsumer("push_fail_dlq_reader", {"%DLQ%push_fail_group": "*"}, config) as reader:
        dead = []
        wait_until(
            lambda: len(dead) >= 6 or dead.extend(reader.receive(32, 30_000, await_duration_ms=500)),
            timeout_s=15,
            message="6 dead letters",
        )
    assert sorted(m.body.decode() for m in dead) == [f"f{i}" for i in range(6)]
    where = {(sent.queue_id, sent.queue_offset + k) for k in range(6)}
    for msg in dead:
        assert msg.properties[DLQ_REASON] == REASON_MAX_ATTEMPTS
        assert msg.properties[props.DLQ_ORIGIN_TOPIC] == "push_fail"
        assert (int(msg.properties[DLQ_ORIGIN_QUEUE_ID]), int(msg.properties[DLQ_ORIGIN_QUEUE_OFFSET])) in where


def test_fifo_push_consumer_keeps_group_order_under_failures(broker, config, tmp_path):
    with Admin(config) as admin:
        admin.create_topic("push_fifo", queues=1)  # the send order is the queue order
        admin.create_group("push_fifo_group", retry_max_times=3, consume_message_orderly=True)
    groups = [f"g{k}" for k in range(4)]
    with Producer(config) as producer:
        for i in range(20):
            producer.send(Message.create("push_fifo", f"{groups[i % 4]}:{i}", message_group=groups[i % 4]))
    result = run_push_consumer(
        broker, tmp_path, topic="push_fifo", group="push_fifo_group", expect=20, mode="fail_first", work_s=0.005
    )
    assert result["settings"]["fifo"] is True
    for group in groups:
        mine = [b for b in result["consumed"] if b.startswith(f"{group}:")]
        assert mine == [f"{group}:{i}" for i in range(20) if groups[i % 4] == group]
    assert result["max_running_per_group"] == 1
