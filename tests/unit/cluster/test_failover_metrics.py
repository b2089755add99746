"""The failover loop's counts (cluster/failover_metrics.py) on a manual clock: elections, time without a master,
the epoch."""

from __future__ import annotations

import pytest

from pocketmq.cluster.failover_metrics import FailoverStats
from pocketmq.runtime.clock import ManualClock

pytestmark = pytest.mark.timeout(30)


def values(stats: FailoverStats) -> dict[str, float]:
    return {f.name.removeprefix("pocketmq_controller_"): f.samples[0].value for f in stats.families()}


def test_elections_and_time_without_a_master_are_counted_from_the_reads():
    clock = ManualClock()
    stats = FailoverStats(clock)
    stats.observed(3, holder_id=0)  # the elections before this broker started are not its to count
    assert values(stats) == {
        "elections_total": 0,
        "elections_won_total": 0,
        "masterless_seconds_total": 0,
        "masterless": 0,
        "epoch": 3,
    }
    clock.advance(1_000)
    stats.observed(3, holder_id=None)  # the master's lease lapsed
    clock.advance(1_500)
    assert values(stats)["masterless_seconds_total"] == 1.5 and values(stats)["masterless"] == 1
    stats.observed(3, holder_id=None)  # a read in between does not restart the stretch
    clock.advance(500)
    stats.observed(4, holder_id=1)
    stats.won += 1
    clock.advance(10_000)
    stats.observed(6, holder_id=1)  # two elections between reads
    assert values(stats) == {
        "elections_total": 3,
        "elections_won_total": 1,
        "masterless_seconds_total": 2.0,
        "masterless": 0,
        "epoch": 6,
    }


def test_the_first_election_of_a_new_group_is_counted():
    """A first read of epoch 0 (a new group) is a read: the election that grants epoch 1 after it counts."""
    stats = FailoverStats(ManualClock())
    stats.observed(0, holder_id=None)
    stats.observed(1, holder_id=1)
    assert values(stats)["elections_total"] == 1
