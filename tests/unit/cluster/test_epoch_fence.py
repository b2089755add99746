"""Fencing of replication by the controller's epoch (cluster/epoch_fence.py), and the replication epoch taking
the controller's number (cluster/ha_epochs.py): pure decisions, and a model on a manual clock."""

from __future__ import annotations

import random

import pytest

from pocketmq.cluster.epoch_fence import DeposedMasterError, EpochFence, GroupSummary
from pocketmq.cluster.ha_epochs import Epoch, begin_tenure, tenure_number
from pocketmq.runtime.clock import ManualClock

pytestmark = pytest.mark.timeout(30)


def test_a_master_serves_slaves_of_its_epoch_or_older_and_learns_newer_ones():
    master = EpochFence(newest_seen=5, master_epoch=5)
    master.check_slave(4)  # a slave that has not read etcd since the election
    master.check_slave(5)
    master.check_slave(None)  # a slave without a controller says nothing
    assert not master.deposed()
    with pytest.raises(DeposedMasterError, match="epoch 6 exists"):
        master.check_slave(6)
    assert master.deposed() and master.newest_seen == 6
    with pytest.raises(DeposedMasterError):
        master.check_slave(5)  # once it knows, no slave may follow it


def test_a_slave_refuses_a_master_older_than_the_newest_epoch_it_knows():
    slave = EpochFence(newest_seen=3)
    slave.check_master(3)
    slave.check_master(4)  # a newer master: granted by etcd, so the slave learns of it from the reply
    assert slave.newest_seen == 4
    with pytest.raises(DeposedMasterError, match="epoch 3 is older than epoch 4"):
        slave.check_master(3)
    with pytest.raises(DeposedMasterError):
        slave.check_master(0)  # a reply naming no epoch: a master outside the controller


def test_runtime_info_names_the_epoch_master_in_sync_set_and_lease():
    fence = EpochFence(newest_seen=7, master_epoch=7, view=GroupSummary(7, 1, "127.0.0.1:10921", (0, 1), 0x1F))
    assert fence.runtime_info() == {
        "controllerEpoch": "7",
        "controllerMasterEpoch": "7",
        "controllerMaster": "1@127.0.0.1:10921",
        "controllerInSync": "0,1",
        "controllerLease": "1f",
    }
    assert EpochFence().runtime_info() == {"controllerEpoch": "0", "controllerMasterEpoch": "0"}


def test_a_tenure_takes_the_controllers_epoch_as_its_number():
    a1 = Epoch(1, 0, "a")
    assert tenure_number([], 4) == 4
    assert tenure_number([a1], 0) == 2  # static roles: one more than the last
    assert begin_tenure([a1], 500, 0, "b", controller_epoch=4) == [a1, Epoch(4, 500, "b")]
    # a log numbered higher by static roles before the controller goes on from its own last number
    assert tenure_number([Epoch(9, 0, "x")], 4) == 10


@pytest.mark.parametrize("seed", range(20))
def test_no_slave_goes_back_to_a_deposed_master(seed):
    """Three brokers; etcd grants a new epoch to a random broker every few hundred virtual ms, and each broker
    learns of it after a random delay (the old master much later: cut off from etcd). Slaves pull from any broker
    that still believes it is master (a stale route). With the fence, the master epochs each slave appends from
    and acknowledges never go down, and a master that learned of a newer epoch confirms nothing."""
    rng = random.Random(seed)
    clock = ManualClock()
    fences = {i: EpochFence() for i in range(3)}
    believes_master: dict[int, int] = {}  # broker -> the epoch it serves, from its own point of view
    pending: list[tuple[float, int, int, int]] = []  # (learns at ms, broker, epoch, holder)
    followed: dict[int, list[int]] = {i: [] for i in range(3)}  # master epochs each slave took records from
    epoch = 0
    next_election_ms = 0.0
    while clock.monotonic_ms() < 20_000:
        now_ms = clock.monotonic_ms()
        if now_ms >= next_election_ms:
            epoch += 1
            holder = rng.randrange(3)
            for broker in range(3):
                delay_ms = rng.uniform(0, 3_000 if broker in believes_master else 300)
                pending.append((now_ms + delay_ms, broker, epoch, holder))
            next_election_ms = now_ms + rng.uniform(200, 1_500)
        for event in [e for e in pending if e[0] <= now_ms]:
            pending.remove(event)
            _, broker, granted, holder = event
            fences[broker].saw(granted)
            if granted == fences[broker].newest_seen:  # the newest it knows decides its role
                if holder == broker:
                    believes_master[broker] = fences[broker].master_epoch = granted
                else:
                    believes_master.pop(broker, None)
                    fences[broker].master_epoch = 0
        masters = sorted(believes_master)
        for slave in (b for b in range(3) if b not in believes_master and masters):
            master = rng.choice(masters)
            master_fence = fences[master]
            try:
                master_fence.check_slave(fences[slave].newest_seen)  # the request; refused: no ack counted
                fences[slave].check_master(master_fence.master_epoch)  # the reply; refused: no record taken
            except DeposedMasterError:
                continue
            assert not master_fence.deposed()  # it counts this ack only while no newer epoch is known to it
            followed[slave].append(master_fence.master_epoch)
        clock.advance(rng.randint(1, 50))
    for epochs in followed.values():
        assert epochs == sorted(epochs)
    assert epoch > 10 and any(followed.values())
