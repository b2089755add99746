"""The per-broker circuit breaker: opens after N consecutive failures, one probe after the cool-down."""

from __future__ import annotations

import logging

import pytest

from pocketmq.cluster.breaker import (
    BreakerBoard,
    BreakerSettings,
    BreakerState,
    CircuitBreaker,
)


def breaker() -> CircuitBreaker:
    return CircuitBreaker("broker-b", BreakerSettings(failure_threshold=3, cool_down_ms=1000))


def test_opens_after_consecutive_failures_only():
    b = breaker()
    b.record_failure(0)
    b.record_failure(1)
    b.record_success(2)  # the streak is broken
    b.record_failure(3)
    b.record_failure(4)
    assert b.state is BreakerState.CLOSED and b.admit(5)
    b.record_failure(10, "connection refused")
    assert b.state is BreakerState.OPEN
    assert not b.admit(500) and b.retry_delay_ms(500) == 510


def test_half_open_lets_one_probe_and_closes_on_success(caplog):
    b = breaker()
    for now_ms in range(3):
        b.record_failure(now_ms)
    with caplog.at_level(logging.WARNING):
        assert b.admit(1002)
        assert b.state is BreakerState.HALF_OPEN
        assert not b.admit(1003)  # one probe at a time
        b.record_success(1004)
    assert b.state is BreakerState.CLOSED and b.admit(1005)
    assert [r.getMessage().split(" to=")[1].split()[0] for r in caplog.records] == ["OPEN", "HALF_OPEN", "CLOSED"]


def test_a_failed_probe_reopens_for_a_fresh_cool_down():
    b = breaker()
    for now_ms in range(3):
        b.record_failure(now_ms)
    assert b.admit(2000)
    b.record_failure(2001, "timeout")
    assert b.state is BreakerState.OPEN and not b.admit(2500) and b.retry_delay_ms(2500) == 501


def test_a_released_probe_lets_the_next_request_probe():
    b = breaker()
    for now_ms in range(3):
        b.record_failure(now_ms)
    assert b.admit(2000) and not b.admit(2001)
    b.release_probe()  # the probe was cancelled: no verdict
    assert b.state is BreakerState.HALF_OPEN and b.admit(2002) and not b.admit(2003)


def test_board_keeps_one_breaker_per_broker_and_settings_are_checked():
    board = BreakerBoard(BreakerSettings(failure_threshold=1, cool_down_ms=10))
    board.get("a").record_failure(0)
    assert board.get("a") is board.get("a")
    assert board.states() == {"a": BreakerState.OPEN}
    with pytest.raises(ValueError):
        BreakerSettings(failure_threshold=0)
