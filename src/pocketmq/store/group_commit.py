"""Group commit: puts that must be durable wait for the next fsync that covers them; one fsync serves many.

``GroupCommit`` owns the store's single flush task. The task sleeps until it is due (ASYNC_FLUSH: every
``flush_interval_ms``; SYNC_FLUSH: as soon as a put waits, else every ``checkpoint_interval_ms``), then runs
the store's ``flush(checkpoint)`` coroutine, which fsyncs in the store's flush thread and returns the phys
offset it made durable. While that fsync runs, new puts queue up behind it and are all covered by the next round, so
under load the number of fsyncs per second stays near 1 / fsync latency whatever the number of puts.

``wait_durable(phys_offset, timeout_ms)`` returns True once a flush covered ``phys_offset``, False on timeout
(the caller answers FLUSH_DISK_TIMEOUT; the record stays in the log) or when the flush failed.

Not a ``runtime.periodic`` task: puts wait on it, so a put under SYNC_FLUSH wakes it at once, and after a failed
flush it tries again every ``flush_interval_ms`` rather than backing off (a disk that has room again serves the
waiting puts at the next round). Its failures follow the one policy all the same (``TaskFailures``,
``store-flush``: counted, logged once per distinct error), and an error that ended its task would be reported.

Thread safety: event loop only (the worker thread is inside ``flush``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.periodic import TaskFailures, watch_task


class GroupCommit:
    def __init__(
        self,
        flush: Callable[[bool], Awaitable[int]],
        *,
        sync: bool,
        flush_interval_ms: int,
        checkpoint_interval_ms: int,
        metrics: MetricsRegistry | None = None,
    ):
        self._flush = flush
        self._sync = sync
        self._flush_interval_s = flush_interval_ms / 1000
        self._checkpoint_interval_ms = checkpoint_interval_ms
        self._waiters: deque[tuple[int, asyncio.Future, float]] = deque()  # (phys offset, future, deadline)
        self._expiry: asyncio.TimerHandle | None = None
        self._wanted = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task | None = None
        self._failures = TaskFailures("store-flush", metrics)
        self.durable_phys_offset = 0
        self.rounds = 0  # flushes run (a test of group commit asserts rounds < puts)

    def start(self) -> None:
        if self._task is None:
            self._task = watch_task(
                asyncio.get_running_loop().create_task(self._run(), name="store-flush"), self._failures
            )

    @property
    def has_waiters(self) -> bool:
        """Whether puts (or a slave) wait for the next round."""
        return bool(self._waiters)

    async def wait_durable(self, phys_offset: int, timeout_ms: int) -> bool:
        if phys_offset <= self.durable_phys_offset:
            return True
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        deadline_s = loop.time() + timeout_ms / 1000
        self._waiters.append((phys_offset, future, deadline_s))
        expiry = self._expiry
        if expiry is None or deadline_s < expiry.when():  # a shorter timeout than the waits before
            if expiry is not None:
                expiry.cancel()
            self._expiry = loop.call_at(deadline_s, self._expire)
        self._wanted.set()
        self.start()
        return await future

    def _expire(self) -> None:
        """The one timer behind every wait's timeout (cheaper than a timeout and a shield per wait): answers
        False to the waits whose deadline passed, then waits for the earliest deadline still pending. A timed
        out entry stays in line; a later round passes over it (its future is done)."""
        loop = asyncio.get_running_loop()
        now_s = loop.time()
        earliest_s = None
        for _, future, deadline_s in self._waiters:  # deadlines differ in order when the timeouts differ
            if future.done():
                continue
            if deadline_s <= now_s:
                future.set_result(False)
            elif earliest_s is None or deadline_s < earliest_s:
                earliest_s = deadline_s
        self._expiry = None if earliest_s is None else loop.call_at(earliest_s, self._expire)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()  # its clock paces the waits below, so it paces checkpoints too
        next_checkpoint_ms = loop.time() * 1000 + self._checkpoint_interval_ms
        while not self._stopping:
            wait_s = self._checkpoint_interval_ms / 1000 if self._sync else self._flush_interval_s
            try:
                async with asyncio.timeout(wait_s):
                    await self._wanted.wait()
            except TimeoutError:
                pass
            self._wanted.clear()
            if self._stopping:
                break
            now_ms = loop.time() * 1000
            checkpoint = now_ms >= next_checkpoint_ms
            if not await self.flush_now(checkpoint):
                await asyncio.sleep(self._flush_interval_s)  # a failing disk: retry later, do not spin
            elif checkpoint:
                next_checkpoint_ms = now_ms + self._checkpoint_interval_ms

    async def flush_now(self, checkpoint: bool) -> bool:
        """One flush round; wakes the waiters it covered (all of them, with False, when it failed)."""
        self.rounds += 1
        try:
            durable = await self._flush(checkpoint)
        except Exception as exc:  # an I/O error: the waiters time out of it now, the next round retries
            self._failures.failed(exc)
            self._release(lambda end: True, False)
            return False
        self._failures.succeeded()
        self.durable_phys_offset = max(self.durable_phys_offset, durable)
        self._release(lambda end: end <= durable, True)
        return True

    def _release(self, covered: Callable[[int], bool], outcome: bool) -> None:
        while self._waiters and covered(self._waiters[0][0]):
            _, future, _ = self._waiters.popleft()
            if not future.done():
                future.set_result(outcome)

    async def stop(self) -> None:
        """Stop the task after its current round (never cancels a flush halfway)."""
        self._stopping = True
        self._wanted.set()
        if self._task is not None:
            await self._task
            self._task = None

    def __repr__(self) -> str:
        return (
            f"<GroupCommit {'sync' if self._sync else 'async'} durable={self.durable_phys_offset} "
            f"waiters={len(self._waiters)} rounds={self.rounds}>"
        )
