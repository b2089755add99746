"""How long the asyncio event loop was held: a callback due every ``interval_ms`` measures how late it ran.

Two numbers per sample:

- ``lag``: how late the callback ran (wall time). Everything waits this long: requests, timers, replication.
- ``busy``: the part of that lag the loop's thread spent on the CPU (``time.thread_time``), i.e. code that held
  the loop. On a machine shared with other work the OS may not run the process for a while; that shows in the
  lag but not in ``busy``, so ``busy`` is what a test asserts on to find code that blocks the loop (a spinning
  pass, a long synchronous loop), without failing because the machine was loaded.

Metrics (docs/metrics.md): ``pocketmq_event_loop_lag_seconds`` (histogram of the lag) and
``pocketmq_event_loop_max_busy_seconds`` / ``pocketmq_event_loop_max_lag_seconds`` (the largest since start).
"""

from __future__ import annotations

import asyncio
import time

from pocketmq.metrics import MetricsRegistry

LAG_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class LoopLagMonitor:
    def __init__(self, interval_ms: int = 20, *, metrics: MetricsRegistry | None = None):
        self._interval_s = interval_ms / 1000
        metrics = metrics if metrics is not None else MetricsRegistry()
        self._lag = metrics.histogram(
            "pocketmq_event_loop_lag_seconds",
            "How late the event loop ran a callback due at a known time",
            buckets=LAG_BUCKETS_S,
        )
        self._max_lag = metrics.gauge("pocketmq_event_loop_max_lag_seconds", "Largest event loop lag since start")
        self._max_busy = metrics.gauge(
            "pocketmq_event_loop_max_busy_seconds",
            "Largest event loop lag spent on the CPU (code holding the loop) since start",
        )
        self.max_lag_ms = 0.0
        self.max_busy_ms = 0.0
        self.samples = 0
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._cpu = 0.0

    def start(self) -> None:
        self._schedule(asyncio.get_running_loop())

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        self._due = loop.time() + self._interval_s
        self._cpu = time.thread_time()
        self._handle = loop.call_at(self._due, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        lag_s = max(loop.time() - self._due, 0.0)
        busy_s = min(lag_s, time.thread_time() - self._cpu)
        self.samples += 1
        self._lag.observe(lag_s)
        if lag_s * 1000 > self.max_lag_ms:
            self.max_lag_ms = lag_s * 1000
            self._max_lag.set(lag_s)
        if busy_s * 1000 > self.max_busy_ms:
            self.max_busy_ms = busy_s * 1000
            self._max_busy.set(busy_s)
        self._schedule(loop)

    def __repr__(self) -> str:
        return (
            f"<LoopLagMonitor samples={self.samples} max_lag_ms={self.max_lag_ms:.1f} "
            f"max_busy_ms={self.max_busy_ms:.1f}>"
        )
