"""Client metrics with the unmodified official RocketMQ 5 Python client against ``pocketmq serve``: with no
collector configured, a producer and a push consumer run their whole life (settings, the settings rewrite a
second later, sends, consumption, shutdown) without one error in their logs or on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from grpc_support import client_env, client_log_problems, run_official_client

from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.slow
PUSH_CLIENT = Path(__file__).with_name("push_official_client.py")


@pytest.mark.timeout(90)
def test_producer_and_push_consumer_log_no_error_without_a_collector(tmp_path):
    broker = broker_process(tmp_path / "b").start()
    try:
        sent = run_official_client(
            {"endpoint": broker.grpc, "topic": "metrics_off", "count": 3, "prefix": "m"}, tmp_path / "producer"
        )
        assert [s["ok"] for s in sent] == [True] * 3
        spec = {"endpoint": broker.grpc, "topic": "metrics_off", "group": "metrics_g", "expect": 3, "mode": "ok"}
        out = subprocess.run(
            [sys.executable, str(PUSH_CLIENT), json.dumps({**spec, "deadline_s": 30})],
            env=client_env(tmp_path / "push"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and out.stderr == "", out.stderr[-3000:]
        assert sorted(json.loads(out.stdout.splitlines()[-1])["consumed"]) == ["m-0", "m-1", "m-2"]
        for home in ("producer", "push"):
            assert client_log_problems(tmp_path / home) == []
    finally:
        broker.stop()
