"""Measure the event loop's lag around a block of test code:

    async with measure_loop_lag() as lag:
        await something_under_fault()
    assert lag.max_busy_ms < MAX_LOOP_BLOCK_MS, lag

``lag`` is a ``runtime.loop_lag.LoopLagMonitor``: ``max_busy_ms`` is the longest time code held the loop on the
CPU (what a test asserts on, since a loaded machine can delay a process without any code at fault) and
``max_lag_ms`` the longest wall-clock lag. On exit the monitor takes one last sample, so a block that never
yields still shows.

The heap that earlier tests of the same process left behind is frozen for the block: a full garbage collection
that runs inside the block would otherwise charge the traversal of millions of unrelated objects to it (one such
collection costs ~300 ms at 4 million objects, which is what made a full-suite run fail here once).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator

from pocketmq.runtime.loop_lag import LoopLagMonitor

MAX_LOOP_BLOCK_MS = 100  # what the fault tests allow a background service to hold the loop


@contextlib.asynccontextmanager
async def measure_loop_lag(interval_ms: int = 5) -> AsyncIterator[LoopLagMonitor]:
    gc.collect()
    gc.freeze()
    monitor = LoopLagMonitor(interval_ms)
    monitor.start()
    try:
        yield monitor
        samples = monitor.samples
        while monitor.samples == samples:  # the sample that covers the end of the block
            await asyncio.sleep(interval_ms / 1000)
    finally:
        monitor.stop()
        gc.unfreeze()
