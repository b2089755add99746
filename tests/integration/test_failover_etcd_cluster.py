"""A controlled group (master and slave, real processes) on a three-member etcd (docs/failover.md): the brokers
take ``--controller etcd://M0,M1,M2``.

- One member killed (a follower, the one every broker talks to first): nothing changes: the same master, the
  same epoch, and SYNC sends acknowledged all along, for longer than a lease.
- A second member killed (no quorum): nobody can be elected: a master killed now leaves the group without a
  master, and the slave still serves reads.
- The members back: the in-sync slave is elected with a newer epoch and takes sends; the old master follows it.
"""

from __future__ import annotations

import time

import pytest

from pocketmq.cluster.election import DEFAULT_LEASE_TTL_MS
from pocketmq.protocol.codes import ResponseCode
from pocketmq.testing.controlled_group import logged, running_group
from pocketmq.testing.etcd import EtcdCluster, etcd_or_skip
from pocketmq.testing.polling import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
LEASE_S = DEFAULT_LEASE_TTL_MS / 1000


@pytest.fixture(scope="module")
def etcd3(tmp_path_factory):
    etcd_or_skip()
    cluster = EtcdCluster(tmp_path_factory.mktemp("etcd3"), size=3).start()
    try:
        yield cluster
    finally:
        cluster.kill()


@pytest.fixture
async def group(tmp_path, etcd3):
    async with running_group(tmp_path, etcd3.endpoint) as group:
        yield group


async def test_one_member_down_changes_nothing_two_stop_elections_and_their_return_elects_again(group, etcd3):
    master = await group.master()
    slave = group.brokers[1 - group.brokers.index(master)]
    epoch = (await group.keys())["epoch"]
    m0, m1, _m2 = etcd3.members

    # one member down, a follower (a leader's death stops etcd for an election, docs/failover.md), the one the
    # brokers talk to first: acknowledged sends all along, for longer than a lease, by the same master and epoch
    etcd3.not_leading(m0)
    m0.kill()
    acked: list[str] = []
    until = time.monotonic() + 1.5 * LEASE_S
    while time.monotonic() < until:
        body = f"one-down-{len(acked)}"
        code = await group.send_code(master, body)
        events = logged(master, "event=controller") + logged(master, "event=failover")
        assert code == ResponseCode.SUCCESS, f"send {body} answered {code} with one etcd member down: {events[-6:]}"
        acked.append(body)
    keys = await group.keys()
    assert keys["epoch"] == epoch and keys["master"]["address"] == master.remoting  # type: ignore[index]
    assert not logged(master, "event=failover_step_down")
    assert logged(master, "event=controller_endpoint")  # it moved on from the killed member

    # two members down: no quorum, so no election; the master dies and nobody takes its place
    m1.kill()
    master.kill()
    until = time.monotonic() + 2 * LEASE_S  # longer than the lease, and the settle time of a campaign
    while time.monotonic() < until:
        assert not await group.stores(slave, "no-master", timeout_s=0.5), "a master was elected without a quorum"
    assert set(acked) <= set(await group.bodies(slave))  # reads go on through the slave
    assert not logged(slave, "event=failover_master")

    # the members back: the in-sync slave is elected with a newer epoch, and the old master follows it
    etcd3.restart(m0)
    etcd3.restart(m1)
    await eventually(lambda: group.stores(slave, "elected"), 20, "the slave elected once etcd has a quorum")
    assert (await group.keys())["epoch"] > epoch  # type: ignore[operator]
    master.start()
    await eventually(lambda: group.acked(slave, "back"), 30, "the old master follows the new one")
    assert set(acked) | {"back"} <= set(await group.bodies(master))
