"""Log lines that a flood cannot multiply: at most one per key per interval, the next one saying how many were
left out. A hostile client can trip a limit thousands of times a second, a failing disk fails a background task
every round; the log must stay readable and cheap."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

DEFAULT_MAX_KEYS = 1_024


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float,
        *,
        clock: Callable[[], float] | None = None,
        max_keys: int = DEFAULT_MAX_KEYS,
    ):
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock or time.monotonic
        self._max_keys = max_keys  # keys may carry error texts: the oldest is forgotten past this many
        self._next_s: dict[str, float] = {}  # key -> when its next line may be written
        self._left_out: dict[str, int] = {}  # key -> lines not written since its last one

    def warning(self, key: str, message: str, *args) -> bool:
        """Log ``message % args`` at WARNING unless ``key`` logged within the interval; True when written."""
        return self.log(logging.WARNING, key, message, *args)

    def log(self, level: int, key: str, message: str, *args, exc_info: BaseException | None = None) -> bool:
        """Log ``message % args`` at ``level`` (with ``exc_info``'s traceback) unless ``key`` logged within the
        interval; True when written."""
        now = self._clock()
        if now < self._next_s.get(key, float("-inf")):
            self._left_out[key] = self._left_out.get(key, 0) + 1
            return False
        if key not in self._next_s and len(self._next_s) >= self._max_keys:
            oldest = next(iter(self._next_s))
            del self._next_s[oldest]
            self._left_out.pop(oldest, None)
        self._next_s.pop(key, None)  # re-inserted last: the dict's order is the order of the last lines
        self._next_s[key] = now + self._interval_s
        left_out = self._left_out.pop(key, 0)
        if left_out:
            self._logger.log(level, message + " suppressed=%d", *args, left_out, exc_info=exc_info)
        else:
            self._logger.log(level, message, *args, exc_info=exc_info)
        return True
