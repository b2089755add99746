"""Log lines that a flood cannot multiply: at most one per key per interval, the next one saying how many were
left out. A hostile client can trip a limit thousands of times a second; the log must stay readable and cheap."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval_s: float, *, clock: Callable[[], float] | None = None):
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock or time.monotonic
        self._next_s: dict[str, float] = {}  # key -> when its next line may be written
        self._left_out: dict[str, int] = {}  # key -> lines not written since its last one

    def warning(self, key: str, message: str, *args) -> bool:
        """Log ``message % args`` at WARNING unless ``key`` logged within the interval; True when written."""
        now = self._clock()
        if now < self._next_s.get(key, float("-inf")):
            self._left_out[key] = self._left_out.get(key, 0) + 1
            return False
        self._next_s[key] = now + self._interval_s
        left_out = self._left_out.pop(key, 0)
        if left_out:
            self._logger.warning(message + " suppressed=%d", *args, left_out)
        else:
            self._logger.warning(message, *args)
        return True
