"""POP with the unmodified official RocketMQ 5 Python client (gRPC) against ``pocketmq serve``.

A SimpleConsumer receives 96 messages, acks half and drops the rest: every dropped one comes back with
delivery attempt 2, and the one whose invisible duration was changed comes back only after the new duration.
(The 1,000-message variant runs with the SDK's SimpleConsumer in test_pop_sdk.py: the official client needs
~10 ms per ack round trip, which would make this test long.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer
from pocketmq.testing.processes import broker_process

SCRIPT = Path(__file__).with_name("pop_official_client.py")


@pytest.mark.slow
def test_official_simple_consumer_acks_half_and_changes_invisible_duration(tmp_path):
    proc = broker_process(tmp_path, "broker-pop-grpc", extra_args=["--set", "pop_revive_interval_ms=100"]).start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        with Admin(config) as admin:
            admin.create_topic("pop_official", queues=2)
        with Producer(config) as producer:
            producer.send_batch([Message.create("pop_official", str(i)) for i in range(96)])
        spec = {
            "endpoint": proc.grpc,
            "topic": "pop_official",
            "group": "pop_official_group",
            "count": 96,
            # the first round and its acks must end within the invisible time, also on a loaded machine
            "invisible_s": 6,
            "postpone_s": 12,
            "deadline_s": 60,
        }
        home = tmp_path / "home"
        home.mkdir()
        out = subprocess.run(
            [sys.executable, str(SCRIPT), json.dumps(spec)],
            capture_output=True,
            text=True,
            check=False,
            timeout=90,
            env={**os.environ, "HOME": str(home)},
        )
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["first"] == 96 and result["first_attempts"] == [1]
        assert sorted(result["again"], key=int) == result["dropped"]
        assert set(result["again"].values()) == {2}
        assert result["postponed_after_s"] >= 11.0  # changed to 12 s, not the first 6 s
    finally:
        assert proc.stop() == 0, proc.log_tail()
