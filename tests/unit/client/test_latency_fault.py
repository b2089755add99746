from __future__ import annotations

import pytest

from pocketmq.client.latency_fault import LatencyFaultPolicy, LatencyFaultTolerance


@pytest.mark.parametrize(
    "latency_ms,out_ms",
    [(10, 0), (99, 0), (550, 2000), (1799, 2000), (1800, 5000), (4000, 6000), (5000, 10000), (20000, 30000)],
)
def test_rocketmq5_durations(latency_ms, out_ms):
    assert LatencyFaultPolicy().not_available_for_ms(latency_ms) == out_ms


def test_failed_broker_sits_out_ten_seconds_then_returns():
    faults = LatencyFaultTolerance()
    faults.update("a", 3, failed=True, now_ms=1000)
    assert not faults.is_available("a", 10_999) and faults.is_available("a", 11_000)
    assert faults.filter(["a", "b"], 5000) == ["b"]
    faults.update("a", 20, failed=False, now_ms=12_000)
    assert faults.filter(["a", "b"], 12_000) == ["a", "b"]


def test_when_all_are_out_the_soonest_back_is_used():
    faults = LatencyFaultTolerance()
    faults.update("a", 20000, failed=False, now_ms=0)  # out 30 s
    faults.update("b", 600, failed=False, now_ms=0)  # out 2 s
    assert faults.filter(["a", "b"], 100) == ["b"]


def test_policy_checks_its_table():
    with pytest.raises(ValueError):
        LatencyFaultPolicy(latency_max_ms=(1, 2), not_available_ms=(0,))
    with pytest.raises(ValueError):
        LatencyFaultPolicy(latency_max_ms=(5, 2), not_available_ms=(0, 0))
