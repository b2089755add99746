"""Lite topics on the remoting side: ``pocketmq topic create --type lite``, ``pocketmq send --lite-topic`` and the
SDK's ``Message.create(..., lite_topic=...)`` store messages under lite topics (property ``__LITE_TOPIC``, each
lite topic in one queue), which the official client's LiteSimpleConsumer then consumes over gRPC."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.integration.grpc_support import run_official_client

from pocketmq.broker.lite.index import lite_queue_id
from pocketmq.client import ClientConfig, Message, Producer
from pocketmq.testing.processes import broker_process, run_cli

SCRIPT = Path(__file__).with_name("lite_official_client.py")


def pocketmq(*args: str, namesrv: str) -> subprocess.CompletedProcess:
    return run_cli(*args, namesrv=namesrv)


@pytest.mark.timeout(120)
def test_cli_and_sdk_send_lite_messages_the_official_lite_consumer_receives(tmp_path):
    proc = broker_process(tmp_path, "broker-lite-cli").start()
    try:
        created = pocketmq("topic", "create", "lite_cli", "--queues", "4", "--type", "lite", namesrv=proc.namesrv)
        assert created.returncode == 0, created.stderr
        sent = pocketmq("send", "lite_cli", "--lite-topic", "cli-a", "--count", "3", "--json", namesrv=proc.namesrv)
        assert sent.returncode == 0, sent.stderr
        acks = [json.loads(line) for line in sent.stdout.splitlines()]
        assert {a["queue_id"] for a in acks} == {lite_queue_id("cli-a", 4)}
        refused = pocketmq("send", "lite_cli", namesrv=proc.namesrv)  # a LITE topic needs a lite topic
        assert refused.returncode == 1 and "lite topic" in refused.stderr
        with Producer(ClientConfig(namesrv_addr=proc.namesrv)) as producer:
            for i in range(3):
                producer.send(Message.create("lite_cli", f"cli-b-{i}", lite_topic="cli-b"))
        spec = {
            "endpoint": proc.grpc,
            "topic": "lite_cli",
            "group": "lite_cli_group",
            "consumer": "simple",
            "lites": ["cli-a", "cli-b"],
            "unsubscribed": "cli-x",
            "per_lite": 3,
            "deadline_s": 30,
            "send": False,
        }
        got = run_official_client(spec, tmp_path / "home", timeout_s=90, script=SCRIPT)[-1]["got"]
        firsts = {lite: [body for body, attempt in got[lite] if attempt == 1] for lite in got}
        assert firsts == {
            "cli-a": [f"hello from pocketmq-{i}" for i in range(3)],
            "cli-b": [f"cli-b-{i}" for i in range(3)],
        }
    finally:
        assert proc.stop() == 0, proc.log_tail()
