"""A corrupt record on a SYNC master's commit log does not stop replication, real processes (docs/ha.md,
"Corrupt records on the master"): the slave is away while the master stores 30 messages, one of them is
corrupted in the master's commit log file, and the slave comes back. It gets a hole of the record's length
for it, catches up past it, SYNC sends answer SUCCESS again, every valid message is readable on the slave and
after ``kill -9`` of the master, the corrupt one never, both sides count it, and ``pocketmq store verify``
accepts the slave's store with the hole listed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from tests.integration.remoting_calls import queue_messages
from tests.integration.test_ha_acting_master import send
from tests.integration.test_ha_failover_acks import _all_readable

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.config import ClientConfig
from pocketmq.common.record import decode_record
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.store.commit_log import FRAME_HEADER, FRAME_HEADER_SIZE
from pocketmq.testing.ha_cluster import GROUP_A, fast_namesrv, ha_broker
from pocketmq.testing.polling import eventually
from pocketmq.testing.scrape import metric

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]
TOPIC = "holes"
STORED_NOT_REPLICATED = (ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT)
METRICS = ("--metrics-port", "0")


async def test_a_corrupt_master_record_reaches_the_slave_as_a_hole_and_sync_sends_succeed_again(tmp_path):
    namesrv = fast_namesrv(tmp_path)
    master = ha_broker(tmp_path, namesrv.namesrv, "a0", GROUP_A, 0, "sync_master", *METRICS).start()
    slave = ha_broker(tmp_path, namesrv.namesrv, "a1", GROUP_A, 1, "slave", *METRICS).start()
    client = RemotingClient()
    stored: list[str] = []  # every body the master stored, in queue order

    async def sync_send(body: str) -> bool:
        reply = await send(client, master.remoting, TOPIC, body.encode())
        assert reply.code == ResponseCode.SUCCESS or reply.code in STORED_NOT_REPLICATED, (reply.code, reply.remark)
        stored.append(body)
        return reply.code == ResponseCode.SUCCESS

    try:
        async with AsyncAdmin(ClientConfig(namesrv_addr=namesrv.namesrv)) as admin:
            await admin.create_topic(TOPIC, queues=1)
        await eventually(lambda: sync_send(f"before-{len(stored)}"), 15, "a SYNC send acknowledged by the slave")
        slave.kill()
        away = [f"away-{i:02d}-" * 20 for i in range(30)]
        for body in away:
            assert not await sync_send(body)  # stored on the master only
        victim = away[12]
        victim_at = _corrupt_body(tmp_path / "a0" / "data" / "commitlog" / "00000000000000000000", victim)

        slave.restart()
        await eventually(lambda: sync_send(f"back-{len(stored)}"), 20, "a SYNC send acknowledged again")
        for i in range(10):
            assert await sync_send(f"after-{i}")  # at once: replication goes on past the hole
        valid = [body for body in stored if body != victim]

        assert [m.body.decode() for m in await queue_messages(client, slave.remoting, TOPIC)] == valid
        corrupt_total = "pocketmq_store_corrupt_records_total"
        assert metric(master, corrupt_total, found_by="replication_source") == 1
        assert metric(slave, corrupt_total, found_by="replication") == 1
        assert f"phys_offset={victim_at} reason=hole_from_master" in slave.log_tail(400)

        master.kill()  # failover: the slave serves the group, without the lost record
        await eventually(lambda: _all_readable(namesrv.namesrv, TOPIC, valid), 20, "valid messages through the route")
        assert slave.stop() == 0, slave.log_tail()
        verified = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "pocketmq.cli.main", "store", "verify", "--data-dir", str(tmp_path / "a1" / "data")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        victim_offset = stored.index(victim)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert f"hole phys_offset={victim_at} " in verified.stdout and f"records={TOPIC}/0@{victim_offset}" in (
            verified.stdout
        )
        assert "1 hole(s)" in verified.stdout
    finally:
        await client.close()
        for proc in (slave, master, namesrv):
            proc.kill()


def _corrupt_body(segment_path, body: str) -> int:
    """Flip one byte of ``body``'s only copy in the commit log segment file; returns the phys offset of its
    record's frame."""
    data = segment_path.read_bytes()
    at = data.find(body.encode())
    assert at > 0 and data.find(body.encode(), at + 1) < 0
    with open(segment_path, "r+b") as f:
        f.seek(at + 10)
        f.write(bytes([data[at + 10] ^ 0x5A]))
    return _frame_start(data, at)


def _frame_start(data: bytes, body_at: int) -> int:
    pos = 0
    while True:
        size, _crc = FRAME_HEADER.unpack_from(data, pos)
        if size > 0 and pos < body_at < pos + size:
            assert decode_record(data[pos + FRAME_HEADER_SIZE : pos + size])[0].body.startswith(b"away")
            return pos
        pos += abs(size)
