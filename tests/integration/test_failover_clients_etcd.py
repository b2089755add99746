"""Clients across an automatic failover (``serve --controller``, docs/failover.md): an SDK producer (remoting,
routes from the name server) and the unmodified official RocketMQ 5 client (gRPC, through ``pocketmq proxy``, as
RocketMQ 5 clients reach a cluster) keep sending while the master is killed: after their usual retries the new
master acknowledges their sends, and every send that was acknowledged, before or after, is stored there."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from grpc_support import client_env, read_topic

from pocketmq.client import ClientConfig, Message, Producer
from pocketmq.common.errors import PocketMQError
from pocketmq.testing.controlled_group import TOPIC, running_group
from pocketmq.testing.etcd import etcd_server
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import proxy_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
etcd = pytest.fixture(etcd_server)
OFFICIAL_CLIENT = Path(__file__).with_name("grpc_official_client.py")


@pytest.fixture
async def group(tmp_path, etcd):
    """Three brokers: the new master still has an in-sync slave, so its SYNC sends are acknowledged in full (a
    SYNC master alone stores them and answers SLAVE_NOT_AVAILABLE, which the official client takes for a failure)."""
    async with running_group(tmp_path, etcd.endpoint, size=3) as group:
        yield group


class OfficialSender:
    """The official client sending ``count`` messages, paced, in its own process; its outcomes as they come."""

    def __init__(self, endpoint: str, home: Path, count: int):
        spec = {"endpoint": endpoint, "topic": TOPIC, "count": count, "prefix": "o", "interval_s": 0.1}
        self.proc = subprocess.Popen(
            [sys.executable, str(OFFICIAL_CLIENT), json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=client_env(home),
        )
        self.outcomes: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.outcomes.append(json.loads(line))

    def acked(self) -> list[str]:
        return [f"o-{o['i']}" for o in list(self.outcomes) if o["ok"]]

    def wait(self, timeout_s: float) -> list[dict]:
        self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=5)
        return self.outcomes


def sdk_send(producer: Producer, body: str) -> bool:
    try:
        producer.send(Message.create(TOPIC, body.encode()))
        return True
    except PocketMQError:
        return False


async def test_sdk_and_official_clients_continue_after_a_failover(group, tmp_path):
    master = await group.master()
    proxy = proxy_process(tmp_path / "proxy", group.namesrv.namesrv, workers=1).start(timeout_s=90)
    try:
        official = OfficialSender(proxy.grpc, tmp_path / "official", count=100)
        with Producer(ClientConfig(namesrv_addr=group.namesrv.namesrv)) as producer:
            sdk_acked = [f"s-{i}" for i in range(5) if sdk_send(producer, f"s-{i}")]
            assert len(sdk_acked) == 5
            wait_until(lambda: len(official.acked()) >= 5, 60, "the official client's first acknowledged sends")
            master.kill()
            # each call is a send with the SDK's own retries; the first the new master acknowledges ends the wait
            attempt = iter(range(1000))

            def sdk_acks_again() -> bool:
                body = f"s-after-{next(attempt)}"
                if sdk_send(producer, body):
                    sdk_acked.append(body)
                    return True
                return False

            wait_until(sdk_acks_again, 30, "an SDK send acknowledged by the new master")
            sdk_acked += [f"s-late-{i}" for i in range(5) if sdk_send(producer, f"s-late-{i}")]
            assert sdk_acked[-5:] == [f"s-late-{i}" for i in range(5)]
        outcomes = official.wait(timeout_s=120)
        assert official.proc.returncode == 0, official.proc.stderr.read()[-3000:] if official.proc.stderr else ""
        # the official client went on: its last sends, well after the failover, were all acknowledged
        assert [o["ok"] for o in outcomes[-10:]] == [True] * 10, outcomes[-10:]
        stored = {m.body.decode() for messages in read_topic(group.namesrv.namesrv, TOPIC).values() for m in messages}
        assert set(sdk_acked) | set(official.acked()) <= stored
    finally:
        proxy.stop()
