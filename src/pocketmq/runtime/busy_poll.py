"""Busy-polling event loops (``serve --busy-poll-us``): after serving something, the loop keeps polling its
sockets for a short while before it sleeps.

Why: a request that arrives while the loop still polls wakes nobody. On a small VM waking a process that sleeps on
the other vCPU costs more than serving a lone request (measured on the project's 2-vCPU VM, one send at a time
with client and broker on different vCPUs: ~2,500-3,000 sends/s, ~10,000 with both sides polling 1,000 µs).
Between two looks the poller yields its CPU (``sched_yield``), so a client sharing that CPU runs at once instead
of waiting for the poll to end (without the yield, one send at a time on one CPU fell from ~7,500/s to ~550/s).
The price is CPU: up to the poll time after every wake-up, spent even when nothing comes. On a busy broker that
is nothing (there is always something to serve); an idle one wakes rarely (0.1 % of a CPU at 1,000 µs); one
serving a trickle of requests spends up to the poll time on each. So it is off by default.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import time


class BusyPollSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The platform's selector (epoll on Linux), polling without sleeping for ``poll_s`` after the last events it
    returned."""

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
            os.sched_yield()  # a process sharing this CPU (the client, say) runs first: it is what we wait for
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
