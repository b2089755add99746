"""TimerWheel against a simple model: every timer comes out once, never before it is due."""

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.timer.wheel import TimerWheel


def test_pop_due_in_time_order_by_second_and_never_early():
    wheel = TimerWheel()
    wheel.add(5_500, 1)
    wheel.add(5_100, 2)
    wheel.add(2_000, 3)
    assert wheel.next_due_ms() == 2_000
    assert wheel.pop_due(1_999, 10) == []
    assert wheel.pop_due(5_200, 10) == [(2_000, 3), (5_100, 2)]
    assert len(wheel) == 1 and wheel.next_due_ms() == 5_500
    assert wheel.pop_due(6_000, 10) == [(5_500, 1)]
    assert wheel.next_due_ms() is None and repr(wheel) == "<TimerWheel pending=0 seconds=0>"


def test_limit_and_remove_and_min_key():
    wheel = TimerWheel()
    for key in range(10):
        wheel.add(1_000 + key, key)
    assert wheel.remove(1_004, 4) and not wheel.remove(1_004, 4)
    assert wheel.min_key() == 0
    assert [k for _, k in wheel.pop_due(10_000, 3)] == [0, 1, 2]
    assert wheel.min_key() == 3
    assert [k for _, k in wheel.pop_due(10_000, 100)] == [3, 5, 6, 7, 8, 9]


@given(st.lists(st.integers(0, 20_000), max_size=200), st.lists(st.integers(0, 25_000), max_size=20))
def test_model(deliveries, pop_times):
    wheel = TimerWheel()
    for key, deliver_ms in enumerate(deliveries):
        wheel.add(deliver_ms, key)
    seen = {}
    for now_ms in sorted(pop_times) + [30_000]:
        for deliver_ms, key in wheel.pop_due(now_ms, 7):
            assert deliver_ms <= now_ms
            assert key not in seen
            seen[key] = deliver_ms
        while True:  # drain what is due now in limit-sized steps
            more = wheel.pop_due(now_ms, 7)
            if not more:
                break
            for deliver_ms, key in more:
                assert deliver_ms <= now_ms and key not in seen
                seen[key] = deliver_ms
        nxt = wheel.next_due_ms()
        assert nxt is None or nxt > now_ms
    assert seen == dict(enumerate(deliveries))
    assert len(wheel) == 0


def test_remove_below_forgets_lower_keys_only():
    wheel = TimerWheel()
    for deliver_ms, key in [(1_000, 0), (1_500, 3), (2_000, 1), (9_000, 2), (9_100, 5)]:
        wheel.add(deliver_ms, key)
    assert wheel.remove_below(3) == 3
    assert len(wheel) == 2 and wheel.min_key() == 3
    assert wheel.pop_due(10_000, 10) == [(1_500, 3), (9_100, 5)]
    assert wheel.next_due_ms() is None and wheel.remove_below(100) == 0


def test_an_opened_second_takes_new_timers_in_due_order_and_remove_finds_them():
    wheel = TimerWheel()
    wheel.add(1_900, 0)
    wheel.add(1_100, 1)
    wheel.add(2_500, 2)
    assert wheel.next_due_ms() == 1_100  # opens second 1
    wheel.add(1_050, 3)  # a timer of the opened second, earlier than the rest
    wheel.add(1_500, 4)
    assert wheel.next_due_ms() == 1_050 and wheel.min_key() == 0
    assert wheel.remove(1_500, 4) and not wheel.remove(1_500, 4) and not wheel.remove(1_050, 9)
    assert wheel.pop_due(1_899, 10) == [(1_050, 3), (1_100, 1)]  # exact order within the second
    assert wheel.remove_below(1) == 1 and len(wheel) == 1  # key 0, in the opened second
    wheel.add(1_950, 5)  # the second is done with its bucket: still the near heap's
    assert wheel.pop_due(3_000, 10) == [(1_950, 5), (2_500, 2)] and len(wheel) == 0


@given(st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 6_000)), max_size=100))
def test_model_with_adds_between_rounds(steps):
    """Timers added while rounds take the due ones (into opened seconds too): each comes out once, never early,
    and ``next_due_ms`` is the earliest pending one."""
    wheel = TimerWheel()
    pending: dict[int, int] = {}
    now_ms = 0
    for key, (deliver_ms, advance_ms) in enumerate(steps):
        wheel.add(deliver_ms, key)
        pending[key] = deliver_ms
        now_ms += advance_ms % 700
        for due_ms, due_key in wheel.pop_due(now_ms, 5):
            assert due_ms <= now_ms and pending.pop(due_key) == due_ms
        assert wheel.next_due_ms() == min(pending.values(), default=None)
    assert len(wheel) == len(pending)
