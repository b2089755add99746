"""The pure delay rules: level table, delivery time from properties, horizon and past limits."""

import pytest

from pocketmq.broker.timer.delay import (
    DEFAULT_DELAY_LEVELS,
    TimerLimits,
    delay_levels_problem,
    deliver_time_ms,
    parse_delay_levels,
)
from pocketmq.common.errors import IllegalMessageError
from pocketmq.protocol.error_codes import response_code_of, v2_code_of

NOW = 1_700_000_000_000
LIMITS = TimerLimits()


def test_default_table_is_rocketmqs_eighteen_levels():
    levels = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    assert len(levels) == 18
    assert levels[:4] == (1000, 5000, 10_000, 30_000)
    assert levels[-1] == 2 * 3_600_000


def test_bad_tables_are_reported():
    assert delay_levels_problem("1s 5x") is not None
    assert delay_levels_problem("") is not None
    assert delay_levels_problem("0s") is not None
    assert delay_levels_problem("100ms 1d") is None


@pytest.mark.parametrize("level, delay_ms", [(1, 1000), (3, 10_000), (18, 7_200_000), (40, 7_200_000)])
def test_levels_map_to_delays_and_clamp_to_the_last(level, delay_ms):
    assert deliver_time_ms({"DELAY": str(level)}, NOW, LIMITS) == NOW + delay_ms


def test_level_zero_and_no_property_mean_now():
    assert deliver_time_ms({"DELAY": "0"}, NOW, LIMITS) is None
    assert deliver_time_ms({"TAGS": "a"}, NOW, LIMITS) is None


def test_timer_properties_of_rocketmq_5():
    assert deliver_time_ms({"TIMER_DELIVER_MS": str(NOW + 1234)}, NOW, LIMITS) == NOW + 1234
    assert deliver_time_ms({"TIMER_DELAY_SEC": "7"}, NOW, LIMITS) == NOW + 7000
    assert deliver_time_ms({"TIMER_DELAY_MS": "250"}, NOW, LIMITS) == NOW + 250


def test_a_level_wins_over_timer_properties():
    assert deliver_time_ms({"DELAY": "1", "TIMER_DELIVER_MS": str(NOW + 99_999)}, NOW, LIMITS) == NOW + 1000


def test_beyond_the_horizon_is_illegal_delivery_time():
    with pytest.raises(IllegalMessageError) as err:
        deliver_time_ms({"TIMER_DELIVER_MS": str(NOW + LIMITS.max_delay_ms + 1)}, NOW, LIMITS)
    assert v2_code_of(err.value) == 40012 and response_code_of(err.value) == 13


def test_past_within_tolerance_is_due_now_beyond_is_refused():
    assert deliver_time_ms({"TIMER_DELIVER_MS": str(NOW - 5000)}, NOW, LIMITS) is None
    with pytest.raises(IllegalMessageError):
        deliver_time_ms({"TIMER_DELIVER_MS": str(NOW - LIMITS.past_tolerance_ms - 1)}, NOW, LIMITS)


def test_garbage_is_refused():
    with pytest.raises(IllegalMessageError):
        deliver_time_ms({"TIMER_DELAY_SEC": "soon"}, NOW, LIMITS)
