"""The gRPC proxy (``pocketmq proxy --workers 2``) with the unmodified official RocketMQ 5 Python client: a name
server, a broker, the proxy, and each client in its own process (the scripts of the other official-client
tests, pointed at the proxy's endpoint).

- sends, receives, acks, the change of an invisible duration and redelivery of what was not acked;
- FIFO: each message group's messages are received in send order;
- delay: a DELAY message is received, and not before it was due;
- transactions: commit delivered, rollback never, an open one settled by the broker's check relayed to the
  client's Telemetry stream and answered with its EndTransaction;
- both workers serve: new connections land on both processes (SO_REUSEPORT);
- a push consumer's message stays invisible while its listener works longer than the invisible time (renewed);
- a push consumer leaves without an error in its log, and a receive the proxy still had open at the broker
  for it keeps nothing: what that receive popped after the client left goes back at once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import grpc
import pytest
from grpc_support import client_env, client_log_problems
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from tests.integration.transaction_support import bodies

from pocketmq.client import Admin, ClientConfig, MessageType, PullConsumer
from pocketmq.protocol.grpc_codec import MessagingServiceStub
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import FAST_DELAY_LEVEL_ARGS, broker_process, namesrv_process, proxy_process

pytestmark = pytest.mark.timeout(180)

HERE = Path(__file__).parent
BROKER_ARGS = [
    *FAST_DELAY_LEVEL_ARGS,
    "--set",
    "pop_revive_interval_ms=100",
    "--set",
    "transaction_timeout_ms=300",
    "--set",
    "transaction_check_interval_ms=500",
]

# A push consumer's messages are invisible 4 s at a time here, renewed 2.5 s before that runs out.
AUTO_RENEW_INVISIBLE_MS = 4_000
PROXY_ARGS = ["--auto-renew-invisible-ms", str(AUTO_RENEW_INVISIBLE_MS), "--auto-renew-ahead-ms", "2500"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("proxy-official")
    namesrv = namesrv_process(workdir / "namesrv").start()
    broker = broker_process(workdir / "broker", "broker-px", namesrv=namesrv.namesrv, extra_args=BROKER_ARGS).start()
    proxy = proxy_process(workdir / "proxy", namesrv.namesrv, workers=2, extra_args=PROXY_ARGS).start(timeout_s=90)
    config = ClientConfig(namesrv_addr=namesrv.namesrv)
    with Admin(config) as admin:
        admin.create_topic("px_normal", queues=2)
        admin.create_topic("px_leave", queues=1)
        admin.create_topic("px_slow", queues=1)
        admin.create_topic("px_fifo", queues=2, message_type=MessageType.FIFO)
        admin.create_group("px_fifo_group", consume_message_orderly=True)
        admin.create_topic("px_delay", queues=2, message_type=MessageType.DELAY)
        admin.create_topic("px_tx", queues=2, message_type=MessageType.TRANSACTION)
    yield {"namesrv": namesrv, "broker": broker, "proxy": proxy, "config": config, "home": workdir}
    try:
        assert proxy.stop() == 0, proxy.log_tail()
        assert broker.stop() == 0, broker.log_tail()
    finally:
        namesrv.stop()


def run_client(cluster, script: str, spec: dict, timeout_s: float = 90) -> list[dict]:
    """Run an official-client script against the proxy; its JSON lines."""
    out = subprocess.run(
        [sys.executable, str(HERE / script), json.dumps({"endpoint": cluster["proxy"].grpc, **spec})],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "HOME": str(cluster["home"])},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def test_send_receive_ack_and_redelivery(cluster):
    sent = run_client(cluster, "grpc_official_client.py", {"topic": "px_normal", "count": 40, "prefix": "n"})
    assert [e["ok"] for e in sent] == [True] * 40
    result = run_client(
        cluster,
        "pop_official_client.py",
        {
            "topic": "px_normal",
            "group": "px_pop_group",
            "count": 40,
            "invisible_s": 6,
            "postpone_s": 12,
            "deadline_s": 60,
        },
    )[-1]
    assert result["first"] == 40 and result["first_attempts"] == [1]
    assert sorted(result["again"]) == sorted(result["dropped"])  # what was not acked came back ...
    assert set(result["again"].values()) == {2}  # ... as a second attempt
    assert result["postponed_after_s"] >= 11.0  # changed to 12 s, not the first 6 s


def run_push_consumer(cluster, home: Path, spec: dict) -> dict:
    """A push consumer of the official client through the proxy until it consumed ``spec["expect"]``; what it
    reports (push_official_client.py). It must shut down without a word on stderr or an error in its log."""
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "push_official_client.py"),
            json.dumps({"endpoint": cluster["proxy"].grpc, **spec}),
        ],
        env=client_env(home),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0 and out.stderr == "", out.stderr[-3000:]
    assert client_log_problems(home) == []
    return json.loads(out.stdout.splitlines()[-1])


def test_a_push_consumer_leaves_cleanly_and_its_open_receive_keeps_nothing(cluster, tmp_path):
    spec = {"topic": "px_leave", "group": "px_leave_group", "mode": "ok", "expect": 3, "deadline_s": 30}
    run_client(cluster, "grpc_official_client.py", {"topic": "px_leave", "count": 3, "prefix": "a"})
    assert sorted(run_push_consumer(cluster, tmp_path / "first", spec)["consumed"]) == ["a-0", "a-1", "a-2"]
    # The proxy's POP for the first consumer may still wait at the broker, which gives it the next messages;
    # the proxy hands them back at once, so the next consumer gets them well before their 60 s invisible time.
    run_client(cluster, "grpc_official_client.py", {"topic": "px_leave", "count": 3, "prefix": "b"})
    assert sorted(run_push_consumer(cluster, tmp_path / "second", spec)["consumed"]) == ["b-0", "b-1", "b-2"]


def test_a_push_consumer_s_message_stays_invisible_while_its_listener_works(cluster, tmp_path):
    run_client(cluster, "grpc_official_client.py", {"topic": "px_slow", "count": 2, "prefix": "s"})
    work_s = 2.5 * AUTO_RENEW_INVISIBLE_MS / 1000  # outlasts the invisible time twice over
    spec = {"topic": "px_slow", "group": "px_slow_group", "mode": "ok", "expect": 2, "work_s": work_s}
    report = run_push_consumer(cluster, tmp_path / "slow", {**spec, "deadline_s": 60})
    # renewed while the listener worked: each message was delivered once, none a second time
    assert sorted(report["calls"]) == [["s-0", 1, ""], ["s-1", 1, ""]]


def test_fifo_groups_are_received_in_send_order(cluster):
    sent = run_client(cluster, "grpc_official_client.py", {"topic": "px_fifo", "count": 30, "prefix": "f", "groups": 3})
    assert all(e["ok"] for e in sent)
    result = run_client(
        cluster,
        "receive_official_client.py",
        {"topic": "px_fifo", "group": "px_fifo_group", "count": 30, "deadline_s": 60},
    )[-1]
    assert len(result["bodies"]) == 30
    order = [int(body.rsplit("-", 1)[1]) for _, body, _ in result["received"]]
    for group in range(3):
        of_group = [i for i in order if i % 3 == group]
        assert of_group == sorted(of_group) == list(range(group, 30, 3))


def test_delay_message_is_received_once_due(cluster):
    sent = run_client(
        cluster, "grpc_official_client.py", {"topic": "px_delay", "count": 3, "prefix": "d", "delay_s": 2}
    )
    assert all(e["ok"] for e in sent)
    due_s = {f"d-{e['i']}": e["due_ms"] / 1000 for e in sent}  # whole seconds: the sends may straddle one
    result = run_client(
        cluster,
        "receive_official_client.py",
        {"topic": "px_delay", "group": "px_delay_group", "count": 3, "deadline_s": 60},
    )[-1]
    assert result["bodies"] == ["d-0", "d-1", "d-2"]
    for seconds, body, _ in result["received"]:
        # when the client had it (rounded to 10 ms), so never before the broker made it visible
        assert result["started_at"] + seconds >= due_s[body] - 0.02, (body, seconds, result["started_at"])
    # the broker stored each as a timer and made it visible at its delivery time, not when it was sent
    stored_ms = {}
    with PullConsumer("px-delay-reader", cluster["config"]) as reader:
        for queue in reader.fetch_queues("px_delay"):
            stored_ms.update((m.body.decode(), m.store_timestamp_ms) for m in reader.pull(queue, 0, 64).messages)
    assert sorted(stored_ms) == sorted(due_s)
    assert all(due_s[body] * 1000 <= ms <= due_s[body] * 1000 + 1000 for body, ms in stored_ms.items()), stored_ms


def test_transactions_commit_rollback_and_a_relayed_check(cluster):
    events = run_client(
        cluster,
        "transaction_official_client.py",
        {
            "topic": "px_tx",
            "sends": [
                {"body": "p-commit", "end": "commit"},
                {"body": "p-rollback", "end": "rollback"},
                {"body": "p-open", "end": "none"},
            ],
            "answers": {"p-open": "COMMIT"},
            "until_answered": ["p-open"],
        },
    )
    checked = [(e["checked"], e["answer"]) for e in events if "checked" in e]
    assert ("p-open", "COMMIT") in checked
    assert not {b for b, _ in checked} & {"p-commit", "p-rollback"}
    wait_until(
        lambda: bodies(cluster["config"], "px_tx") == Counter({"p-commit": 1, "p-open": 1}),
        message="the commit and the checked commit visible once each, the rollback never",
    )


def test_both_workers_serve_connections(cluster):
    proxy = cluster["proxy"]
    workers = set(re.findall(r"event=proxy_worker_listening pid=(\d+)", proxy.log_path.read_text()))
    assert len(workers) == 2

    def serving_pids() -> set[str]:
        return set(re.findall(r"pid=(\d+) \S+ event=grpc_client_registered", proxy.log_path.read_text())) & workers

    # Each channel is a new connection (no shared subchannel), which the kernel hashes to one worker; a few
    # dozen make both serve with certainty for all practical purposes (2 ** -39 for 40 connections).
    for i in range(40):
        with grpc.insecure_channel(proxy.grpc, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            reply = MessagingServiceStub(channel).Heartbeat(
                spb.HeartbeatRequest(client_type=pb.PRODUCER),
                metadata=[("x-mq-client-id", f"px-probe-{i}")],
                timeout=10,
            )
            assert reply.status.code == pb.OK
        if i >= 1 and len(serving_pids()) == 2:
            break
    wait_until(lambda: serving_pids() == workers, message="both workers registered clients")
