"""Busy-polling event loops (``serve --busy-poll-us``): when events have been coming close together, the loop
keeps polling its sockets for a short while before it sleeps.

Why: a request that arrives while the loop still polls wakes nobody. On a small VM waking a process that sleeps on
the other vCPU costs more than serving a lone request (measured on the project's 2-vCPU VM, one send at a time
with client and broker on different vCPUs: ~4,500 sends/s, ~6,800 with the broker polling 200 µs).
Between two looks the poller yields its CPU (``sched_yield``), so a client sharing that CPU runs at once instead
of waiting for the poll to end (without the yield, one send at a time on one CPU fell from ~7,500/s to ~550/s).

When: polling pays only if the next events come within the poll time; otherwise it burns the poll time and then
sleeps anyway. So the selector keeps a moving average of how long it waited for events (its idle time, capped at
a few poll times so one long quiet spell is forgotten after a handful of events) and polls only while that
average is shorter than the poll time. A broker serving a trickle of requests, or none, sleeps at once as if
polling were off; one whose requests follow each other closely polls and saves the wake-ups. At worst (idle times
hovering around the poll time) it spends about one poll time of CPU per wake-up.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import time

IDLE_CAP_POLLS = 4  # an idle time counts as at most this many poll times in the average
IDLE_WEIGHT = 0.25  # the weight of the newest idle time in the average


class BusyPollSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The platform's selector (epoll on Linux), polling without sleeping for up to ``poll_s`` while its recent
    idle times are shorter than that (module docstring)."""

    def __init__(self, poll_s: float):
        super().__init__()
        self._poll_s = poll_s
        self._idle_cap_s = IDLE_CAP_POLLS * poll_s
        self._idle_average_s = self._idle_cap_s  # as after a long quiet spell: polling earns its way in

    @property
    def polling(self) -> bool:
        """Whether the next wait for events starts with a poll."""
        return self._idle_average_s < self._poll_s

    def select(self, timeout: float | None = None):
        started_s = time.monotonic()
        ready = super().select(0)
        if ready:  # events came while the loop was busy: as close together as they get
            self._observe_idle(0.0)
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
        self._observe_idle(time.monotonic() - started_s)
        return ready

    def _observe_idle(self, idle_s: float) -> None:
        self._idle_average_s += (min(idle_s, self._idle_cap_s) - self._idle_average_s) * IDLE_WEIGHT


def loop_factory(busy_poll_us: int):
    """What ``asyncio.Runner(loop_factory=...)`` takes: a busy-polling loop, or None (the default loop) for 0."""
    if busy_poll_us <= 0:
        return None
    return lambda: asyncio.SelectorEventLoop(BusyPollSelector(busy_poll_us / 1e6))
