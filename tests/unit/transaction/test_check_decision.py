"""The check decision in virtual time: when a half message is checked, when it waits, when it is put aside."""

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.transaction.decision import (
    CheckSettings,
    Decision,
    HalfState,
    Verdict,
    decide,
    next_check_ms,
)
from pocketmq.broker.transaction.records import DiscardReason

BORN = 1_700_000_000_000
DEFAULTS = CheckSettings()  # RocketMQ's: 6 s, 30 s, 15 checks, 72 h


def test_first_check_after_the_timeout_from_the_born_time():
    half = HalfState(BORN, BORN)
    assert decide(half, DEFAULTS, BORN + 5_999) == Decision(Verdict.WAIT, at_ms=BORN + 6_000)
    assert decide(half, DEFAULTS, BORN + 6_000).verdict is Verdict.CHECK


def test_next_checks_one_interval_after_the_last():
    half = HalfState(BORN, BORN, checks=1, last_check_ms=BORN + 7_000)
    assert decide(half, DEFAULTS, BORN + 36_999) == Decision(Verdict.WAIT, at_ms=BORN + 37_000)
    assert decide(half, DEFAULTS, BORN + 37_000).verdict is Verdict.CHECK


def test_immunity_longer_than_the_timeout_delays_the_first_check_and_uses_no_checks():
    half = HalfState(BORN, BORN, immunity_ms=60_000)
    assert decide(half, DEFAULTS, BORN + 59_999).at_ms == BORN + 60_000
    assert decide(half, DEFAULTS, BORN + 60_000).verdict is Verdict.CHECK
    assert half.checks == 0  # waiting out the immunity counted nothing (RocketMQ counts each round of it)
    short = HalfState(BORN, BORN, immunity_ms=1_000)  # shorter than the timeout: the timeout rules
    assert next_check_ms(short, DEFAULTS) == BORN + 6_000


def test_put_aside_when_the_next_check_is_due_after_the_max():
    half = HalfState(BORN, BORN, checks=15, last_check_ms=BORN + 400_000)
    assert decide(half, DEFAULTS, BORN + 429_999).verdict is Verdict.WAIT
    assert decide(half, DEFAULTS, BORN + 430_000) == Decision(Verdict.DISCARD, reason=DiscardReason.MAX_CHECKS)
    assert (
        decide(HalfState(BORN, BORN, checks=14, last_check_ms=BORN), DEFAULTS, BORN + 30_000).verdict is Verdict.CHECK
    )


def test_stored_longer_than_the_retention_is_put_aside_unchecked():
    settings = CheckSettings(file_reserved_ms=3_600_000)
    assert decide(HalfState(BORN, BORN), settings, BORN + 3_600_001) == Decision(
        Verdict.DISCARD, reason=DiscardReason.EXPIRED
    )
    # a wait never ends past the expiry: the message is put aside on time even with a long interval
    waiting = HalfState(BORN, BORN, checks=3, last_check_ms=BORN + 3_590_000)
    assert decide(waiting, CheckSettings(interval_ms=60_000, file_reserved_ms=3_600_000), BORN + 3_595_000).at_ms == (
        BORN + 3_600_001
    )


def test_rocketmq_defaults_check_fifteen_times_in_about_seven_and_a_half_minutes():
    """Run one message through the decision with no producer ever answering, 1 s steps."""
    half = HalfState(BORN, BORN)
    checks_at: list[int] = []
    now = BORN
    while True:
        decision = decide(half, DEFAULTS, now)
        if decision.verdict is Verdict.CHECK:
            checks_at.append(now - BORN)
            half.checks += 1
            half.last_check_ms = now
        elif decision.verdict is Verdict.DISCARD:
            break
        now += 1_000
    assert checks_at == [6_000 + 30_000 * i for i in range(15)]
    assert now - BORN == 6_000 + 30_000 * 15  # put aside when the 16th check would be due (~7.6 min)


@given(
    born_offset=st.integers(0, 10_000),
    checks=st.integers(0, 20),
    last=st.integers(0, 1_000_000),
    now=st.integers(0, 2_000_000),
    timeout=st.integers(1, 100_000),
    interval=st.integers(1, 100_000),
    check_max=st.integers(1, 20),
)
def test_never_checks_before_due_nor_past_the_max(born_offset, checks, last, now, timeout, interval, check_max):
    settings = CheckSettings(timeout, interval, check_max, 10_000_000)
    half = HalfState(
        BORN + born_offset, BORN + born_offset, checks=checks, last_check_ms=0 if checks == 0 else BORN + last
    )
    decision = decide(half, settings, BORN + now)
    due = next_check_ms(half, settings)
    if decision.verdict is Verdict.CHECK:
        assert BORN + now >= due and checks < check_max
    elif decision.verdict is Verdict.WAIT:
        assert decision.at_ms > BORN + now and decision.at_ms == due
    else:
        assert decision.reason is DiscardReason.MAX_CHECKS and checks >= check_max and BORN + now >= due
