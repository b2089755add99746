"""Only the master cut off from etcd (docs/failover.md), real processes: each broker reaches etcd through an
address of its own on the fault harness's TCP proxy (``testing/chaos/proxy.py``), which stalls every byte
between the master and etcd; the master and its slave, the name server and the test stay connected.

The master steps down as its lease may lapse, before the slave is elected (the brokers' logs), no moment has
two brokers taking writes (sends tried on both all along: the old master's last stored send was answered
before the new master's first one was sent), and every acknowledged message is on the new master.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import pytest

from pocketmq.protocol.codes import ResponseCode
from pocketmq.testing.chaos.peers import PeerNames
from pocketmq.testing.chaos.proxy import ChaosProxy
from pocketmq.testing.controlled_group import STORED, ControlledGroup, logged, running_group
from pocketmq.testing.etcd import etcd_server
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import PocketProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
etcd = pytest.fixture(etcd_server)


def proxy_host(broker_id: int) -> str:
    """Where the proxy listens, on etcd's port, for broker ``broker_id``'s requests (it forwards to 127.0.0.1)."""
    return f"127.0.0.{2 + broker_id}"


def etcd_of(broker_id: int) -> str:
    """The proxy's name for etcd as broker ``broker_id`` reaches it."""
    return f"etcd-for-b{broker_id}"


@pytest.fixture
async def proxied(tmp_path, etcd):
    """A group whose brokers reach etcd each through its own proxy address. The proxy names no caller (a
    broker connects to etcd before the test knows its pid): a cut of (``peers.unknown``, ``etcd_of(i)``) cuts
    broker ``i`` alone from etcd."""
    peers = PeerNames()
    proxy = ChaosProxy(peers)
    proxy.start()
    port = etcd.members[0].client_port
    for broker_id in range(2):
        proxy.listen(etcd_of(broker_id), proxy_host(broker_id), port)
    endpoints = {broker_id: f"etcd://{proxy_host(broker_id)}:{port}" for broker_id in range(2)}
    try:
        async with running_group(tmp_path, etcd.endpoint, broker_endpoints=endpoints) as group:
            yield group, proxy, peers
    finally:
        proxy.close()


def event_times(broker: PocketProcess, event: str) -> list[datetime]:
    """When ``broker`` logged ``event`` (its log lines start with the local time, to the millisecond)."""
    return [datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f") for line in logged(broker, f"event={event} ")]


class Sends:
    """Sends tried on every broker in turn, all along: who stored what, and when (monotonic seconds)."""

    def __init__(self, group: ControlledGroup):
        self.group = group
        self.stored: list[tuple[int, str, float, float]] = []  # (broker index, body, sent at, answered at)
        self.acked: list[str] = []

    async def run(self, stop: asyncio.Event) -> None:
        k = 0
        while not stop.is_set():
            for index, broker in enumerate(self.group.brokers):
                body, k = f"p{k}", k + 1
                sent_at = time.monotonic()
                code = await self.group.send_code(broker, body, timeout_s=0.5)
                if code in STORED:
                    self.stored.append((index, body, sent_at, time.monotonic()))
                if code == ResponseCode.SUCCESS:
                    self.acked.append(body)

    def stored_on(self, index: int) -> list[tuple[int, str, float, float]]:
        return [s for s in self.stored if s[0] == index]


async def test_a_master_cut_off_from_etcd_alone_steps_down_before_the_slave_is_elected(proxied):
    group, proxy, peers = proxied
    master = await group.master()
    old, new = group.brokers.index(master), 1 - group.brokers.index(master)
    epoch = (await group.keys())["epoch"]
    sends, stop = Sends(group), asyncio.Event()
    sending = asyncio.create_task(sends.run(stop))
    try:
        await eventually(lambda: len(sends.stored_on(old)) >= 5, 10, "sends stored by the master")
        proxy.partition(peers.unknown, etcd_of(old))
        await eventually(lambda: len(sends.stored_on(new)) >= 5, 20, "the slave elected and taking sends")
    finally:
        stop.set()
        await sending
        proxy.heal_all()

    # the order in the brokers' logs: the old master stepped down before the slave won the new epoch
    stepped_down = event_times(group.brokers[old], "failover_step_down")
    won = event_times(group.brokers[new], "controller_won")
    assert len(stepped_down) == 1 and len(won) == 1, (stepped_down, won)
    assert stepped_down[0] < won[0]
    assert (await group.keys())["epoch"] == epoch + 1  # type: ignore[operator]

    # never two brokers taking writes: the old master's last stored send was answered before the new one's first
    last_old = max(answered for _, _, _, answered in sends.stored_on(old))
    first_new = min(sent for _, _, sent, _ in sends.stored_on(new))
    assert last_old < first_new

    # every acknowledged send is on the new master
    assert set(sends.acked) <= set(await group.bodies(group.brokers[new]))
    # healed: the old master follows the new one, which acknowledges SYNC sends again
    await eventually(lambda: group.acked(group.brokers[new], "healed"), 30, "the old master follows")
