"""Namespaces through real ``pocketmq serve`` processes: two namespaces use the same topic and group names and
stay apart, on gRPC (the unmodified official Python client's ``namespace``) and on remoting (the names RocketMQ
4.x/5.x clients send for a namespace, ``ns%name``, here through the SDK); both protocols meet in a namespace's
topics, and a recall handle of a namespaced topic works in its namespace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from grpc_support import client_env, official_client_command, read_topic
from test_recall_official import run_recall_client

from pocketmq.client import Admin, ClientConfig, Message, Producer
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


def run_script(script: str, spec: dict, home: Path) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / script), json.dumps(spec)],
        env=client_env(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def bodies(namesrv: str, topic: str) -> list[str]:
    return sorted(m.body.decode() for messages in read_topic(namesrv, topic).values() for m in messages)


@pytest.mark.timeout(120)
def test_two_namespaces_with_the_same_topic_and_group_stay_apart_on_both_protocols(tmp_path):
    broker = broker_process(tmp_path / "b").start()
    try:
        producers = [
            subprocess.Popen(
                official_client_command(
                    {"endpoint": broker.grpc, "topic": "orders", "count": 3, "prefix": ns, "namespace": ns}
                ),
                env=client_env(tmp_path / f"producer-{ns}"),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for ns in ("ns1", "ns2")
        ]
        for proc in producers:
            _, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 0, stderr[-3000:]
        with Producer(ClientConfig(namesrv_addr=broker.namesrv)) as producer:  # a 4.x client of namespace ns2
            producer.send(Message.create("ns2%orders", "remoting-ns2"))

        assert bodies(broker.namesrv, "ns1%orders") == ["ns1-0", "ns1-1", "ns1-2"]
        assert bodies(broker.namesrv, "ns2%orders") == ["ns2-0", "ns2-1", "ns2-2", "remoting-ns2"]

        common = {"endpoint": broker.grpc, "topic": "orders", "group": "g", "deadline_s": 30}
        pushed = run_script(
            "push_official_client.py", {**common, "namespace": "ns1", "expect": 3, "mode": "ok"}, tmp_path / "push"
        )
        assert sorted(pushed["consumed"]) == ["ns1-0", "ns1-1", "ns1-2"]
        received = run_script(
            "receive_official_client.py", {**common, "namespace": "ns2", "count": 4, "linger_s": 1}, tmp_path / "rcv"
        )
        assert received["bodies"] == ["ns2-0", "ns2-1", "ns2-2", "remoting-ns2"]

        # The broker holds each namespace's topic and group under the name a 4.x client of the namespace uses.
        with Admin(ClientConfig(namesrv_addr=broker.namesrv)) as admin:
            topics, groups = set(admin.list_topics()), set(admin.list_groups())
        assert {"ns1%orders", "ns2%orders"} <= topics and "orders" not in topics
        assert {"ns1%g", "ns2%g"} <= groups and "g" not in groups

        spec = {
            "endpoint": broker.grpc,
            "topic": "orders",
            "namespace": "ns1",
            "count": 1,
            "delay_s": 30,
            "recall": [0],
        }
        sends, recalls = run_recall_client(spec, tmp_path / "recall")
        assert recalls == [{"recall": 0, "ok": True, "message_id": sends[0]["message_id"]}]
        spec = {"endpoint": broker.grpc, "topic": "orders", "namespace": "ns2", "handles": [sends[0]["recall_handle"]]}
        _, recalls = run_recall_client(spec, tmp_path / "recall-other")
        assert recalls[0]["ok"] is False and "topic" in recalls[0]["error"]  # a handle is its namespace's only
    finally:
        broker.stop()
