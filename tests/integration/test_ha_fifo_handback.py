"""FIFO POP through a slave acting as master goes back to the returning master (real processes, docs/ha.md).

Group A = SYNC master + slave (acting master), group B = a master. FIFO messages of message groups a (a0, a1,
a2) and b (b0, b1) on A. On A's master: pop a0 and b0, ack b0 (a0 stays in flight). kill -9 A's master; the
slave acts: the master's handle of a0 acks there, the next pop hands out a1 and b1, b1 is acked there and a1
stays in flight. A's master restarts and takes the slave's FIFO state back: its pop hands out nothing (b1 was
acked on the slave, a1 is in flight there), the slave's receipt handle of a1 acks on the master, and then a2
comes: no acked message again, message group a in order.
"""

from __future__ import annotations

import json

import pytest
from tests.integration.test_ha_acting_master import _last_match, ack, acting, replicated, runtime, send
from tests.integration.test_ha_metadata_sync import FAST, config_file, pop

from pocketmq.common import properties as props
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import start_two_groups
from pocketmq.testing.polling import eventually

FIFO_TOPIC = "handback-fifo"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


async def test_fifo_pops_of_the_acting_slave_continue_on_the_returning_master(tmp_path):
    groups = start_two_groups(tmp_path, a_flags=tuple(FAST))
    master, slave = groups.a_master, groups.a_slave
    client = RemotingClient()
    try:
        await groups.ready([FIFO_TOPIC])
        for body, message_group in ((b"a0", "a"), (b"b0", "b"), (b"a1", "a"), (b"b1", "b"), (b"a2", "a")):
            sent = await send(client, master.remoting, FIFO_TOPIC, body, {props.SHARDING_KEY: message_group})
            assert sent.code == ResponseCode.SUCCESS, sent.remark

        on_master = await pop(client, master.remoting, FIFO_TOPIC, fifo=True)
        assert [m.body for m in on_master] == [b"a0", b"b0"]
        await ack(client, master.remoting, on_master[1])
        await eventually(lambda: _fifo_equal(master, slave), 15, "the slave's copy of the FIFO state")
        await eventually(lambda: replicated(client, master.remoting, slave.remoting), 10, "slave caught up")

        master.kill()
        await eventually(lambda: acting(client, slave.remoting, "true"), 15, "slave acting as master")
        await ack(client, slave.remoting, on_master[0])  # the master's handle of a0
        on_slave = await pop(client, slave.remoting, FIFO_TOPIC, fifo=True)
        assert [m.body for m in on_slave] == [b"a1", b"b1"]
        await ack(client, slave.remoting, on_slave[1])  # b1 done on the slave; a1 stays in flight

        master.restart()
        merged = _last_match(master, r"event=acting_services_taken_back .*fifo_queues_merged=(\d+)")
        assert merged == ("1",), master.log_tail()
        assert await pop(client, master.remoting, FIFO_TOPIC, fifo=True) == []  # nothing acked comes again
        # A SYNC master answers a FIFO ack once its slave has it (docs/ha.md): the slave follows it again first.
        await eventually(lambda: _followed(client, master.remoting), 15, "the slave following the master again")
        await ack(client, master.remoting, on_slave[0])  # the slave's handle of a1, in flight on the master now
        assert [m.body for m in await pop(client, master.remoting, FIFO_TOPIC, fifo=True)] == [b"a2"]
    finally:
        await client.close()
        groups.kill_all()


async def _fifo_equal(master, slave) -> bool:
    on_master = config_file(master, "pop_fifo.json")
    return (
        on_master is not None
        and '"flight": {"0"' in json.dumps(on_master)
        and on_master == config_file(slave, "pop_fifo.json")
    )


async def _followed(client: RemotingClient, addr: str) -> bool:
    return int((await runtime(client, addr)).get("haConnections", 0)) >= 1
