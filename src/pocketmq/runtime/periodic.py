"""Background work, one way: ``PeriodicTask`` runs a round of work every so often, and every background task
reports its failures through ``TaskFailures``, the one failure policy.

``PeriodicTask(name, action, interval_ms, clock=..., metrics=...)``, ``start()`` on the event loop:

- waits ``interval_ms``, runs ``action`` (plain or async), waits again. The wait is measured from the end of a
  round, so rounds never overlap. ``interval_ms`` is a number, or a callable read after each round (a service that
  paces itself: revive after blocked passes, the timer until its next due message); ``immediately=True`` runs the
  first round at once instead of after a wait.
- each wait is shortened by up to ``jitter`` of itself (10% by default), so tasks started together drift apart;
  never lengthened, so the interval stays the longest wait anything built on it sees (an epoch file at most 1 s
  stale, a broker registered well within its expiry).
- ``wake()`` cuts the current wait short; the round then runs after ``wake_delay_ms``, so a burst of wakes makes
  one round. A wake during a round makes another round follow it.
- the waits are timers of ``clock`` (``Clock.call_later_ms``): under a ``ManualClock`` the task runs in virtual
  time, as far as the test advances the clock.
- ``await stop()`` starts no new round and waits for the one in progress, which is never cut halfway; cancelling
  the task ends it at once (mid-round).

The failure policy (``TaskFailures``), for every background task:

- a round that raises is counted in ``pocketmq_background_task_failures_total{task,error}`` (``error``: the
  exception's type) and logged once per distinct error (type and text) per ``REPEAT_LOG_S``, the next line of it
  saying how many were left out: at WARNING for the disk, the network or a peer (an ``OSError``, or one of the
  task's ``expected`` errors), at ERROR with the traceback for anything else (a bug). The first round that
  succeeds after logged failures says so (``event=background_task_recovered``).
- after *n* failed rounds in a row the next wait is the interval doubled *n - 1* times, up to
  ``max(interval, backoff_max_ms)`` (30 s by default, so a task with a longer interval never waits longer than
  it; the registration heartbeat cannot back off past the name server's expiry); a wake does not cut this wait
  short, so a failing task never spins.
- the task goes on: only ``stop()`` or cancellation ends it.
- a task that is not periodic (a replication stream, a pull loop) is watched instead (``watch_task``,
  ``spawn_watched``): an error that ends it is logged with its traceback and counted, where otherwise nobody
  would hear of it until someone awaited the task.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import Callable, Coroutine

from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.runtime.rate_limited_log import RateLimitedLog

log = logging.getLogger(__name__)

FAILURES_METRIC = "pocketmq_background_task_failures_total"
DEFAULT_JITTER = 0.1
DEFAULT_BACKOFF_MAX_MS = 30_000
REPEAT_LOG_S = 60.0  # the same error of a task: one line a minute at most
MAX_DISTINCT_ERRORS = 16  # remembered per task (error texts may vary without end)
_MAX_DOUBLINGS = 30  # 2**30 intervals is past any cap; the exponent stays small
_JITTER_RNG = random.Random()


class TaskFailures:
    """The failures of one background task: counted, logged once per distinct error, and the run of failed rounds
    that paces its backoff."""

    def __init__(
        self,
        task: str,
        metrics: MetricsRegistry | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        expected: tuple[type[BaseException], ...] = (),
    ):
        self.task = task
        self._expected: tuple[type[BaseException], ...] = (OSError, *expected)
        registry = metrics if metrics is not None else MetricsRegistry()
        self._counter = registry.counter(
            FAILURES_METRIC, "Failed rounds of background tasks, and tasks ended by an error", ("task", "error")
        )
        self._log = RateLimitedLog(
            log, REPEAT_LOG_S, clock=lambda: clock.monotonic_ms() / 1000, max_keys=MAX_DISTINCT_ERRORS
        )
        self.in_a_row = 0  # failed rounds since the last one that succeeded
        self.total = 0
        self._reported = False  # a line of the current run of failures was written

    def failed(self, exc: BaseException) -> int:
        """A round raised ``exc``: count it and log it (unless the same error was logged within
        ``REPEAT_LOG_S``); returns the failed rounds in a row."""
        self.in_a_row += 1
        self.total += 1
        error = type(exc).__name__
        self._counter.inc(task=self.task, error=error)
        expected = isinstance(exc, self._expected)
        if self._log.log(
            logging.WARNING if expected else logging.ERROR,
            f"{error}: {exc}",
            "event=background_task_failed task=%s error=%r failures_in_a_row=%d",
            self.task,
            exc,
            self.in_a_row,
            exc_info=None if expected else exc,
        ):
            self._reported = True
        return self.in_a_row

    def succeeded(self) -> None:
        if self.in_a_row and self._reported:
            log.info("event=background_task_recovered task=%s failed_rounds=%d", self.task, self.in_a_row)
        self.in_a_row = 0
        self._reported = False

    def ended(self, exc: BaseException) -> None:
        """The task ended on ``exc`` and will not run again: always a line, with the traceback."""
        self.total += 1
        self._counter.inc(task=self.task, error=type(exc).__name__)
        log.error("event=background_task_ended task=%s error=%r", self.task, exc, exc_info=exc)

    def __repr__(self) -> str:
        return f"<TaskFailures {self.task} in_a_row={self.in_a_row} total={self.total}>"


def watch_task(task: asyncio.Task, failures: TaskFailures) -> asyncio.Task:
    """Report ``task`` through ``failures`` if it ends with an error (a return or a cancellation is no failure)."""

    def ended(done: asyncio.Task) -> None:
        error = None if done.cancelled() else done.exception()
        if error is not None:
            failures.ended(error)

    task.add_done_callback(ended)
    return task


def spawn_watched(coro: Coroutine, name: str, *, metrics: MetricsRegistry | None = None) -> asyncio.Task:
    """Run ``coro`` as the task ``name`` on the running loop, reported if it ends with an error."""
    return watch_task(asyncio.get_running_loop().create_task(coro, name=name), TaskFailures(name, metrics))


class PeriodicTask:
    def __init__(
        self,
        name: str,
        action: Callable[[], object],
        interval_ms: float | Callable[[], float],
        *,
        clock: Clock = SYSTEM_CLOCK,
        metrics: MetricsRegistry | None = None,
        immediately: bool = False,
        jitter: float = DEFAULT_JITTER,
        rng: random.Random | None = None,
        wake_delay_ms: float = 0,
        backoff_max_ms: float = DEFAULT_BACKOFF_MAX_MS,
        expected: tuple[type[BaseException], ...] = (),
    ):
        if not 0 <= jitter < 1:
            raise ValueError("jitter is a share of the wait in [0, 1)")
        self.name = name
        self._action = action
        self._interval = interval_ms if callable(interval_ms) else (lambda: interval_ms)
        self._clock = clock
        self._immediately = immediately
        self._jitter = jitter
        self._rng = rng or _JITTER_RNG
        self._wake_delay_ms = wake_delay_ms
        self._backoff_max_ms = backoff_max_ms
        self.failures = TaskFailures(name, metrics, clock=clock, expected=expected)
        self.rounds = 0  # rounds started, failed ones included
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._woken = False
        self._waiting: asyncio.Future | None = None  # the wait in progress
        self._waiting_wakeable = False

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._stopping = False  # a wake before start() still counts: the first round comes at once
            task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
            self._task = watch_task(task, self.failures)

    def wake(self) -> None:
        """Run a round soon (module docstring). Event loop thread only."""
        self._woken = True
        if self._waiting_wakeable:
            self._end_wait()

    async def stop(self) -> None:
        """Start no new round; wait for the one in progress to end."""
        task = self._task
        if task is None:
            return
        self._stopping = True
        self._end_wait()
        if task is not asyncio.current_task():  # a round stopping its own task ends it after the round
            await asyncio.wait([task])
        self._task = None

    async def _run(self) -> None:
        wait_ms, wakeable = (0.0, True) if self._immediately else self._next_wait(failed=False)
        while True:
            await self._wait(wait_ms, wakeable)
            if self._woken and self._wake_delay_ms > 0:
                await self._wait(self._wake_delay_ms, wakeable=False)  # wakes within the delay: this round
            if self._stopping:
                return
            self._woken = False
            wait_ms, wakeable = await self._round()

    async def _round(self) -> tuple[float, bool]:
        self.rounds += 1
        try:
            outcome = self._action()
            if inspect.isawaitable(outcome):
                await outcome
        except asyncio.CancelledError as exc:
            this_task = asyncio.current_task()
            if this_task is not None and this_task.cancelling():
                raise  # this task is cancelled: it ends here
            self.failures.failed(exc)  # something the round awaited was cancelled: a failed round
            return self._next_wait(failed=True)
        except Exception as exc:  # the task goes on (the failure policy, module docstring)
            self.failures.failed(exc)
            return self._next_wait(failed=True)
        self.failures.succeeded()
        return self._next_wait(failed=False)

    def _next_wait(self, *, failed: bool) -> tuple[float, bool]:
        """The wait before the next round, and whether a wake may cut it short."""
        try:
            interval_ms = float(self._interval())
        except Exception as exc:  # a pacing bug: counted and logged, and the task waits its longest
            self.failures.failed(exc)
            interval_ms, failed = float(self._backoff_max_ms), True
        if failed:
            doublings = min(self.failures.in_a_row - 1, _MAX_DOUBLINGS)
            wait_ms = min(interval_ms * 2**doublings, max(interval_ms, self._backoff_max_ms))
        else:
            wait_ms = interval_ms
        return wait_ms * (1 - self._jitter * self._rng.random()), not failed

    async def _wait(self, wait_ms: float, wakeable: bool) -> None:
        if self._stopping or (wakeable and self._woken):
            return
        if wait_ms <= 0:
            await asyncio.sleep(0)  # a round due at once still lets the loop serve others first
            return
        waiting = asyncio.get_running_loop().create_future()
        self._waiting, self._waiting_wakeable = waiting, wakeable
        timer = self._clock.call_later_ms(wait_ms, lambda: _resolve(waiting))
        try:
            await waiting
        finally:
            timer.cancel()
            self._waiting, self._waiting_wakeable = None, False

    def _end_wait(self) -> None:
        if self._waiting is not None:
            _resolve(self._waiting)

    def __repr__(self) -> str:
        state = "running" if self._task is not None else "stopped"
        return f"<PeriodicTask {self.name} {state} rounds={self.rounds} failed_in_a_row={self.failures.in_a_row}>"


def _resolve(future: asyncio.Future) -> None:
    if not future.done() and not future.get_loop().is_closed():
        future.set_result(None)
