"""``PeriodicTask`` in virtual time (a ``ManualClock``: nothing here sleeps): rounds every interval measured from
the end of the last one, jitter that only shortens, wakes (and their delay), the one failure policy (counted,
logged once per distinct error, backoff a wake cannot cut, recovery), stop that waits for a round in progress,
cancellation; ``watch_task`` for tasks that are not periodic; the clocks' timers."""

from __future__ import annotations

import asyncio
import logging

import pytest

from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.clock import ManualClock
from pocketmq.runtime.periodic import FAILURES_METRIC, PeriodicTask, TaskFailures, spawn_watched, watch_task
from pocketmq.runtime.rate_limited_log import RateLimitedLog

pytestmark = pytest.mark.timeout(10)


async def settle(check=None, turns: int = 50) -> None:
    """Let the loop run the tasks that are ready (no time passes): until ``check()`` holds, or ``turns`` turns."""
    for _ in range(turns if check is None else 1_000):
        if check is not None and check():
            return
        await asyncio.sleep(0)
    assert check is None or check()


class Action:
    """A round that records its calls, raises the next of ``errors`` when there is one, and may block on
    ``gate``."""

    def __init__(self, *errors: BaseException):
        self.calls = 0
        self.errors = list(errors)
        self.gate: asyncio.Event | None = None
        self.finished = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        self.finished += 1
        if self.errors:
            raise self.errors.pop(0)


def periodic(action, clock, interval_ms=1_000, **kwargs) -> PeriodicTask:
    kwargs.setdefault("jitter", 0)
    return PeriodicTask("t", action, interval_ms, clock=clock, **kwargs)


async def advance(clock: ManualClock, ms: int, action: Action, expect_calls: int) -> None:
    await settle()  # what is ready runs first (a task just started reaches its first wait)
    clock.advance(ms)
    await settle(lambda: action.calls == expect_calls)
    await settle()  # more turns: a round that should not run would have started by now
    assert action.calls == expect_calls


async def blocked_in_first_round(clock: ManualClock, **kwargs) -> tuple[Action, PeriodicTask]:
    """A started task whose first round waits for ``action.gate``."""
    action = Action()
    action.gate = asyncio.Event()
    task = periodic(action, clock, immediately=True, **kwargs)
    task.start()
    await settle(lambda: action.calls == 1)
    return action, task


async def test_rounds_run_every_interval_after_the_previous_round():
    clock, action = ManualClock(), Action()
    task = periodic(action, clock)
    task.start()
    await advance(clock, 999, action, 0)
    await advance(clock, 1, action, 1)
    await advance(clock, 999, action, 1)
    await advance(clock, 1, action, 2)
    await task.stop()
    assert not task.running and task.rounds == 2


async def test_immediately_runs_the_first_round_at_start():
    clock, action = ManualClock(), Action()
    task = periodic(action, clock, immediately=True)
    task.start()
    await settle(lambda: action.calls == 1)
    await advance(clock, 1_000, action, 2)
    await task.stop()


async def test_a_plain_function_is_a_round_too():
    clock, calls = ManualClock(), []
    task = periodic(lambda: calls.append(1), clock, immediately=True)
    task.start()
    await settle(lambda: calls == [1])
    await task.stop()


async def test_jitter_shortens_a_wait_and_never_lengthens_it():
    class HalfRandom:
        def random(self) -> float:
            return 0.5

    clock, action = ManualClock(), Action()
    task = periodic(action, clock, jitter=0.1, rng=HalfRandom())
    task.start()
    await advance(clock, 949, action, 0)
    await advance(clock, 1, action, 1)  # 1000 ms less 5%
    await task.stop()
    with pytest.raises(ValueError):
        PeriodicTask("t", action, 1_000, jitter=1.0)


async def test_an_interval_function_is_read_after_each_round():
    clock, action, waits = ManualClock(), Action(), [300, 700]
    task = periodic(action, clock, interval_ms=lambda: waits[min(action.calls, 1)])
    task.start()
    await advance(clock, 300, action, 1)
    await advance(clock, 699, action, 1)
    await advance(clock, 1, action, 2)
    await task.stop()


