"""Failovers in a row under SYNC traffic (docs/failover.md): a group of three brokers under the controller, its
master killed (``kill -9``) and started again FAILOVERS times (2 in ``make test``; ``make failover`` runs 10),
then the checker (``pocketmq.testing.failover_rounds``): every acknowledged message on every broker, epochs
strictly increasing, one master per epoch, the replication epochs numbered as etcd's."""

from __future__ import annotations

import os

import pytest

from pocketmq.testing.controlled_group import ControlledGroup
from pocketmq.testing.etcd import etcd_server
from pocketmq.testing.failover_rounds import failovers_in_a_row

FAILOVERS = int(os.environ.get("FAILOVERS", "2"))
pytestmark = [pytest.mark.slow, pytest.mark.failover, pytest.mark.timeout(90 + 30 * FAILOVERS)]
etcd = pytest.fixture(etcd_server)


async def test_failovers_in_a_row_keep_every_acked_message_and_one_master_per_epoch(tmp_path, etcd):
    group = ControlledGroup(tmp_path, etcd.endpoint, size=3)
    try:
        failovers, traffic = await failovers_in_a_row(group, FAILOVERS)  # the checker runs in it
        times = ", ".join(f"{f.seconds:.2f}" for f in failovers)
        print(f"{FAILOVERS} failovers, {len(traffic.acked)} of {traffic.sent} sends acked, seconds: {times}")
    finally:
        await group.close()
