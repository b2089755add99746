"""Where a push consumer's listener calls run: on worker threads that take many calls per thread hop, or, for an
``async def`` listener, on the client's event loop with no thread at all.

Handing each call to a thread pool on its own (an asyncio task, a pool future, a thread woken, the loop woken
back) costs more than a listener of one message does: with ``consume_batch_size`` 1 the hops were the consumer's
limit. Here a call is a ``ListenerCall`` put in the runner's waiting line, and up to ``concurrency`` workers take
calls from it until it is empty. A free worker takes the waiting call of the highest message priority
(``_SYS_MSG_PRIORITY_``; none counts as 0), the earliest of equal ones first, so a priority message pulled after
a pile of low ones does not wait behind them. The line is one FIFO per priority level (levels are few, and
nearly always only 0): a call in and out costs two deque operations, not a heap's comparisons.

- ``ThreadRunner`` (plain listeners): the workers are threads of a pool of ``concurrency``. A worker hands its
  finished calls back to the loop in one wake-up for all that finished since the loop last took them.
- ``AsyncRunner`` (``async def`` listeners): the workers are tasks on the client's loop, so at most
  ``concurrency`` calls are awaited at once; a worker whose calls do not suspend lets the loop run (pulls,
  heartbeats) once every ``YIELD_EVERY_S``.

A call's ``done`` runs on the loop with the listener's status, None when the listener raised (RocketMQ treats
both as RECONSUME_LATER / SUSPEND_CURRENT_QUEUE_A_MOMENT). With tracing (``ClientConfig.enable_trace``) the
receive and the consume of each call are recorded around it.

Used from one event loop; only the waiting line and the finished list are shared with the threads (one lock).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pocketmq.client.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, StagedConcurrentListener
from pocketmq.client.tracing import ClientTracer
from pocketmq.common.message import Message, MessageExt
from pocketmq.common.properties import PRIORITY

log = logging.getLogger(__name__)

_SUCCESS = (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS)
YIELD_EVERY_S = 0.001


def batch_priority(messages: Sequence[Message]) -> int:
    """The highest priority of a batch; 0 when no message has one (the common case costs one lookup each)."""
    best = 0
    for msg in messages:
        if PRIORITY in msg.properties:
            best = max(best, msg.priority or 0)
    return best


def is_async_listener(listener: Callable) -> bool:
    """An ``async def`` listener (a function, a callable object's ``__call__``, a staged listener's
    ``consume_message``): its calls are awaited on the loop."""
    target = listener.consume_message if isinstance(listener, StagedConcurrentListener) else listener
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(type(target).__call__)


@dataclass(slots=True)
class ListenerCall:
    messages: list[MessageExt]
    context: Any
    done: Callable[[Any], None]  # on the loop, with the listener's status (None: it raised)
    status: Any = None
    request_id: str = ""  # tracing: ties the call's receive and consume records
    started: float = 0.0


class ListenerRunner:
    """The waiting heap and the workers' bookkeeping; subclasses say what a worker is."""

    def __init__(self, listener: Callable, concurrency: int):
        self._listener = listener
        self._concurrency = concurrency
        self._lock = threading.Lock()
        self._waiting: dict[int, deque[ListenerCall]] = {0: deque()}  # priority -> calls in arrival order
        self._priorities = [0]  # the keys of _waiting, highest first
        self._workers = 0
        self._unfinished = 0  # started and not done yet (loop side)
        self._idle: asyncio.Event | None = None  # made by wait_idle, set when nothing is unfinished
        self._closed = False
        self.tracing: tuple[ClientTracer, str] | None = None  # (tracer, group) with config.enable_trace

    def start(self, call: ListenerCall) -> None:
        """Run ``call`` when a worker is free (nothing runs once the runner is closed)."""
        if self._closed:
            return
        self._unfinished += 1
        priority = batch_priority(call.messages)
        with self._lock:
            line = self._waiting.get(priority)
            if line is None:
                line = self._waiting[priority] = deque()
                self._priorities = sorted(self._waiting, reverse=True)
            line.append(call)
            if self._workers >= self._concurrency:
                return
            self._workers += 1
        self._start_worker()

    async def call(self, messages: list[MessageExt], context: Any) -> Any:
        """Run one call and wait for its status."""
        future = asyncio.get_running_loop().create_future()

        def done(status: Any) -> None:
            if not future.done():
                future.set_result(status)

        self.start(ListenerCall(messages, context, done))
        return await future

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``) until every call started is done; True when they are."""
        if self._unfinished:
            self._idle = asyncio.Event()
            try:
                async with asyncio.timeout(timeout_s):
                    await self._idle.wait()
            except TimeoutError:
                return False
        return True

    def close(self) -> None:
        """Start nothing more: calls still waiting are forgotten (their messages were not consumed)."""
        self._closed = True
        with self._lock:
            for line in self._waiting.values():
                line.clear()

    def _start_worker(self) -> None:
        raise NotImplementedError

    def _next(self) -> ListenerCall | None:
        """The call a worker runs next; None (and one worker fewer) when none waits."""
        with self._lock:
            for priority in self._priorities:
                line = self._waiting[priority]
                if line:
                    return line.popleft()
            self._workers -= 1
            return None

    def _finish(self, call: ListenerCall) -> None:
        self._unfinished -= 1
        if not self._unfinished and self._idle is not None:
            self._idle.set()
        try:
            call.done(call.status)
        except Exception:  # a bug in the consume service: reported, and the other calls still finish
            log.exception("event=listener_result_failed count=%d", len(call.messages))

    def _before(self, call: ListenerCall) -> None:
        if self.tracing is not None:
            tracer, group = self.tracing
            call.request_id = uuid.uuid4().hex
            tracer.received(group, call.messages, call.request_id)
            call.started = time.monotonic()

    def _after(self, call: ListenerCall) -> None:
        if self.tracing is not None:
            cost_ms = int((time.monotonic() - call.started) * 1000)
            self.tracing[0].consumed(call.messages, call.status in _SUCCESS, cost_ms, call.request_id)


def _listener_failed(call: ListenerCall) -> None:
    log.exception("event=listener_failed count=%d first_msg_id=%s", len(call.messages), call.messages[0].msg_id)


class ThreadRunner(ListenerRunner):
    """Plain listeners on a pool of ``concurrency`` threads, each running calls until none waits."""

    def __init__(self, listener: Callable, concurrency: int):
        super().__init__(listener, concurrency)
        self._executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="pocketmq-consume")
        self._finished: list[ListenerCall] = []  # done on a thread, not yet handed to the loop

    def _start_worker(self) -> None:
        self._executor.submit(self._work, asyncio.get_running_loop())

    def _work(self, loop: asyncio.AbstractEventLoop) -> None:
        while (call := self._next()) is not None:
            self._before(call)
            try:
                call.status = self._listener(call.messages, call.context)
            except Exception:  # user code: a failure is a "consume later", as RocketMQ treats it
                _listener_failed(call)
            self._after(call)
            with self._lock:
                self._finished.append(call)
                first = len(self._finished) == 1  # else the loop is woken already and takes this one too
            if first:
                try:
                    loop.call_soon_threadsafe(self._hand_over)
                except RuntimeError:  # the loop is closed: nobody waits for the result any more
                    return

    def _hand_over(self) -> None:
        with self._lock:
            finished, self._finished = self._finished, []
        for call in finished:
            self._finish(call)

    def close(self) -> None:
        super().close()
        self._executor.shutdown(wait=False, cancel_futures=True)


class AsyncRunner(ListenerRunner):
    """``async def`` listeners awaited on the loop by at most ``concurrency`` worker tasks."""

    def __init__(self, listener: Callable, concurrency: int):
        super().__init__(listener, concurrency)
        self._tasks: set[asyncio.Task] = set()

    def _start_worker(self) -> None:
        task = asyncio.get_running_loop().create_task(self._work())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        yield_at = loop.time() + YIELD_EVERY_S
        while (call := self._next()) is not None:
            self._before(call)
            try:
                call.status = await self._listener(call.messages, call.context)
            except asyncio.CancelledError:
                worker = asyncio.current_task()
                if worker is not None and worker.cancelling():  # the runner closed: the call is forgotten
                    raise
                # the listener's own await was cancelled, not this worker: a failure, else the call would
                # never be answered and the worker would be gone from the count
                _listener_failed(call)
            except Exception:  # user code: a failure is a "consume later", as RocketMQ treats it
                _listener_failed(call)
            self._after(call)
            self._finish(call)
            if loop.time() >= yield_at:  # a listener that never suspends must not keep the loop from pulling
                await asyncio.sleep(0)
                yield_at = loop.time() + YIELD_EVERY_S

    def close(self) -> None:
        super().close()
        for task in self._tasks:
            task.cancel()


def listener_runner(listener: Callable, concurrency: int) -> ListenerRunner:
    """The runner a listener needs: on the loop for an ``async def`` listener, else on threads."""
    return AsyncRunner(listener, concurrency) if is_async_listener(listener) else ThreadRunner(listener, concurrency)
