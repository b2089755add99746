"""Busy-polling event loops (``serve --busy-poll-us``): when events have been coming close together, the loop
keeps polling its sockets for a short while before it sleeps.

Why: a request that arrives while the loop still polls wakes nobody. On a small VM waking a process that sleeps on
the other vCPU costs more than serving a lone request (measured on the project's 2-vCPU VM, one send at a time
with client and broker on different vCPUs: ~4,500 sends/s, ~6,800 with the broker polling 200 µs).
Between two looks the poller yields its CPU (``sched_yield``), so a client sharing that CPU runs at once instead
of waiting for the poll to end (without the yield, one send at a time on one CPU fell from ~7,500/s to ~550/s).

When: polling pays only if the next events come within the poll time (a hit); otherwise it burns the poll time and
then sleeps anyway (a miss). A hit saves a wake-up (~100 µs of CPU on that VM), a miss wastes the poll time, so
polling pays when about three waits in four are hits. The selector keeps a moving share of the waits for events
that ended within the poll time (each counts, polled or not) and polls only while that share is at least 3/4.
A broker serving a trickle of requests, or none, sleeps at once as if polling were off; one whose requests follow
each other closely polls and saves the wake-ups; one whose waits alternate between short and long (one send at a
time under SYNC_FLUSH: the next request comes soon, the fsync does not) does not poll either.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import time

POLL_WHEN_HIT_SHARE = 0.75  # poll while at least this share of the recent waits were hits
HIT_WEIGHT = 0.25  # the weight of the newest wait in the share


class BusyPollSelector(selectors.DefaultSelector):
    """The platform's selector (epoll on Linux), polling without sleeping for up to ``poll_s`` while most of its
    recent waits for events ended within that time (module docstring)."""

    def __init__(self, poll_s: float):
        super().__init__()
        self._poll_s = poll_s
        self._hit_share = 0.0  # as after a quiet spell: polling earns its way in

    @property
    def polling(self) -> bool:
        """Whether the next wait for events starts with a poll."""
        return self._hit_share >= POLL_WHEN_HIT_SHARE

    def select(self, timeout: float | None = None):
        started_s = time.monotonic()
        ready = super().select(0)
        if ready:  # events came while the loop was busy: as close together as they get
            self._observe(hit=True)
            return ready
        if timeout is not None and timeout <= 0:  # a look between callbacks: the loop is not idle
            return ready
        end_s = None if timeout is None else started_s + timeout
        if self.polling:
            poll_until_s = started_s + self._poll_s if end_s is None else min(started_s + self._poll_s, end_s)
            while not ready and time.monotonic() < poll_until_s:
                os.sched_yield()  # a process sharing this CPU (the client, say) runs first: it is what we wait for
                ready = super().select(0)
        if not ready:
            ready = super().select(None if end_s is None else max(0.0, end_s - time.monotonic()))
        self._observe(hit=bool(ready) and time.monotonic() - started_s < self._poll_s)
        return ready

    def _observe(self, *, hit: bool) -> None:
        self._hit_share += (hit - self._hit_share) * HIT_WEIGHT


def loop_factory(busy_poll_us: int):
    """What ``asyncio.Runner(loop_factory=...)`` takes: a busy-polling loop, or None (the default loop) for 0."""
    if busy_poll_us <= 0:
        return None
    return lambda: asyncio.SelectorEventLoop(BusyPollSelector(busy_poll_us / 1e6))
