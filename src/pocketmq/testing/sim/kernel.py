"""The simulation's kernel: one virtual clock, one random generator, one ordered list of events.

Everything that happens in a run is an event at a virtual time; events at the same time run in the order
they were scheduled, so a run depends on nothing but its seed. Coroutines (``spawn``) let node models and the
real async shells (``RemoteMessageReader``) wait for simulated replies: they await ``SimFuture``s, which the
kernel resumes when a network reply, a timeout or a disk flush resolves them. A bare yield (what
``asyncio.sleep(0)`` in a real shell such as ``ReviveService`` does) lets the other events of the moment run
first; the shells' uncontended ``asyncio.Lock`` needs no loop. Nothing here runs an asyncio loop, threads or
the wall clock.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Coroutine
from typing import Any

from pocketmq.runtime.clock import ManualClock

START_MS = 1_700_000_000_000


class SimError(RuntimeError):
    """The simulation itself went wrong (a runaway run, a model bug): not a finding about PocketMQ."""


class SimFuture:
    """A value that a later event provides; ``await`` it inside a coroutine started with ``Kernel.spawn``."""

    __slots__ = ("done", "_value", "_error", "_callbacks")

    def __init__(self) -> None:
        self.done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[], None]] = []

    def resolve(self, value: Any = None) -> None:
        self._finish(value, None)

    def fail(self, error: BaseException) -> None:
        self._finish(None, error)

    def _finish(self, value: Any, error: BaseException | None) -> None:
        if self.done:  # a reply after its timeout, or a timeout after the reply: the first one wins
            return
        self.done, self._value, self._error = True, value, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_done(self, callback: Callable[[], None]) -> None:
        if self.done:
            callback()
        else:
            self._callbacks.append(callback)

    def __await__(self):
        if not self.done:
            yield self
        if self._error is not None:
            raise self._error
        return self._value


class Kernel:
    def __init__(self, seed: int, *, max_events: int = 2_000_000):
        self.seed = seed
        self.rng = random.Random(seed)  # every random choice of the run, in event order
        self.clock = ManualClock(START_MS)
        self._events: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self._max_events = max_events
        self.events_run = 0

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def elapsed_ms(self) -> int:
        return self.clock.now_ms() - START_MS

    def after(self, delay_ms: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._events, (self.clock.now_ms() + max(0, int(delay_ms)), self._seq, action))

    def sleep(self, delay_ms: int) -> SimFuture:
        future = SimFuture()
        self.after(delay_ms, future.resolve)
        return future

    def spawn(self, coro: Coroutine) -> None:
        """Run ``coro`` until its first await, then resume it (as an event of its own) whenever what it awaits
        is done. Exceptions other than the awaited ones propagate out of ``run_until``: a model bug stops the run."""

        def step() -> None:
            try:
                awaited = coro.send(None)
            except StopIteration:
                return
            if awaited is None:  # a bare yield: resume after what else is due now
                self.after(0, step)
            elif isinstance(awaited, SimFuture):
                awaited.add_done(lambda: self.after(0, step))
            else:
                raise SimError(f"a simulated coroutine awaited {awaited!r}: only SimFutures exist here")

        step()

    def run_until(self, elapsed_ms: int) -> None:
        """Run every event due up to ``elapsed_ms`` after the start, then set the clock there."""
        end_ms = START_MS + elapsed_ms
        while self._events and self._events[0][0] <= end_ms:
            due_ms, _, action = heapq.heappop(self._events)
            if due_ms > self.clock.now_ms():
                self.clock.advance(due_ms - self.clock.now_ms())
            self.events_run += 1
            if self.events_run > self._max_events:
                raise SimError(f"more than {self._max_events} events: a runaway loop in the simulation")
            action()
        if end_ms > self.clock.now_ms():
            self.clock.advance(end_ms - self.clock.now_ms())

    def __repr__(self) -> str:
        return f"<Kernel seed={self.seed} t={self.elapsed_ms()}ms pending={len(self._events)} run={self.events_run}>"