async def test_a_wake_cuts_the_wait_short_and_wakes_within_the_delay_make_one_round():
    clock, action = ManualClock(), Action()
    task = periodic(action, clock, interval_ms=60_000, wake_delay_ms=50)
    task.start()
    await settle()
    task.wake()
    await advance(clock, 30, action, 0)
    task.wake()  # within the delay: the same round
    await advance(clock, 20, action, 1)
    await advance(clock, 59_999, action, 1)  # the interval starts again after that round
    await advance(clock, 1, action, 2)
    await task.stop()


async def test_a_wake_during_a_round_makes_another_round_follow_it():
    action, task = await blocked_in_first_round(ManualClock())
    task.wake()
    action.gate.set()
    await settle(lambda: action.calls == 2)  # no time passed
    await task.stop()


async def test_a_failed_round_is_counted_logged_once_and_the_task_goes_on_with_backoff(caplog):
    clock, metrics = ManualClock(), MetricsRegistry()
    action = Action(*(ValueError("broken") for _ in range(5)))
    task = periodic(action, clock, metrics=metrics, backoff_max_ms=5_000)
    task.start()
    with caplog.at_level(logging.INFO, logger="pocketmq.runtime.periodic"):
        await advance(clock, 1_000, action, 1)  # fails: waits the interval once more
        await advance(clock, 1_000, action, 2)  # fails again: 2 s
        task.wake()  # a wake does not cut a backoff wait
        await advance(clock, 1_999, action, 2)
        await advance(clock, 1, action, 3)  # then 4 s, then the cap of 5 s
        await advance(clock, 4_000, action, 4)
        await advance(clock, 4_999, action, 4)
        await advance(clock, 1, action, 5)
        await advance(clock, 5_000, action, 6)  # succeeds: back to the interval
        await advance(clock, 1_000, action, 7)
    await task.stop()
    assert metrics.value(FAILURES_METRIC, task="t", error="ValueError") == 5
    failed = [r for r in caplog.records if "event=background_task_failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].levelno == logging.ERROR and failed[0].exc_info  # a bug: its traceback
    assert "task=t error=ValueError('broken') failures_in_a_row=1" in failed[0].getMessage()
    recovered = [r.getMessage() for r in caplog.records if "recovered" in r.getMessage()]
    assert recovered == ["event=background_task_recovered task=t failed_rounds=5"]
    assert task.failures.in_a_row == 0 and task.failures.total == 5


async def test_distinct_errors_are_each_logged_and_the_same_one_again_after_a_minute(caplog):
    clock = ManualClock()
    failures = TaskFailures("t", clock=clock)
    with caplog.at_level(logging.WARNING, logger="pocketmq.runtime.periodic"):
        failures.failed(OSError(28, "No space left on device"))
        failures.failed(OSError(28, "No space left on device"))
        failures.failed(TimeoutError("peer silent"))
        clock.advance(60_000)
        failures.failed(OSError(28, "No space left on device"))
    lines = [(r.levelno, r.getMessage(), r.exc_info) for r in caplog.records]
    assert [(level, info) for level, _, info in lines] == [(logging.WARNING, None)] * 3  # the disk: no traceback
    assert "OSError(28, 'No space left on device') failures_in_a_row=1" in lines[0][1]
    assert "TimeoutError('peer silent') failures_in_a_row=3" in lines[1][1]
    assert lines[2][1].endswith("failures_in_a_row=4 suppressed=1")


async def test_expected_errors_are_warnings_without_a_traceback(caplog):
    class PeerDown(Exception):
        pass

    failures = TaskFailures("t", clock=ManualClock(), expected=(PeerDown,))
    with caplog.at_level(logging.WARNING, logger="pocketmq.runtime.periodic"):
        failures.failed(PeerDown("no master"))
    assert [(r.levelno, r.exc_info) for r in caplog.records] == [(logging.WARNING, None)]


async def test_something_cancelled_inside_a_round_is_a_failed_round_not_the_end():
    clock, metrics = ManualClock(), MetricsRegistry()

    async def round_awaiting_a_cancelled_future():
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future

    task = periodic(round_awaiting_a_cancelled_future, clock, metrics=metrics, immediately=True)
    task.start()
    await settle(lambda: task.failures.total == 1)
    clock.advance(1_000)
    await settle(lambda: task.failures.total == 2)
    assert metrics.value(FAILURES_METRIC, task="t", error="CancelledError") == 2
    await task.stop()


async def test_stop_waits_for_the_round_in_progress_and_starts_no_other():
    clock = ManualClock()
    action, task = await blocked_in_first_round(clock)
    stopping = asyncio.ensure_future(task.stop())
    await settle()
    assert not stopping.done()  # the round is not cut halfway
    action.gate.set()
    await stopping
    assert action.finished == 1 and not task.running
    clock.advance(10_000)
    await settle()
    assert action.calls == 1


async def test_stop_during_a_wait_ends_the_task_at_once_and_it_can_start_again():
    clock, action = ManualClock(), Action()
    task = periodic(action, clock)
    task.start()
    await settle()
    await task.stop()
    assert action.calls == 0
    task.start()
    await advance(clock, 1_000, action, 1)
    await task.stop()
    await task.stop()  # stopped already: nothing to do


async def test_a_round_may_stop_its_own_task():
    clock = ManualClock()
    task = periodic(lambda: task.stop(), clock, immediately=True)
    task.start()
    await settle(lambda: not task.running)
    clock.advance(10_000)
    await settle()
    assert task.rounds == 1


async def test_cancelling_the_task_ends_it_mid_round_and_is_no_failure():
    metrics = MetricsRegistry()
    action, task = await blocked_in_first_round(ManualClock(), metrics=metrics)
    task._task.cancel()
    await settle(lambda: task._task.done())
    assert action.finished == 0 and task.failures.total == 0
    assert metrics.get(FAILURES_METRIC).values() == {}
    await task.stop()


async def test_a_task_ended_by_an_error_is_logged_with_its_traceback_and_counted(caplog):
    metrics = MetricsRegistry()

    async def stream():
        raise KeyError("bug")

    async def forever():
        await asyncio.Event().wait()

    with caplog.at_level(logging.ERROR, logger="pocketmq.runtime.periodic"):
        ended = spawn_watched(stream(), "replication", metrics=metrics)
        await settle(ended.done)
        await settle()
        cancelled = watch_task(asyncio.ensure_future(forever()), TaskFailures("other", metrics))
        await settle()
        cancelled.cancel()
        await settle(cancelled.done)
        await settle()
    assert [(r.getMessage(), bool(r.exc_info)) for r in caplog.records] == [
        ("event=background_task_ended task=replication error=KeyError('bug')", True)
    ]
    assert metrics.value(FAILURES_METRIC, task="replication", error="KeyError") == 1
    assert metrics.value(FAILURES_METRIC, task="other", error="CancelledError") == 0


async def test_manual_clock_timers_run_in_due_order_inside_advance_and_may_be_cancelled():
    clock, fired = ManualClock(), []
    clock.call_later_ms(20, lambda: fired.append("b"))
    clock.call_later_ms(10, lambda: fired.append("a"))
    clock.call_later_ms(15, lambda: fired.append("x")).cancel()
    clock.call_later_ms(0, lambda: fired.append("now"))  # due now: on the loop, soon
    clock.advance(19)
    assert fired == ["a"]
    clock.advance(1)
    assert fired == ["a", "b"]
    await settle(lambda: "now" in fired)


def test_the_rate_limited_log_forgets_its_oldest_key_past_its_bound(caplog):
    rate_limited = RateLimitedLog(logging.getLogger("t"), 10.0, clock=lambda: 0.0, max_keys=2)
    with caplog.at_level(logging.WARNING):
        assert rate_limited.warning("a", "a")
        assert rate_limited.warning("b", "b")
        assert not rate_limited.warning("a", "a")
        assert rate_limited.warning("c", "c")  # "a" goes: its line was the oldest written
        assert rate_limited.warning("a", "a")
        assert not rate_limited.warning("c", "c")
