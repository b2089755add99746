"""The store's flush thread: runs the blocking half of each flush round (fsyncs), one at a time, in its own thread;
for a round that puts wait on, the event loop waits for it in place while fsyncs are quick.

Why a thread of its own and not ``asyncio.to_thread``: a put under SYNC_FLUSH waits for its round's fsync, and
on the project's 2-vCPU VM the executor's round trip (a work item and a future, the loop's wake-up pipe, the GIL
changing hands twice) cost ~130-180 µs of wall time and as much CPU, more than the fsync of a small append
(~70-130 µs). Handing a flush to a waiting thread and waiting on a ``concurrent.futures.Future`` costs ~40 µs.

Why wait in place: while the loop blocks on the round (the GIL released), its result needs no wake-up of the
loop at all. So for a waited-for round (SYNC_FLUSH, not a checkpoint) the loop waits in place for up to
``block_loop_max_s``, and past that goes back to serving reads, pops and other connections while the disk works:
a hung or slow disk costs the loop that long per round at most, and a put still answers FLUSH_DISK_TIMEOUT when
no fsync came in ``sync_flush_timeout_ms``. It waits in place only while the moving average of the waited-for
rounds' times is within that bound: a disk whose fsyncs take milliseconds never blocks the loop, and quick ones
bring the in-place waits back. ASYNC_FLUSH rounds and checkpoint rounds (many files; nobody waits on them) are
always awaited on the loop.

Thread safety: ``run`` is called on the event loop, one round at a time (the store's flush lock).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

NEWEST_WEIGHT = 0.25  # the weight of the newest waited-for round's time in the moving average
_Job = tuple[Callable[[], None], Future, bool]


class FlushThread:
    def __init__(self, name: str, block_loop_max_s: float):
        """``block_loop_max_s``: how long the loop may block on a waited-for round (0: never)."""
        self._name = name
        self._block_loop_max_s = block_loop_max_s
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.average_round_s = 0.0  # of the waited-for rounds; a fresh store tries the in-place wait first

    @property
    def waits_in_place(self) -> bool:
        """Whether the loop will block on the next waited-for round (for up to ``block_loop_max_s``)."""
        return 0 < self._block_loop_max_s and self.average_round_s <= self._block_loop_max_s

    async def run(self, flush: Callable[[], None], *, waited: bool) -> None:
        """Run ``flush`` in the thread and return (or raise) what it did. ``waited``: puts wait on this round."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()
        job: Future = Future()
        wait_in_place = waited and self.waits_in_place
        self._jobs.put((flush, job, waited))
        if wait_in_place:
            try:  # returns the flush's error without raising it; TimeoutError only when the round is not done
                job.exception(timeout=self._block_loop_max_s)
            except TimeoutError:
                pass
        if job.done():
            job.result()
        else:
            await asyncio.wrap_future(job)

    def _work(self) -> None:
        while (item := self._jobs.get()) is not None:
            flush, job, timed = item
            settle = job.set_running_or_notify_cancel()  # False: its round was cancelled (the fsync still runs)
            started_s = time.perf_counter()
            try:
                flush()
            except BaseException as exc:  # the awaiting round raises it
                error: BaseException | None = exc
            else:
                error = None
            if timed:  # before the result: the loop reads it for the next round
                self.average_round_s += (time.perf_counter() - started_s - self.average_round_s) * NEWEST_WEIGHT
            if not settle:
                continue
            if error is None:
                job.set_result(None)
            else:
                job.set_exception(error)

    def stop(self) -> None:
        """End the thread once the rounds handed to it are done (does not wait for it)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None

    def __repr__(self) -> str:
        return (
            f"<FlushThread average_round={self.average_round_s * 1e6:.0f}us "
            f"waits_in_place={self.waits_in_place} running={self._thread is not None}>"
        )
