"""PrioritySlots: a free listener thread goes to the waiting batch of the highest priority, FIFO among equals."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client.priority_slots import PrioritySlots, batch_priority
from pocketmq.common.message import Message

pytestmark = pytest.mark.timeout(10)


def test_a_batch_counts_as_its_highest_priority_and_a_plain_message_as_zero():
    assert batch_priority([Message.create("T", "a"), Message.create("T", "b", priority=4)]) == 4
    assert batch_priority([Message.create("T", "a")]) == 0


async def test_waiting_batches_run_highest_priority_first_then_in_arrival_order():
    slots = PrioritySlots(1)
    ran: list[str] = []
    release = asyncio.Event()

    async def batch(name: str, priority: int) -> None:
        async with slots.slot(priority):
            ran.append(name)
            if name == "busy":
                await release.wait()

    busy = asyncio.create_task(batch("busy", 0))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(batch(n, p)) for n, p in [("low-a", 0), ("high", 5), ("low-b", 0), ("mid", 2)]]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(busy, *waiting)
    assert ran == ["busy", "high", "mid", "low-a", "low-b"]


async def test_a_cancelled_waiter_gives_its_turn_away():
    slots = PrioritySlots(1)
    hold = asyncio.Event()

    async def holder() -> None:
        async with slots.slot(0):
            await hold.wait()

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    gone = asyncio.create_task(slots._acquire(9))
    await asyncio.sleep(0)
    gone.cancel()
    later = asyncio.create_task(slots._acquire(1))
    await asyncio.sleep(0)
    hold.set()
    await first
    await asyncio.wait_for(later, 1)
    assert repr(slots) == "<PrioritySlots free=0 waiting=0>"
