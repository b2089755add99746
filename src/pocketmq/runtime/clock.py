"""Clocks: the real one, and a manual one that tests and the simulator advance by hand.

Both also schedule callbacks by their own time (``call_later_ms``), so background work paced by a clock
(``runtime.periodic``) runs in virtual time under a ``ManualClock``: a test advances the clock instead of
sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None:
        """Drop the callback if it has not run yet."""


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (what RocketMQ stores as timestamps)."""

    def monotonic_ms(self) -> float:
        """Milliseconds for measuring intervals; never goes back."""

    def call_later_ms(self, delay_ms: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` on the running event loop once ``delay_ms`` of this clock's time have passed."""


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0

    def call_later_ms(self, delay_ms: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0.0) / 1000, callback)

    def __repr__(self) -> str:
        return "<SystemClock>"


class _ManualTimer:
    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], None] | None):
        self.callback = callback

    def cancel(self) -> None:
        self.callback = None


class ManualClock:
    """A clock that moves only when told to; callbacks scheduled on it run inside ``advance``, in due order."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now_ms = start_ms
        self._mono_ms = 0.0
        self._timers: list[tuple[float, int, _ManualTimer]] = []  # heap of (due monotonic ms, seq, timer)
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> float:
        return self._mono_ms

    def call_later_ms(self, delay_ms: float, callback: Callable[[], None]) -> Timer:
        if delay_ms <= 0:  # due now: the loop runs it soon, as a real clock's zero delay would
            return asyncio.get_running_loop().call_soon(callback)
        timer = _ManualTimer(callback)
        heapq.heappush(self._timers, (self._mono_ms + delay_ms, next(self._seq), timer))
        return timer

    def advance(self, delta_ms: int) -> None:
        if delta_ms < 0:
            raise ValueError("a clock never goes back")
        self._now_ms += delta_ms
        self._mono_ms += delta_ms
        while self._timers and self._timers[0][0] <= self._mono_ms:
            callback = heapq.heappop(self._timers)[2].callback
            if callback is not None:
                callback()

    def __repr__(self) -> str:
        return f"<ManualClock now_ms={self._now_ms}>"


SYSTEM_CLOCK = SystemClock()
