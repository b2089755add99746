"""The controller (cluster/controller.py) and the failover loop (cluster/failover.py) against a real single-node
etcd, with a recording role handler instead of a broker."""

from __future__ import annotations

import pytest

from pocketmq.cluster.controller import ControllerError, EtcdController, parse_endpoints
from pocketmq.cluster.election import Action, Role
from pocketmq.cluster.failover import FailoverLoop
from pocketmq.testing.etcd import etcd_server
from pocketmq.testing.polling import eventually

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]


etcd = pytest.fixture(etcd_server)


class Recorder:
    """A role handler that records what the loop told it."""

    def __init__(self, log_end: int = 0, in_sync: frozenset[int] = frozenset()):
        self.calls: list[tuple] = []
        self.end = log_end
        self.in_sync = in_sync
        self.master_epoch: int | None = None

    async def become_master(self, epoch: int) -> None:
        self.calls.append(("master", epoch))
        self.master_epoch = epoch

    async def follow(self, master_id: int, master_address: str, epoch: int) -> None:
        self.calls.append(("follow", master_id, master_address, epoch))

    async def step_down(self) -> None:
        self.calls.append(("step_down",))
        self.master_epoch = None

    def log_end(self) -> int:
        return self.end

    def in_sync_addresses(self) -> frozenset[str]:
        return frozenset(f"127.0.0.1:{1000 + broker_id}" for broker_id in self.in_sync)


class Group:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.loops: dict[int, FailoverLoop] = {}

    async def start(self, broker_id: int, handler: Recorder) -> FailoverLoop:
        controller = EtcdController(
            self.endpoint,
            cluster_name="c1",
            broker_name="g1",
            broker_id=broker_id,
            address=f"127.0.0.1:{1000 + broker_id}",
        )
        loop = FailoverLoop(controller, handler)
        await loop.start()
        self.loops[broker_id] = loop
        return loop

    async def crash(self, broker_id: int) -> None:
        """The broker dies: no more renewals, nothing revoked (its lease lapses after the TTL)."""
        loop = self.loops.pop(broker_id)
        # the client may turn a cancellation into an error, which the loops go on after: they check these flags
        loop._stopping = loop.controller._stopping = True
        for task in [loop._task, *loop.controller._tasks]:
            assert task is not None
            task.cancel()
        await loop.controller._client.close()

    async def stop(self) -> None:
        for loop in self.loops.values():
            await loop.stop()


@pytest.fixture
async def group(etcd):
    g = Group(etcd.endpoint)
    yield g
    await g.stop()


def test_endpoints_parse():
    assert parse_endpoints("etcd://127.0.0.1:2379") == (("127.0.0.1", 2379),)
    assert parse_endpoints("etcd://h1:1,h2:2, h3:3/") == (("h1", 1), ("h2", 2), ("h3", 3))
    for bad in ("http://127.0.0.1:2379", "etcd://h1:1,", "etcd://h1:x"):
        with pytest.raises(ValueError, match="expected etcd://HOST:PORT"):
            parse_endpoints(bad)


async def test_one_broker_becomes_master_of_epoch_1_and_the_other_follows(group):
    a, b = Recorder(log_end=100, in_sync=frozenset({1})), Recorder(log_end=100)
    await group.start(0, a)
    await group.start(1, b)
    await eventually(lambda: a.master_epoch == 1, 20, "broker 0 master of epoch 1")
    await eventually(lambda: ("follow", 0, "127.0.0.1:1000", 1) in b.calls, 20, "broker 1 follows")
    view = await group.loops[0].controller.read()
    assert view.state.epoch == 1 and view.state.holder_id == 0
    await eventually(lambda: _in_sync(group, 0, {0, 1}), 20, "in-sync set written")


async def _in_sync(group, reader_id, ids):
    try:
        view = await group.loops[reader_id].controller.read()
    except ControllerError:  # a read etcd answered late (a loaded machine): not known yet, the poll reads again
        return False
    return view.state.in_sync_ids == frozenset(ids)


async def test_an_in_sync_slave_takes_over_with_a_new_epoch_when_the_master_dies(group):
    a, b = Recorder(in_sync=frozenset({1})), Recorder()
    await group.start(0, a)
    await eventually(lambda: a.master_epoch == 1, 20, "broker 0 master")
    await group.start(1, b)
    await eventually(lambda: _in_sync(group, 1, {0, 1}), 20, "in-sync set written")
    await group.crash(0)
    await eventually(lambda: b.master_epoch == 2, 20, "broker 1 master of epoch 2 after the lease lapsed")
    # the old master comes back: it sees epoch 2 and follows
    back = Recorder(log_end=10_000)
    await group.start(0, back)
    await eventually(lambda: ("follow", 1, "127.0.0.1:1001", 2) in back.calls, 20, "old master follows")
    assert back.master_epoch is None


async def test_a_slave_outside_the_in_sync_set_does_not_take_over(group):
    a, b = Recorder(in_sync=frozenset()), Recorder(log_end=10**6)
    await group.start(0, a)
    await eventually(lambda: a.master_epoch == 1, 20, "broker 0 master")
    loop_b = await group.start(1, b)
    await eventually(lambda: _in_sync(group, 1, {0}), 20, "in-sync set {0} written")
    await group.crash(0)

    def waiting():
        d = loop_b.last_decision
        return d is not None and d.action is Action.WAIT and "in-sync set" in d.reason

    await eventually(waiting, 20, "broker 1 waits: not in sync")
    assert b.master_epoch is None and loop_b.role is Role.SLAVE


async def test_a_master_cut_off_from_etcd_steps_down_before_its_lease_can_lapse(group, etcd):
    a, b = Recorder(in_sync=frozenset({1})), Recorder()
    loop_a = await group.start(0, a)
    await eventually(lambda: a.master_epoch == 1, 20, "broker 0 master")
    await group.start(1, b)
    await eventually(lambda: _in_sync(group, 1, {0, 1}), 20, "in-sync set written")
    etcd.pause()  # nobody reaches etcd: no renewals, no elections
    try:
        await eventually(lambda: ("step_down",) in a.calls, 5, "master steps down")
        assert not loop_a.controller.lease.holds()
        assert b.master_epoch is None
    finally:
        etcd.resume()
    # etcd back: the group gets a master again, of a new epoch
    await eventually(lambda: (a.master_epoch or 0) >= 2 or (b.master_epoch or 0) >= 2, 15, "a master again")
