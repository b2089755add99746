"""Message trace against a real ``pocketmq serve`` (docs/trace.md): one message sent, popped and not acked twice
(a short invisible time), revived into its retry topic, dead-lettered (the group allows one retry), resent from
the DLQ with ``pocketmq dlq resend``, popped and acked: ``pocketmq message trace ID --json`` shows each step in
order, with times and actors; the table names the same steps, and the web console's API and message page show
the same steps in the same order."""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from pocketmq.cli.main import main as pocketmq_main
from pocketmq.client import Admin, ClientConfig, Message, Producer, SimpleConsumer
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process, run_cli

SETTINGS = [
    *("--set", "pop_revive_interval_ms=100", "--set", "pop_min_invisible_ms=200", "--set", "trace_sample_ratio=1"),
    *("--console-port", "0"),
]
INVISIBLE_MS = 300
TOPIC, GROUP = "traced_orders", "traced_group"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("trace"), "broker-trace", extra_args=SETTINGS).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture
def cli(broker, capsys):
    """``pocketmq ARGS -n NAMESRV`` in this process (a process start per poll is slow): (status, stdout)."""

    def run(*args: str) -> tuple[int, str]:
        status = pocketmq_main([*args, "-n", broker.namesrv])
        return status, capsys.readouterr().out

    return run


def trace_of(cli, msg_id: str) -> list[dict]:
    status, out = cli("message", "trace", msg_id, "--json")
    assert status == 0
    return [json.loads(line) for line in out.splitlines()]


def console_get(broker, path: str) -> bytes:
    with urllib.request.urlopen(broker.address("console") + path, timeout=15) as response:
        assert response.status == 200
        return response.read()


def receive_one(consumer: SimpleConsumer, invisible_ms: int = INVISIBLE_MS):
    got = []
    wait_until(lambda: got.extend(consumer.receive(1, invisible_ms, await_duration_ms=1000)) or got, timeout_s=20)
    [msg] = got
    return msg


@pytest.mark.timeout(120)
def test_a_message_trace_follows_its_retries_dead_letter_and_resend(broker, cli):
    config = ClientConfig(namesrv_addr=broker.namesrv)
    with Admin(config) as admin:
        admin.create_topic(TOPIC, queues=1)
        admin.create_group(GROUP, retry_max_times=1)
    with Producer(config) as producer:
        before_ms = int(time.time() * 1000)
        sent = producer.send(Message.create(TOPIC, b"order-7", keys="order-7"))
    msg_id = sent.msg_id
    with SimpleConsumer(GROUP, {TOPIC: "*"}, config) as consumer:
        first = receive_one(consumer)  # not acked: revive writes its retry copy
        second = receive_one(consumer)  # not acked again: the group's one retry is used up, so it dies
        assert (first.msg_id, second.msg_id, second.reconsume_times) == (msg_id, msg_id, 1)
        wait_until(lambda: "dlq" in [s["step"] for s in trace_of(cli, msg_id)], timeout_s=20)

        resent = run_cli("dlq", "resend", GROUP, "--id", msg_id, namesrv=broker.namesrv)
        assert resent.returncode == 0, resent.stderr
        third = receive_one(consumer, invisible_ms=30_000)
        assert third.msg_id == msg_id
        consumer.ack(third)

    expected = ["send", "pop", "retry", "pop", "dlq", "resend", "pop", "ack"]
    wait_until(lambda: [s["step"] for s in trace_of(cli, msg_id)] == expected, timeout_s=20)
    steps = trace_of(cli, msg_id)
    times = [s["time_ms"] for s in steps]
    assert times == sorted(times) and before_ms <= times[0] <= times[-1] <= time.time() * 1000
    assert {s["message_id"] for s in steps} == {msg_id} and {s["source"] for s in steps} == {"broker-trace"}
    send, pop1, retry, pop2, dlq, resend, pop3, ack = steps
    assert send["topic"] == TOPIC and send["queue_offset"] == sent.queue_offset
    assert pop1["actor"] == pop2["actor"] == pop3["actor"] != ""  # the consumer's client id
    assert pop1["details"]["invisible_ms"] == INVISIBLE_MS and pop1["details"]["attempt"] == 1
    assert pop2["details"]["attempt"] == 2 and pop2["topic"].startswith("%RETRY%")
    assert retry["actor"] == dlq["actor"] == "revive"
    assert retry["details"]["to_topic"] == pop2["topic"] and retry["details"]["read"] == "local"
    assert dlq["details"]["to_topic"] == f"%DLQ%{GROUP}" and dlq["details"]["reason"] == "MAX_ATTEMPTS"
    assert resend["time_ms"] >= dlq["time_ms"] and ack["actor"] == GROUP

    status, out = cli("message", "trace", msg_id)
    assert status == 0
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["TIME", "STEP", "ACTOR"]
    assert [row.split()[1] for row in rows] == expected

    # the console: its API answers the very steps of the CLI, in its order; its message page lists them too
    api = json.loads(console_get(broker, f"/api/messages/{msg_id}/trace"))
    assert api == {"message_id": msg_id, "steps": steps}
    page = console_get(broker, f"/fragments/messages/{msg_id}/trace").decode()
    assert re.findall(r'<td data-field="step">(\w+)</td>', page) == expected
    assert re.findall(r'<td data-field="actor">([^<]*)</td>', page) == [s["actor"] for s in steps]


@pytest.mark.timeout(60)
def test_sdk_clients_with_enable_trace_send_4x_trace_records(broker, cli):
    config = ClientConfig(namesrv_addr=broker.namesrv, enable_trace=True)
    with Admin(config) as admin:
        admin.create_topic("traced_sdk", queues=1)
    with Producer(config) as producer:
        sent = producer.send(Message.create("traced_sdk", b"hello", tags="t1", keys="k-1"))
    with SimpleConsumer("traced_sdk_group", {"traced_sdk": "*"}, config) as consumer:
        consumer.ack(receive_one(consumer, invisible_ms=30_000))

    def steps() -> dict[str, dict]:
        return {s["step"]: s for s in trace_of(cli, sent.msg_id)}

    wanted = {"send", "client_send", "pop", "client_consume", "client_consumed", "ack"}
    wait_until(lambda: set(steps()) == wanted, timeout_s=20)
    found = steps()
    client_send, before, after = found["client_send"], found["client_consume"], found["client_consumed"]
    assert client_send["source"] == "client" and client_send["topic"] == "traced_sdk"
    assert client_send["details"]["success"] and client_send["details"]["tags"] == "t1"
    assert before["actor"] == "traced_sdk_group" and before["details"]["retry_times"] == 0
    assert after["details"]["success"] and after["details"]["request_id"] == before["details"]["request_id"]
    assert found["send"]["time_ms"] <= client_send["time_ms"]
