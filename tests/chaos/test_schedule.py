"""Schedules are a pure function of the seed and respect their limits."""

from __future__ import annotations

import pytest

from pocketmq.testing.chaos.schedule import (
    BROKERS,
    CLIENTS,
    PROCESSES,
    SERVERS,
    FaultKind,
    generate,
    group_of,
)

PROCESS_KINDS = {FaultKind.KILL, FaultKind.PAUSE, FaultKind.CORRUPT}


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another():
    assert generate(7, 60) == generate(7, 60)
    assert generate(7, 60).describe() == generate(7, 60).describe()
    assert generate(7, 60) != generate(8, 60)


@pytest.mark.parametrize("seed", range(200))
def test_faults_stay_inside_the_run_and_within_their_limits(seed):
    schedule = generate(seed, 40)
    assert schedule.disk_broker in BROKERS
    for fault in schedule.faults:
        assert 1.0 <= fault.at_s < fault.end_s <= 40
        assert fault.target in PROCESSES
        if fault.kind in (FaultKind.PARTITION, FaultKind.DELAY):
            assert fault.peer in PROCESSES and fault.peer != fault.target
            assert not (fault.target in CLIENTS and fault.peer in CLIENTS)
        if fault.kind in (FaultKind.CORRUPT, FaultKind.DISK_FULL):
            assert fault.target in BROKERS
        if fault.kind is FaultKind.DISK_FULL:
            assert fault.target == schedule.disk_broker
        if fault.kind is FaultKind.PAUSE:
            assert fault.target in (*SERVERS, "official")
        if fault.kind is FaultKind.CORRUPT:
            assert 16 <= fault.corrupt_bytes <= 200
    for i, a in enumerate(schedule.faults):
        overlapping = [b for b in schedule.faults[i + 1 :] if b.at_s < a.end_s]
        for b in overlapping:
            if a.kind in PROCESS_KINDS and b.kind in PROCESS_KINDS:
                assert a.target != b.target
                assert group_of(a.target) is None or group_of(a.target) != group_of(b.target)
        at_start = [b for b in schedule.faults if b.at_s <= a.at_s < b.end_s]
        assert len(at_start) <= 2


def test_kinds_limit_the_choice_and_without_removes_a_kind():
    schedule = generate(3, 60, kinds=frozenset({FaultKind.PARTITION, FaultKind.DELAY}))
    assert schedule.kinds() <= {FaultKind.PARTITION, FaultKind.DELAY} and schedule.faults
    full = generate(3, 60)
    assert FaultKind.DISK_FULL not in full.without(frozenset({FaultKind.DISK_FULL})).kinds()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="at least 3 s"):
        generate(1, 2)
    with pytest.raises(ValueError, match="no fault kinds"):
        generate(1, 30, kinds=frozenset())
