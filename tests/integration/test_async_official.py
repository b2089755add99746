"""The official RocketMQ 5 Python client's asynchronous producer and simple consumer (``send_async``,
``receive_async``, ``ack_async``, ``change_invisible_duration_async``), unmodified, against ``pocketmq serve``
(``async_official_client.py``): every message sent once is received and acked; the one whose invisible time
was changed to 2 s comes back once; in the end nothing is left in flight."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.grpc_support import client_env

from pocketmq.client import Admin, ClientConfig
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process


def in_flight(admin: Admin, group: str) -> int:
    return sum(
        entry.get("popInFlight", 0) for stats in admin.consume_stats(group).values() for entry in stats["offsetTable"]
    )


SCRIPT = Path(__file__).with_name("async_official_client.py")
COUNT = 40

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_async_send_receive_change_and_ack(tmp_path):
    broker = broker_process(tmp_path / "broker", "broker-async").start()
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv)
        with Admin(config) as admin:
            admin.create_topic("async_official", queues=4)
        spec = {"endpoint": broker.grpc, "topic": "async_official", "group": "async_group", "count": COUNT}
        out = subprocess.run(
            [sys.executable, str(SCRIPT), json.dumps({**spec, "deadline_s": 30})],
            env=client_env(tmp_path / "home"),
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert len(set(result["sent"])) == COUNT
        deliveries = result["deliveries"]
        changed = deliveries[0]
        assert deliveries.count(changed) == 2 and len(deliveries) == COUNT + 1  # the changed one came back once
        assert sorted(body for _, body in deliveries[1:]) == sorted(f"async-{i}" for i in range(COUNT))
        assert {message_id for message_id, _ in deliveries} == set(result["sent"])
        # every ack landed (ack_async gives the caller nothing to wait on): nothing is left in flight
        with Admin(config) as admin:
            wait_until(lambda: in_flight(admin, "async_group") == 0, message="every async ack stored")
    finally:
        assert broker.stop() == 0, broker.log_tail()
