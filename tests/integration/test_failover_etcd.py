"""``pocketmq serve --controller etcd://...``, real processes and a real etcd (docs/failover.md): a group of two
brokers elects its master; ``kill -9`` of the master under SYNC sends, and the in-sync slave takes over and
takes sends, holding every acknowledged message; the old master comes back as its slave."""

from __future__ import annotations

import json
import time

import aetcd
import pytest
from tests.integration.remoting_calls import queue_messages, send

from pocketmq.cluster.controller import parse_endpoint
from pocketmq.common.errors import PocketMQError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.etcd import etcd_server
from pocketmq.testing.ha_cluster import CLUSTER, COMMON_ARGS, fast_namesrv
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import PocketProcess, broker_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
etcd = pytest.fixture(etcd_server)
TOPIC = "failover"
GROUP = "group-f"
STORED = (ResponseCode.SUCCESS, ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT)


def controlled_broker(tmp_path, namesrv: str, endpoint: str, broker_id: int) -> PocketProcess:
    return broker_process(
        tmp_path / f"b{broker_id}",
        GROUP,
        namesrv=namesrv,
        extra_args=[*COMMON_ARGS, "--broker-id", str(broker_id), "--role", "sync_master", "--controller", endpoint],
    )


async def in_sync_ids(etcd) -> bool:
    host, port = parse_endpoint(etcd.endpoint)
    async with aetcd.Client(host=host, port=port) as client:
        found = await client.get(f"/pocketmq/{CLUSTER}/{GROUP}/in_sync".encode())
    return found is not None and json.loads(found.value)["brokerIds"] == [0, 1]


async def reply_code(client: RemotingClient, addr: str, body: str) -> int | None:
    try:
        return (await send(client, addr, TOPIC, body.encode(), timeout_s=3.0)).code
    except (PocketMQError, OSError):
        return None


async def test_the_in_sync_slave_takes_over_after_kill_9_with_every_acked_message(tmp_path, etcd):
    namesrv = fast_namesrv(tmp_path)
    brokers = [controlled_broker(tmp_path, namesrv.namesrv, etcd.endpoint, i) for i in (0, 1)]
    client = RemotingClient()
    try:
        for broker in brokers:
            broker.start()

        async def master_with_slave():
            for broker in brokers:
                if await reply_code(client, broker.remoting, "probe") == ResponseCode.SUCCESS:
                    return broker
            return None

        master = await eventually(master_with_slave, 30, "a master with its slave in sync")
        slave = brokers[1 - brokers.index(master)]
        # only a slave the controller knows as in sync may take over (docs/failover.md): wait until it is
        await eventually(lambda: in_sync_ids(etcd), 15, "the in-sync set with both brokers")
        acked = []
        for i in range(100):
            if await reply_code(client, master.remoting, f"m{i:03d}") == ResponseCode.SUCCESS:
                acked.append(f"m{i:03d}")
        assert len(acked) == 100
        master.kill()
        killed_at = time.monotonic()

        async def takes_sends():
            return await reply_code(client, slave.remoting, "after") in STORED

        await eventually(takes_sends, 15, "the slave takes sends as the new master")
        failover_s = time.monotonic() - killed_at
        assert failover_s < 8.0, f"failover took {failover_s:.1f}s"
        bodies = [m.body.decode() for m in await queue_messages(client, slave.remoting, TOPIC)]
        assert set(acked) <= set(bodies)

        # the old master comes back: it follows the new master, whose SYNC sends it acknowledges again
        master.start()

        async def replicated_again():
            return await reply_code(client, slave.remoting, "back") == ResponseCode.SUCCESS

        await eventually(replicated_again, 30, "the old master follows the new one")
        follower = [m.body.decode() for m in await queue_messages(client, master.remoting, TOPIC)]
        assert set(acked) | {"back"} <= set(follower)
        print(f"failover (kill -9 to the first stored send on the new master): {failover_s:.2f}s")
    finally:
        await client.close()
        for broker in brokers:
            broker.kill()
        namesrv.kill()
