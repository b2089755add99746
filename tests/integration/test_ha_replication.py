"""Master/slave replication with real processes: a name server, a SYNC master and its slave.

One scenario in phases (each needs the previous one's state): SYNC sends are acknowledged once the slave has
them and are readable on it; the slave refuses sends; kill -9 of the slave turns SYNC sends into slave
statuses; a restarted slave catches up; kill -9 of the master leaves the slave in the route, and the SDK's
pull consumer reads every message that was sent OK through it. A second scenario starts a slave whose data
directory holds another master's log: the master refuses it and the slave says its directory must be cleared.
"""

from __future__ import annotations

import json

import pytest
from tests.integration.remoting_calls import send as send_to

from pocketmq.client.config import ClientConfig
from pocketmq.client.pull_consumer import AsyncPullConsumer
from pocketmq.common.message import MessageExt
from pocketmq.common.record import decode_records
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.transport import RemotingClient
from pocketmq.store.api import StoreConfig
from pocketmq.store.message_store import MessageStore
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import broker_process, namesrv_process

TOPIC = "ha-orders"
GROUP = "ha-readers"
pytestmark = pytest.mark.slow


async def send(client: RemotingClient, addr: str, body: bytes) -> RemotingCommand:
    return await send_to(client, addr, TOPIC, body, timeout_s=10.0)


async def pull_bodies(client: RemotingClient, addr: str) -> list[bytes]:
    reply = await client.invoke(
        addr,
        RemotingCommand.request(
            RequestCode.PULL_MESSAGE,
            {
                "consumerGroup": GROUP,
                "topic": TOPIC,
                "queueId": 0,
                "queueOffset": 0,
                "maxMsgNums": 256,
                "sysFlag": 4,
                "commitOffset": 0,
                "suspendTimeoutMillis": 0,
                "subscription": "*",
                "subVersion": 0,
            },
        ),
        5.0,
    )
    return [m.body for m in decode_records(reply.body)] if reply.code == ResponseCode.SUCCESS else []


def broker(tmp_path, namesrv: str, name: str, broker_id: int, role: str):
    return broker_process(
        tmp_path / name,
        name,
        namesrv=namesrv,
        extra_args=[
            "--cluster",
            "ha",
            "--broker-name",
            "group-a",
            "--broker-id",
            str(broker_id),
            "--role",
            role,
            "--register-interval-ms",
            "500",
            "--set",
            "ha_slave_ack_timeout_ms=1000",
            "--set",
            "ha_metadata_sync_interval_ms=300",
            "--set",
            "ha_master_lookup_interval_ms=200",
        ],
    )


async def test_sync_replication_and_failover_to_the_slave(tmp_path):
    config = tmp_path / "namesrv.toml"
    config.write_text("[namesrv]\nbroker_expire_ms = 3000\nscan_interval_ms = 300\n")
    namesrv = namesrv_process(tmp_path / "ns", extra_args=["--config", str(config)]).start()
    master = broker(tmp_path, namesrv.namesrv, "master", 0, "sync_master").start()
    slave = broker(tmp_path, namesrv.namesrv, "slave", 1, "slave").start()
    client = RemotingClient()
    try:
        # 1. Once the slave follows, SYNC sends are OK and the slave serves them.
        await eventually(
            lambda: _sent_ok(client, master.remoting, b"probe"), 15, "a SYNC send acknowledged by the slave"
        )
        sent_ok = [b"probe"]
        for i in range(20):
            reply = await send(client, master.remoting, b"m%d" % i)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            sent_ok.append(b"m%d" % i)
        assert await eventually(lambda: _has_all(client, slave.remoting, sent_ok), 10, "slave has every message")
        refused = await send(client, slave.remoting, b"to-the-slave")
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in refused.remark

        # 2. Without its slave a SYNC master answers with the slave statuses (the record is still stored).
        slave.kill()
        lonely = await send(client, master.remoting, b"lonely")
        assert lonely.code in (ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE)

        # 3. A restarted slave catches up from where its log ends.
        slave.restart()
        await eventually(lambda: _sent_ok(client, master.remoting, b"back"), 15, "SYNC sends OK again")
        sent_ok.append(b"back")
        assert await eventually(lambda: _has_all(client, slave.remoting, sent_ok + [b"lonely"]), 10, "slave caught up")

        # 4. kill -9 the master: the route keeps the slave, and the SDK reads everything through it.
        master.kill()
        route = await eventually(lambda: _route_brokers(client, namesrv.namesrv), 10, "route without the master")
        assert route == {"1": slave.remoting}
        async with AsyncPullConsumer(GROUP, ClientConfig(namesrv_addr=namesrv.namesrv)) as consumer:
            queue = next(q for q in await consumer.fetch_queues(TOPIC) if q.queue_id == 0)
            result = await consumer.pull(queue, 0, 256)
            assert set(sent_ok) <= {m.body for m in result.messages}
    finally:
        await client.close()
        for proc in (slave, master, namesrv):
            proc.kill()


