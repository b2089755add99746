"""Long polling for pops: receives that found nothing wait until a message arrives in one of their topics.

A pop covers every queue of a topic and of its retry topic, so waiters are keyed by topic name, not by queue
as held pulls are. The store's arrival listener (``notify``) wakes every waiter of the topic; an ack of a FIFO
message (which may unblock its message group) wakes them too. The number of waiters is bounded: past
``max_waiters`` a receive answers "nothing" at once instead of waiting. A waiter may also name a future that
ends its wait early (its client said goodbye: the gRPC front ends that client's long polls).

Why not ``broker/long_polling.PullHoldService``: it has the same bounded wait-with-timeout shape, but a held
pull waits on one queue until that queue's max offset passes the pull's offset, while a pop waits on several
topics at once (the topic and its retry topic) for any arrival, and FIFO acks wake it too. One mechanism would
need both keyings and both wake rules behind flags; the shared part is the dozen lines of ``wait``.
"""

from __future__ import annotations

import asyncio


class PopWaiters:
    def __init__(self, max_waiters: int):
        self._max_waiters = max_waiters
        self._waiters: dict[str, set[asyncio.Future]] = {}
        self._count = 0

    @property
    def waiting(self) -> int:
        return self._count

    async def wait(self, topics: tuple[str, ...], timeout_ms: float, until: asyncio.Future | None = None) -> bool:
        """True when a message arrived in one of ``topics`` within ``timeout_ms``; False on timeout, when full, or
        when ``until`` is done first."""
        if timeout_ms <= 0 or self._count >= self._max_waiters or (until is not None and until.done()):
            return False
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        for topic in topics:
            self._waiters.setdefault(topic, set()).add(fut)
        self._count += 1

        def end_early(_: asyncio.Future) -> None:
            if not fut.done():
                fut.set_result(False)

        if until is not None:
            until.add_done_callback(end_early)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await fut
        except TimeoutError:
            return False
        finally:
            if until is not None:
                until.remove_done_callback(end_early)
            self._count -= 1
            for topic in topics:
                waiters = self._waiters.get(topic)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[topic]

    def notify(self, topic: str, queue_id: int = 0, max_queue_offset: int = 0) -> None:
        """The store's arrival listener signature; wakes every waiter of ``topic``."""
        for fut in self._waiters.pop(topic, ()):
            if not fut.done():
                fut.set_result(True)

    def wake_all(self) -> None:
        for waiters in list(self._waiters.values()):
            for fut in waiters:
                if not fut.done():
                    fut.set_result(False)

    def __repr__(self) -> str:
        return f"<PopWaiters waiting={self._count} topics={len(self._waiters)}>"
