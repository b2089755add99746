"""The background event loop that runs the SDK's async core behind the synchronous facades.

One daemon thread per process runs one asyncio loop; every synchronous ``Producer``, ``PullConsumer`` and
``Admin`` submits its coroutines there, so they share one ``ClientInstance`` (connections, routes,
heartbeats) per name server, as RocketMQ's ``MQClientInstance`` is shared per JVM. The loop is created on
first use and lives as long as the process (forked children get a fresh one).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Awaitable, Coroutine
from typing import TypeVar

from pocketmq.common.errors import RemotingTimeoutError

T = TypeVar("T")

_lock = threading.Lock()
_loop_thread: LoopThread | None = None


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name="pocketmq-client-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self._pid == os.getpid()

    def run(self, coro: Awaitable[T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result; its exception is raised here.

        ``timeout_s`` is a last-resort bound on the wait (the coroutine has its own deadlines); on expiry
        the coroutine is cancelled.
        """
        self.refuse_own_thread()
        if not asyncio.iscoroutine(coro):
            raise TypeError(f"a coroutine is required, not {type(coro).__name__}")
        call = _Call(coro)
        self.loop.call_soon_threadsafe(call.start)
        try:
            finished = call.done.acquire(timeout=-1 if timeout_s is None else max(timeout_s, 0))
        except BaseException:
            self.loop.call_soon_threadsafe(call.cancel)  # KeyboardInterrupt while waiting: do not leave it running
            raise
        if not finished:
            self.loop.call_soon_threadsafe(call.cancel)
            raise RemotingTimeoutError(f"call did not finish within {timeout_s:.1f}s")
        task = call.task
        assert task is not None  # ``done`` is released by the task's own done callback
        if task.cancelled():
            raise concurrent.futures.CancelledError()
        return task.result()

    def refuse_own_thread(self) -> None:
        """A synchronous call made on the loop thread would block the loop it waits for."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a synchronous PocketMQ call was made on the client loop itself: use the async API")

    def __repr__(self) -> str:
        return f"<LoopThread alive={self.alive}>"


class _Call:
    """One coroutine handed to the loop thread; the caller blocks on ``done`` (a plain lock, released when the
    task ends). Cheaper per call than ``run_coroutine_threadsafe``, whose two chained futures and condition
    variable cost about as much as a whole send on the loop."""

    __slots__ = ("coro", "done", "task")

    def __init__(self, coro: Coroutine) -> None:
        self.coro = coro
        self.done = threading.Lock()
        self.done.acquire()
        self.task: asyncio.Task | None = None

    def start(self) -> None:  # on the loop
        self.task = asyncio.get_running_loop().create_task(self.coro)
        self.task.add_done_callback(self._finished)

    def _finished(self, _task: asyncio.Future) -> None:
        self.done.release()

    def cancel(self) -> None:  # on the loop, after start (call_soon_threadsafe keeps the order)
        if self.task is not None:
            self.task.cancel()


def client_loop() -> LoopThread:
    """The process's client loop thread, started on first use."""
    global _loop_thread
    with _lock:
        if _loop_thread is None or not _loop_thread.alive:
            _loop_thread = LoopThread()
        return _loop_thread


class SyncFacade:
    """The synchronous face of an asyncio client: ``core`` runs on the process's client loop thread.

    Subclasses build their core and add the synchronous methods they expose (``self._loop.run(...)``).
    """

    def __init__(self, core) -> None:
        self._loop = client_loop()
        self.core = core

    def start(self):
        self._loop.run(self.core.start())
        return self

    def shutdown(self) -> None:
        self._loop.run(self.core.shutdown())

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()