async def test_a_slave_holding_another_master_s_log_is_refused(tmp_path):
    # The slave's data directory holds one record written by another master: a log shorter than this master's,
    # so lengths alone would let it follow (and count its offset as an ack of records it does not have).
    other = MessageStore(StoreConfig(data_dir=tmp_path / "slave" / "data"))
    other.start()
    await other.put_message(MessageExt(topic=TOPIC, body=b"from another master", queue_id=0))
    await other.shutdown()
    namesrv = namesrv_process(tmp_path / "ns").start()
    master = broker(tmp_path, namesrv.namesrv, "master", 0, "sync_master").start()
    slave = None
    client = RemotingClient()
    try:
        for i in range(3):  # no slave yet: stored on the master, answered SLAVE_NOT_AVAILABLE
            assert (
                await send(client, master.remoting, b"m%d" % i + bytes(200))
            ).code == ResponseCode.SLAVE_NOT_AVAILABLE
        slave = broker(tmp_path, namesrv.namesrv, "slave", 1, "slave").start()
        await eventually(lambda: _logged(slave, "event=ha_replica_diverged"), 15, "the slave logging its divergence")
        slave_log = slave.log_path.read_text()
        assert "clear its data directory" in slave_log and str(tmp_path / "slave" / "data") in slave_log
        assert "ILLEGAL_OPERATION" in slave_log and "diverged" in slave_log
        assert await _logged(master, "event=slave_refused")
        lonely = await send(client, master.remoting, b"after")
        assert lonely.code == ResponseCode.SLAVE_NOT_AVAILABLE  # the refused slave acknowledges nothing
        assert await eventually(
            lambda: _bodies_are(client, slave.remoting, [b"from another master"]),
            10,
            "the slave's own record, untouched",
        )
    finally:
        await client.close()
        for proc in (slave, master, namesrv):
            if proc is not None:
                proc.kill()


async def _logged(proc, text: str) -> bool:
    return text in proc.log_path.read_text()


async def _bodies_are(client: RemotingClient, addr: str, bodies: list[bytes]) -> bool:
    return await pull_bodies(client, addr) == bodies


async def _sent_ok(client: RemotingClient, addr: str, body: bytes) -> bool:
    return (await send(client, addr, body)).code == ResponseCode.SUCCESS


async def _has_all(client: RemotingClient, addr: str, bodies: list[bytes]) -> bool:
    return set(bodies) <= set(await pull_bodies(client, addr))


async def _route_brokers(client: RemotingClient, namesrv: str) -> dict | None:
    reply = await client.invoke(
        namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 3.0
    )
    brokers = json.loads(reply.body)["brokerDatas"][0]["brokerAddrs"] if reply.code == 0 else None
    return brokers if brokers and "0" not in brokers else None
