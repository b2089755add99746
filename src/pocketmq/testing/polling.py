"""Waiting for a condition: poll it until it holds or a deadline passes (tests never sleep a fixed time).

``eventually`` (async: on the event loop, for checks that are plain or coroutine functions) and ``wait_until``
(blocking: for tests and harnesses that drive processes from a plain thread) share one schedule: the first
polls come quickly, since most conditions hold within milliseconds, the later ones back off to ``interval_s``,
and the last one is at the deadline, so a slow condition is not failed for want of one more look. Both return
the condition's truthy value and raise AssertionError naming ``message`` when the deadline passes.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

FIRST_PAUSE_S = 0.001
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_INTERVAL_S = 0.05


class _Schedule:
    """The pauses between the polls of ``check``: ``FIRST_PAUSE_S`` doubling up to ``interval_s``, the last one
    ending at the deadline; AssertionError once the deadline has passed."""

    def __init__(self, check: Callable, timeout_s: float, message: str | None, interval_s: float):
        self._deadline = time.monotonic() + timeout_s
        self._pause_s = min(FIRST_PAUSE_S, interval_s)
        self._interval_s = interval_s
        self._failure = f"{message or getattr(check, '__name__', 'condition')} not reached within {timeout_s}s"

    def next_pause_s(self) -> float:
        left_s = self._deadline - time.monotonic()
        if left_s <= 0:
            raise AssertionError(self._failure)
        pause_s = min(self._pause_s, left_s)
        self._pause_s = min(2 * self._pause_s, self._interval_s)
        return pause_s


async def eventually(
    check: Callable[[], Any | Awaitable[Any]],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    message: str | None = None,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
) -> Any:
    """Poll ``check()`` (awaited when it returns an awaitable) until it returns a truthy value, which is returned."""
    schedule = _Schedule(check, timeout_s, message, interval_s)
    while not (value := await _awaited(check())):
        await asyncio.sleep(schedule.next_pause_s())
    return value


def wait_until(
    check: Callable[[], Any],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    message: str | None = None,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
) -> Any:
    """Blocking ``eventually``: poll ``check()`` until it returns a truthy value, which is returned."""
    schedule = _Schedule(check, timeout_s, message, interval_s)
    while not (value := check()):
        time.sleep(schedule.next_pause_s())
    return value


async def _awaited(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
