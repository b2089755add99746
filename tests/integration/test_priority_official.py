"""Priority messages and FIFO receives against ``pocketmq serve``, with the unmodified official RocketMQ 5
Python client (gRPC; ``priority_official_client.py``), the SDK and the CLI (remoting).

- A PRIORITY topic made with ``pocketmq topic create --type priority``: the official producer sends priority
  messages unmodified (the route lists PRIORITY) and its SimpleConsumer receives the backlog highest priority
  first, then in send order; so does the SDK's SimpleConsumer for messages sent by the SDK and the CLI.
- A FIFO group's SimpleConsumer (official client) receives 12 messages of 4 message groups spread over 4 queues
  promptly and in each group's order, whatever queue each receive names.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.grpc_support import client_env

from pocketmq.client import Admin, ClientConfig, Message, Producer, SimpleConsumer
from pocketmq.testing.processes import broker_process, run_cli

SCRIPT = Path(__file__).with_name("priority_official_client.py")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("priority"), "broker-priority").start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def config(broker) -> ClientConfig:
    return ClientConfig(namesrv_addr=broker.namesrv)


def official(broker, tmp_path: Path, **spec) -> dict:
    """Run ``priority_official_client.py`` with ``spec`` to its end; its JSON result."""
    command = [sys.executable, str(SCRIPT), json.dumps({"endpoint": broker.grpc, "deadline_s": 30, **spec})]
    out = subprocess.run(command, env=client_env(tmp_path / "home"), capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def pocketmq(broker, *args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, namesrv=broker.namesrv)


LEVELS = [0, 2, 1, 0, 3, 1, 2, 0, 3, 9]  # 9: above the last queue (3), the highest there is


def by_priority(sent: list[tuple[str, int]]) -> list[str]:
    """The delivery order of a backlog: highest level first (9 counts as 3), then send order."""
    return [body for _, body in sorted(((-min(level, 3), i), body) for i, (body, level) in enumerate(sent))]


def test_official_client_sends_and_receives_priority_messages_highest_first(broker, tmp_path):
    made = pocketmq(broker, "topic", "create", "prio_official", "--type", "priority", "--queues", "4")
    assert made.returncode == 0, made.stderr
    sent = [(f"m{i}-p{level}", level) for i, level in enumerate(LEVELS)]
    result = official(
        broker,
        tmp_path,
        topic="prio_official",
        group="prio_official_group",
        send=[[body, level, None] for body, level in sent],
        receive=len(sent),
        batch=1,
    )
    assert result["sent"] == len(sent)
    assert [body for _, body, _, _ in result["got"]] == by_priority(sent)
    assert {body: priority for _, body, priority, _ in result["got"]} == dict(sent)


def test_sdk_and_cli_priority_messages_come_highest_first(broker, config):
    made = pocketmq(broker, "topic", "create", "prio_sdk", "--type", "priority", "--queues", "4")
    assert made.returncode == 0, made.stderr
    sent = [(f"s{i}-p{level}", level) for i, level in enumerate(LEVELS)]
    with Producer(config) as producer:
        for body, level in sent:
            assert producer.send(Message.create("prio_sdk", body, priority=level)).queue_id == min(level, 3)
    cli = pocketmq(broker, "send", "prio_sdk", "--body", "cli-p3", "--priority", "3", "--json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["queue_id"] == 3
    sent.append(("cli-p3", 3))
    got: list[str] = []
    with SimpleConsumer("prio_sdk_group", {"prio_sdk": "*"}, config, await_duration_ms=2000) as consumer:
        while len(got) < len(sent):
            batch = consumer.receive(1, 30_000)
            for msg in batch:
                assert msg.priority == dict(sent)[msg.body.decode()]
                got.append(msg.body.decode())
                consumer.ack(msg)
    assert got == by_priority(sent)


def test_official_fifo_simple_consumer_receives_every_ready_queue_promptly(broker, config, tmp_path):
    with Admin(config) as admin:
        admin.create_topic("fifo_receive", queues=4)
        admin.create_group("fifo_receive_group", consume_message_orderly=True)
    groups = ["ga", "gb", "gc", "gd", "ge", "gf"]
    sent = [[f"{groups[i % 6]}:{i}", None, groups[i % 6]] for i in range(12)]
    result = official(broker, tmp_path, topic="fifo_receive", group="fifo_receive_group", send=sent, receive=12)
    got = result["got"]
    assert sorted(body for _, body, _, _ in got) == sorted(body for body, _, _ in sent)
    for group in groups:
        mine = [body for _, body, _, g in got if g == group]
        assert mine == [body for body, _, g in sent if g == group]
    # before, a receive that named an empty queue long-polled it (5 s here) while others held messages
    assert got[-1][0] < 4.0, got
