"""The short form of ``make chaos`` (docs/chaos.md): real processes, one hand-written schedule per fault
family, each a few seconds of faults under SDK and official-client traffic, then every checker."""

from __future__ import annotations

import pytest

from pocketmq.testing.chaos.runner import run_schedule
from pocketmq.testing.chaos.schedule import Fault, FaultKind, Schedule

K = FaultKind

PROCESSES = Schedule(seed=9001, duration_s=12, disk_broker="b1", faults=(
    Fault(K.DELAY, 1.0, 6.0, "sdk", "b0", delay_ms=200),
    Fault(K.PAUSE, 1.5, 2.0, "b1"),
    Fault(K.KILL, 3.0, 4.0, "a0"),           # the SYNC master of group A: its slave acts
    Fault(K.PARTITION, 4.0, 3.0, "a1", "b0"),
    Fault(K.KILL, 5.0, 2.0, "official"),
    Fault(K.KILL, 8.0, 1.5, "namesrv"),
    Fault(K.PAUSE, 8.5, 1.5, "official"),
    Fault(K.KILL, 9.0, 1.0, "sdk"),
))
DISK_FULL = Schedule(seed=9002, duration_s=10, disk_broker="a0", faults=(
    Fault(K.DISK_FULL, 3.0, 5.0, "a0"),
))
CORRUPT = Schedule(seed=9003, duration_s=10, disk_broker="b1", faults=(
    Fault(K.CORRUPT, 4.0, 3.0, "b0", corrupt_bytes=1000, clean_stop=True),
))


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("schedule", [PROCESSES, DISK_FULL, CORRUPT], ids=["processes", "disk_full", "corrupt"])
def test_no_acknowledged_message_lost_and_no_loop_under_faults(schedule, tmp_path, request):
    result = run_schedule(schedule, tmp_path, settle_s=40, replay=f"pytest '{request.node.nodeid}'")
    assert result.ok, result.report()
