"""Failover through the gRPC proxy: with group A's master killed, the official client keeps reading A's messages
through the proxy, which pops A's acting slave (docs/ha.md, "Failover reads"; docs/grpc.md, "Proxy").

Real processes: a name server that forgets a dead broker in 2 s, group A = SYNC master + slave (acting master),
group B = a master (pocketmq.testing.ha_cluster), ``pocketmq proxy --workers 1``, and the official Python
client's producer and SimpleConsumer in their own processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.test_ha_acting_master import acting

from pocketmq.client import AsyncAdmin, ClientConfig
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import GROUP_A, start_two_groups
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import proxy_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

HERE = Path(__file__).parent
TOPIC = "px-failover"


def official(script: str, spec: dict, home: Path) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / script), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


async def test_a_group_without_its_master_is_read_through_its_slave(tmp_path):
    groups = start_two_groups(tmp_path)
    proxy = None
    try:
        await groups.ready([TOPIC])
        proxy = proxy_process(tmp_path / "proxy", groups.ns, workers=1).start(timeout_s=90)
        sent = official(
            "grpc_official_client.py", {"endpoint": proxy.grpc, "topic": TOPIC, "count": 8, "prefix": "f"}, tmp_path
        )
        assert all(e["ok"] for e in sent)

        groups.a_master.kill()

        async def a_without_master() -> bool:
            async with AsyncAdmin(ClientConfig(namesrv_addr=groups.ns)) as admin:
                brokers = await admin.brokers(GROUP_A)
            return bool(brokers) and all(b.broker_id != 0 for b in brokers)

        await eventually(a_without_master, 20, "the name server lists only A's slave")
        client = RemotingClient()
        try:
            await eventually(lambda: acting(client, groups.a_slave.remoting, "true"), 15, "A's slave acting")
        finally:
            await client.close()
        result = official(
            "receive_official_client.py",
            {"endpoint": proxy.grpc, "topic": TOPIC, "group": "px-failover-group", "count": 8, "deadline_s": 60},
            tmp_path,
        )[-1]
        assert result["bodies"] == sorted(f"f-{i}" for i in range(8))  # A's half through its slave
    finally:
        if proxy is not None:
            proxy.stop()
        groups.kill_all()
