"""``serve --controller``: the configuration of each round, and the latest decision wins (no etcd, no broker)."""

from __future__ import annotations

import pytest

from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.cli.controlled_serve import Round, RoundSwitch, round_config
from pocketmq.cluster.election import Role

pytestmark = pytest.mark.timeout(30)


def test_the_master_registers_as_id_0_and_a_slave_as_its_id_plus_one():
    config = BrokerConfig(broker_id=0)
    master = round_config(config, 0, Round(Role.MASTER, 3), BrokerRole.SYNC_MASTER)
    assert (master.broker_id, master.broker_role) == (0, BrokerRole.SYNC_MASTER)
    slave = round_config(config, 0, Round(Role.SLAVE, 3), BrokerRole.SYNC_MASTER)
    assert (slave.broker_id, slave.broker_role) == (1, BrokerRole.SLAVE)
    assert master.role_problem() is None and slave.role_problem() is None


async def test_the_next_round_takes_the_latest_decision():
    switch = RoundSwitch()
    await switch.step_down()
    await switch.follow(1, "127.0.0.1:1", 4)
    assert switch.changed.is_set() and switch.wanted == Round(Role.SLAVE, 4)
    switch.current, switch.wanted = Round(Role.SLAVE, 4), None
    switch.changed.clear()
    await switch.follow(2, "127.0.0.1:2", 5)  # a slave follows a new master through the name server: no new round
    assert not switch.changed.is_set()
    await switch.become_master(6)
    assert switch.wanted == Round(Role.MASTER, 6)
