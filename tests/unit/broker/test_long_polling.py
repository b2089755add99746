"""Held pulls wake on arrival past their offset, time out, and are bounded."""

import asyncio

from pocketmq.broker.long_polling import PullHoldService


async def test_arrival_past_the_offset_wakes_the_waiter():
    holds = PullHoldService(max_waiters=10)
    waiter = asyncio.create_task(holds.wait("t", 0, 5, timeout_ms=5_000))
    await asyncio.sleep(0)  # let it register
    holds.notify_arrival("t", 0, max_queue_offset=5)  # not past offset 5 yet
    holds.notify_arrival("t", 1, max_queue_offset=9)  # another queue
    await asyncio.sleep(0)
    assert not waiter.done()
    holds.notify_arrival("t", 0, max_queue_offset=6)
    assert await waiter is True
    assert holds.held == 0


async def test_timeout_answers_false():
    holds = PullHoldService(max_waiters=10)
    assert await holds.wait("t", 0, 0, timeout_ms=10) is False
    assert holds.held == 0


async def test_bound_on_held_pulls_answers_at_once():
    holds = PullHoldService(max_waiters=1)
    first = asyncio.create_task(holds.wait("t", 0, 0, timeout_ms=5_000))
    await asyncio.sleep(0)
    assert await holds.wait("t", 0, 0, timeout_ms=5_000) is False  # over the bound: not held
    holds.wake_all()
    assert await first is False


async def test_cancelled_waiter_is_forgotten():
    holds = PullHoldService(max_waiters=10)
    waiter = asyncio.create_task(holds.wait("t", 0, 0, timeout_ms=5_000))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert holds.held == 0
    holds.notify_arrival("t", 0, 1)  # nothing left to wake, nothing breaks
