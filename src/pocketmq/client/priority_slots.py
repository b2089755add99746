"""Listener slots handed out highest priority first: how a push consumer keeps priority messages' order.

A push consumer pulls every queue of its share at once and runs batches on ``consume_thread_max`` threads. With a
backlog, batches wait for a thread; a plain pool would run them in the order they were pulled, so a priority
message pulled after a pile of low ones would wait behind them. ``PrioritySlots`` gives a free thread to the
waiting batch of the highest priority (``_SYS_MSG_PRIORITY_``; a message without one counts as 0), the earliest
of equal ones first. Without priority messages it is a FIFO semaphore.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from pocketmq.common.message import Message


def batch_priority(messages: Sequence[Message]) -> int:
    return max((m.priority or 0 for m in messages), default=0)


class PrioritySlots:
    def __init__(self, slots: int):
        self._free = slots
        self._waiting: list[tuple[int, int, asyncio.Future]] = []  # (-priority, arrival, waiter): a heap
        self._arrivals = itertools.count()

    @asynccontextmanager
    async def slot(self, priority: int) -> AsyncIterator[None]:
        await self._acquire(priority)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, priority: int) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (-priority, next(self._arrivals), waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a slot just as it was cancelled: pass it on
                self._release()
            raise

    def _release(self) -> None:
        while self._waiting:
            _, _, waiter = heapq.heappop(self._waiting)
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    def __repr__(self) -> str:
        return f"<PrioritySlots free={self._free} waiting={len(self._waiting)}>"
