"""The short form of ``make chaos`` (docs/chaos.md): real processes under SDK and official-client traffic, one
hand-written schedule with every fault kind, then every checker."""

from __future__ import annotations

import pytest

from pocketmq.testing.chaos.runner import run_schedule
from pocketmq.testing.chaos.schedule import ALL_KINDS, Fault, FaultKind, Schedule

K = FaultKind

EVERY_KIND = Schedule(
    seed=9001,
    duration_s=12,
    disk_broker="a0",
    faults=(
        Fault(K.DISK_FULL, 1.0, 3.5, "a0"),  # the SYNC master of group A refuses writes
        Fault(K.DELAY, 1.0, 5.0, "sdk", "b0", delay_ms=200),
        Fault(K.CORRUPT, 2.0, 3.0, "b0", corrupt_bytes=1000, clean_stop=True),  # b1 acts meanwhile
        Fault(K.KILL, 5.0, 2.0, "official"),
        Fault(K.KILL, 5.5, 3.0, "a0"),  # kill -9 of a SYNC master: a1 acts
        Fault(K.PAUSE, 6.0, 1.5, "b1"),
        Fault(K.PARTITION, 7.0, 2.5, "a1", "b0"),
        Fault(K.KILL, 9.0, 1.0, "namesrv"),
        Fault(K.PAUSE, 9.5, 1.0, "official"),
        Fault(K.KILL, 10.0, 1.0, "sdk"),
    ),
)


def test_the_schedule_has_every_kind():
    assert EVERY_KIND.kinds() == ALL_KINDS


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_no_acknowledged_message_lost_and_no_loop_under_every_fault_kind(tmp_path, request):
    result = run_schedule(EVERY_KIND, tmp_path, settle_s=60, replay=f"pytest '{request.node.nodeid}'")
    assert result.ok, result.report()
