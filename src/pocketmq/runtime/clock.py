"""Clocks: the real one, and a manual one that tests and the simulator advance by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (what RocketMQ stores as timestamps)."""

    def monotonic_ms(self) -> float:
        """Milliseconds for measuring intervals; never goes back."""


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0

    def __repr__(self) -> str:
        return "<SystemClock>"


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now_ms = start_ms
        self._mono_ms = 0.0

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> float:
        return self._mono_ms

    def advance(self, delta_ms: int) -> None:
        if delta_ms < 0:
            raise ValueError("a clock never goes back")
        self._now_ms += delta_ms
        self._mono_ms += delta_ms

    def __repr__(self) -> str:
        return f"<ManualClock now_ms={self._now_ms}>"


SYSTEM_CLOCK = SystemClock()
