"""Busy-polling event loops (``serve --busy-poll-us``): after serving something, the loop keeps polling its
sockets for a short while before it sleeps.

Why: a request that arrives while the loop still polls wakes nobody. On a small VM waking a process that sleeps on
the other vCPU costs more than serving a lone request (measured on the project's 2-vCPU VM, one send at a time
with client and broker on different vCPUs: ~2,500 sends/s, ~10,000 with both sides busy-polling 500 µs). The
price is CPU: up to the poll time after every wake-up, spent even when nothing comes. Off by default; on a busy
broker it costs nothing (there is always something to serve), on an idle one it costs the poll time per timer
tick. When client and broker share one CPU it slows them (the poller holds the CPU the other needs).
"""

from __future__ import annotations

import asyncio
import selectors
import time


class BusyPollSelector(selectors.EpollSelector):
    """An epoll selector that polls without sleeping for ``poll_s`` after the last events it returned."""

    def __init__(self, poll_s: float):
        super().__init__()
        self._poll_s = poll_s
        self._last_events_s = 0.0

    def select(self, timeout: float | None = None):
        started_s = time.monotonic()
        poll_until_s = self._last_events_s + self._poll_s
        if timeout is not None:
            poll_until_s = min(poll_until_s, started_s + timeout)
        while True:  # at least one look, without sleeping
            ready = super().select(0)
            if ready or time.monotonic() >= poll_until_s:
                break
        if not ready and (timeout is None or timeout > 0):
            ready = super().select(None if timeout is None else max(0.0, started_s + timeout - time.monotonic()))
        if ready:
            self._last_events_s = time.monotonic()
        return ready


def loop_factory(busy_poll_us: int):
    """What ``asyncio.Runner(loop_factory=...)`` takes: a busy-polling loop, or None (the default loop) for 0."""
    if busy_poll_us <= 0:
        return None
    return lambda: asyncio.SelectorEventLoop(BusyPollSelector(busy_poll_us / 1e6))
