"""Holding pulls that found nothing until a message arrives in their queue or their time is up.

The store calls ``notify_arrival`` (its arrival listener, on the event loop) after records reach a consume
queue; every waiter of that queue whose offset is now below the queue's max is woken. The number of held
pulls is bounded: past ``max_waiters`` a pull is not held (the caller answers "nothing yet" at once).
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)


class PullHoldService:
    def __init__(self, max_waiters: int):
        self._max_waiters = max_waiters
        self._waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future]]] = {}
        self._count = 0

    @property
    def held(self) -> int:
        return self._count

    async def wait(self, topic: str, queue_id: int, queue_offset: int, timeout_ms: int) -> bool:
        """Wait until the queue's max offset passes ``queue_offset`` (True) or ``timeout_ms`` ends (False).

        Returns False at once when the bound on held pulls is reached or the timeout is not positive.
        """
        if timeout_ms <= 0 or self._count >= self._max_waiters:
            return False
        key = (topic, queue_id)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        entry = (queue_offset, fut)
        self._waiters.setdefault(key, []).append(entry)
        self._count += 1
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await fut
        except TimeoutError:
            return False
        finally:
            self._count -= 1
            waiters = self._waiters.get(key)
            if waiters is not None:
                try:
                    waiters.remove(entry)
                except ValueError:
                    pass  # already taken by notify_arrival
                if not waiters:
                    del self._waiters[key]

    def notify_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        waiters = self._waiters.get((topic, queue_id))
        if not waiters:
            return
        keep = []
        for queue_offset, fut in waiters:
            if queue_offset < max_queue_offset:
                if not fut.done():
                    fut.set_result(True)
            else:
                keep.append((queue_offset, fut))
        waiters[:] = keep

    def wake_all(self) -> None:
        """At shutdown: let every held pull answer now."""
        for waiters in self._waiters.values():
            for _, fut in waiters:
                if not fut.done():
                    fut.set_result(False)

    def __repr__(self) -> str:
        return f"<PullHoldService held={self._count} queues={len(self._waiters)} max={self._max_waiters}>"
