"""A FIFO POP ack that a SYNC master answered OK holds after ``kill -9`` of it at once (real processes;
docs/ha.md, "POP acks under SYNC replication").

Group A = SYNC master + slave, with the periodic metadata sync once a minute: the FIFO POP state (which a FIFO
ack changes, writing no record) reaches the slave in time only because the master answers the ack once the
slave reported a metadata version that holds it. FIFO messages of message groups a, b, c (four each) on A's
queue. The SDK's SimpleConsumer (its group consumes orderly) pops a0 b0 c0 from A's master, acks a0 and b0,
pops a1 b1 (c waits behind c0), acks a1; ``kill -9`` of A's master as soon as that ack returns. Through A's
acting slave every message not acked comes once, each message group in order (c0 and b1 after their invisible
time), and no acked one comes again.
"""

from __future__ import annotations

import time

import pytest
from tests.integration.test_ha_acting_master import ack, acting, pop, send
from tests.integration.test_ha_failover_acks import RARE_METADATA_SYNC

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.config import ClientConfig
from pocketmq.client.simple_consumer import AsyncSimpleConsumer
from pocketmq.common import properties as props
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import GROUP_A, start_two_groups
from pocketmq.testing.polling import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]
TOPIC = "failover-fifo"
FIFO_GROUP = "fifo-readers"
INVISIBLE_MS = 3000  # the master's pops: c0 and b1 come back on the acting slave that long after them
MESSAGE_GROUPS = "abc"
PER_GROUP = 4


async def test_acked_fifo_pops_never_come_back_after_kill_9_of_the_sync_master(tmp_path):
    groups = start_two_groups(tmp_path, a_flags=RARE_METADATA_SYNC)
    a0, a1 = groups.a_master, groups.a_slave
    client = RemotingClient()
    config = ClientConfig(namesrv_addr=groups.ns)
    try:
        await groups.ready([TOPIC])
        async with AsyncAdmin(config) as admin:
            await admin.create_group(FIFO_GROUP, consume_message_orderly=True)
        for i in range(PER_GROUP):
            for message_group in MESSAGE_GROUPS:
                sent = await send(
                    client, a0.remoting, TOPIC, f"{message_group}{i}".encode(), {props.SHARDING_KEY: message_group}
                )
                assert sent.code == ResponseCode.SUCCESS, sent.remark

        async with AsyncSimpleConsumer(FIFO_GROUP, {TOPIC: "*"}, config, await_duration_ms=0) as consumer:
            first = await _receive(consumer, 3)
            assert sorted(first) == ["a0", "b0", "c0"]
            for body in ("a0", "b0"):
                await consumer.ack(first[body])
            second = await _receive(consumer, 2)
            assert sorted(second) == ["a1", "b1"]  # c waits behind c0, in flight
            await consumer.ack(second["a1"])
            a0.kill()  # every ack above returned OK: the slave holds it

        acked = {"a0", "b0", "a1"}
        await eventually(lambda: acting(client, a1.remoting, "true"), 15, "A's slave acting as master")
        expected = {f"{g}{i}" for g in MESSAGE_GROUPS for i in range(PER_GROUP)} - acked
        delivered: list[str] = []
        deadline = time.monotonic() + 20
        while set(delivered) != expected and time.monotonic() < deadline:
            for msg in await pop(client, a1.remoting, GROUP_A, TOPIC, 60_000, group=FIFO_GROUP, fifo=True, poll_ms=200):
                delivered.append(msg.body.decode())
                assert delivered[-1] not in acked, f"an acked message came again: {delivered}"
                await ack(client, a1.remoting, msg, FIFO_GROUP)
        assert sorted(delivered) == sorted(expected), delivered  # each once, none lost
        for message_group in MESSAGE_GROUPS:
            of_group = [body for body in delivered if body[0] == message_group]
            assert of_group == sorted(of_group), delivered  # each message group in order
    finally:
        await client.close()
        groups.kill_all()


async def _receive(consumer: AsyncSimpleConsumer, count: int) -> dict:
    """body -> message of the next ``count`` messages the consumer receives from A (B has none of them)."""
    got: dict = {}
    deadline = time.monotonic() + 10
    while len(got) < count and time.monotonic() < deadline:
        got.update((m.body.decode(), m) for m in await consumer.receive(32, INVISIBLE_MS))
    return got
