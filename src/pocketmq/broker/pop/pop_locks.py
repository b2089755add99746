"""Who pops a (group, topic, queue) now: one lock each, shared by the normal and the FIFO pop modes.

A pop finding its queue's lock held skips the queue instead of waiting, so concurrent receives never hand out
the same message twice and none waits behind another's store append. (Staged queues wait for theirs instead:
``pop/staged.py``.)
"""

from __future__ import annotations

import asyncio


class PopLocks:
    def __init__(self) -> None:
        self._locks: dict[tuple[str, str, int], asyncio.Lock] = {}

    def free(self, group: str, topic: str, queue_id: int) -> asyncio.Lock | None:
        """The queue's lock, or None when another pop holds it (the caller skips the queue)."""
        lock = self._locks.setdefault((group, topic, queue_id), asyncio.Lock())
        return None if lock.locked() else lock

    async def settle(self) -> None:
        """Wait until every queue pop under way when called has finished: its CK (or dead letters) written, then
        its offsets and FIFO state moved, or nothing moved when the write failed. Whoever swaps the pop modes'
        ``writes`` and then reads those offsets (a slave handing its acting progress to its master) calls it in
        between: a pop still writing through the old ``writes`` would otherwise move its offset after the read,
        and what it handed out would be handed out again by the one that read them."""
        for lock in [lock for lock in self._locks.values() if lock.locked()]:
            async with lock:
                pass

    def __repr__(self) -> str:
        return f"<PopLocks queues={len(self._locks)} held={sum(lock.locked() for lock in self._locks.values())}>"
