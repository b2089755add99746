"""Virtual time for in-process components on a ``ManualClock`` whose periodic tasks run on that clock, while
their sockets and threads need real time: the clock moves on by a step at each poll of a condition."""

from __future__ import annotations

from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.polling import eventually


async def advance_until(clock: ManualClock, predicate, step_ms: int, timeout_s: float = 5.0) -> None:
    """Poll ``predicate`` (``testing.polling.eventually``) until it holds, moving ``clock`` on by ``step_ms`` after
    each look that found it false."""

    def holds_else_advance() -> bool:
        if predicate():
            return True
        clock.advance(step_ms)
        return False

    await eventually(holds_else_advance, timeout_s)
