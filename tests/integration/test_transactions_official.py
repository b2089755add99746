"""Transactional messages with the unmodified official RocketMQ 5 Python client (gRPC), against a real broker
with fast checks (first at 300 ms, then every 500 ms). Each client runs in its own process
(``transaction_official_client.py``); what reached consumers is read with the SDK's pull consumer.

- commit: delivered once; rollback: never;
- an open transaction (no commit or rollback): the broker's recovery command reaches the client's checker on
  its Telemetry stream, and its EndTransaction (SOURCE_SERVER_CHECK) commits it;
- a checker that raises: nothing is sent back, the next check asks again and its COMMIT holds;
- a producer killed before ending: a second producer of the topic (started after) gets the check and commits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from tests.integration.transaction_support import bodies

from pocketmq.client import Admin, ClientConfig, MessageType
from pocketmq.testing.processes import broker_process, wait_until

FAST_CHECKS = ["--set", "transaction_timeout_ms=300", "--set", "transaction_check_interval_ms=500"]
CLIENT = Path(__file__).with_name("transaction_official_client.py")
TOPIC = "tx_official"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("tx-official"), "broker-txo", extra_args=FAST_CHECKS).start()
    with Admin(ClientConfig(namesrv_addr=proc.namesrv)) as admin:
        admin.create_topic(TOPIC, queues=2, message_type=MessageType.TRANSACTION)
    yield proc
    assert proc.stop() == 0, proc.log_tail()


class OfficialClient:
    """One official client process; its JSON lines are read as they come."""

    def __init__(self, broker, spec: dict):
        self.proc = subprocess.Popen(
            [sys.executable, str(CLIENT), json.dumps({"endpoint": broker.grpc, "topic": TOPIC, **spec})],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=broker.env,
        )
        self.events: list[dict] = []

    def next_event(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, f"the official client ended early (exit {self.proc.poll()})"
        self.events.append(json.loads(line))
        return self.events[-1]

    def wait_for(self, predicate, timeout_s: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            event = self.next_event()
            if predicate(event):
                return event
        raise AssertionError(f"no such event within {timeout_s}s: {self.events}")

    def finish(self, timeout_s: float = 60.0) -> list[dict]:
        out, _ = self.proc.communicate(timeout=timeout_s)
        self.events += [json.loads(line) for line in out.splitlines() if line.strip()]
        assert self.proc.returncode == 0, self.events
        return self.events

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def test_commit_rollback_and_an_open_transaction_resolved_by_the_check(broker):
    client = OfficialClient(
        broker,
        {
            "sends": [
                {"body": "o-commit", "end": "commit"},
                {"body": "o-rollback", "end": "rollback"},
                {"body": "o-open", "end": "none"},
                {"body": "o-flaky", "end": "none"},
            ],
            "answers": {"o-open": "COMMIT", "o-flaky": "RAISE_ONCE"},
            "until_answered": ["o-open", "o-flaky"],
        },
    )
    events = client.finish()
    sent = {e["sent"]: e for e in events if "sent" in e}
    assert all(e["transaction_id"] == e["message_id"] for e in sent.values())
    checked = [(e["checked"], e["answer"]) for e in events if "checked" in e]
    assert ("o-open", "COMMIT") in checked
    assert [a for b, a in checked if b == "o-flaky"][:2] == ["RAISE", "COMMIT"]
    # A transaction the client ends later than transaction_timeout_ms after its send (a slow machine) may be checked
    # too: the checker then answers ROLLBACK for the committed one and the broker, which has it ended, changes
    # nothing. What counts is what becomes visible:
    wait_until(
        lambda: (
            bodies(ClientConfig(namesrv_addr=broker.namesrv), TOPIC)
            == Counter({"o-commit": 1, "o-open": 1, "o-flaky": 1})
        ),
        message="commit, checked commit and the commit after a raising check visible once each",
    )
    assert Counter(b for b, a in checked if a == "COMMIT") == Counter({"o-open": 1, "o-flaky": 1})


def test_a_killed_producer_s_transaction_is_committed_by_another_producer_of_the_topic(broker):
    first = OfficialClient(broker, {"sends": [{"body": "o-orphan", "end": "none"}], "hang": True})
    try:
        first.wait_for(lambda e: e.get("ended") == "o-orphan")
    finally:
        first.kill()
    second = OfficialClient(broker, {"answers": {"o-orphan": "COMMIT"}, "hang": True})  # killed below
    try:
        second.wait_for(lambda e: e.get("checked") == "o-orphan", timeout_s=30)
        wait_until(
            lambda: bodies(ClientConfig(namesrv_addr=broker.namesrv), TOPIC)["o-orphan"] == 1,
            message="the orphan committed by the second producer",
        )
    finally:
        second.kill()
    assert bodies(ClientConfig(namesrv_addr=broker.namesrv), TOPIC)["o-orphan"] == 1
