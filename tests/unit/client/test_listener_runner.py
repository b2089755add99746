"""Listener runners: the waiting call of the highest priority runs first (FIFO among equals), at most
``concurrency`` calls at once, results back on the loop; ``async def`` listeners run on the loop itself."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pocketmq.client.listener import ConsumeConcurrentlyStatus, StagedConcurrentListener
from pocketmq.client.listener_runner import (
    AsyncRunner,
    ListenerCall,
    ThreadRunner,
    batch_priority,
    is_async_listener,
    listener_runner,
)
from pocketmq.common.message import Message, MessageExt
from pocketmq.testing.polling import eventually

pytestmark = pytest.mark.timeout(10)
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def named(name: str, priority: int | None = None) -> list[MessageExt]:
    msg = MessageExt(topic="T", body=name.encode())
    msg.priority = priority
    return [msg]


def test_a_batch_counts_as_its_highest_priority_and_a_plain_message_as_zero():
    assert batch_priority([Message.create("T", "a"), Message.create("T", "b", priority=4)]) == 4
    assert batch_priority([Message.create("T", "a")]) == 0


def test_async_listeners_are_told_from_plain_ones():
    async def coroutine_listener(msgs, ctx):
        return OK

    class AsyncCallable:
        async def __call__(self, msgs, ctx):
            return OK

    class AsyncStaged(StagedConcurrentListener):
        async def consume_message(self, msgs, context):  # type: ignore[override]
            return None

    assert all(is_async_listener(f) for f in (coroutine_listener, AsyncCallable(), AsyncStaged()))
    assert not any(is_async_listener(f) for f in (lambda m, c: OK, StagedConcurrentListener()))
    assert isinstance(listener_runner(coroutine_listener, 1), AsyncRunner)
    assert isinstance(listener_runner(lambda m, c: OK, 1), ThreadRunner)


@pytest.mark.parametrize("kind", ["thread", "async"])
async def test_waiting_calls_run_highest_priority_first_then_in_arrival_order(kind):
    ran: list[str] = []
    release = threading.Event()

    def plain(msgs, ctx):
        ran.append(msgs[0].body.decode())
        if msgs[0].body == b"busy":
            release.wait(5)
        return OK

    async def coroutine(msgs, ctx):
        ran.append(msgs[0].body.decode())
        while msgs[0].body == b"busy" and not release.is_set():
            await asyncio.sleep(0.001)
        return OK

    runner = ThreadRunner(plain, 1) if kind == "thread" else AsyncRunner(coroutine, 1)
    statuses: list = []
    runner.start(ListenerCall(named("busy"), None, statuses.append))
    await eventually(lambda: ran == ["busy"])  # the one worker is taken: the rest wait
    for name, priority in [("low-a", None), ("high", 5), ("low-b", 0), ("mid", 2)]:
        runner.start(ListenerCall(named(name, priority), None, statuses.append))
    release.set()
    assert await runner.wait_idle(5)
    assert ran == ["busy", "high", "mid", "low-a", "low-b"] and statuses == [OK] * 5
    runner.close()


@pytest.mark.parametrize("kind", ["thread", "async"])
async def test_concurrency_is_bounded_and_a_raising_listener_gives_none(kind):
    running, most = 0, 0
    lock = threading.Lock()

    def enter(msgs) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)

    def leave(msgs):
        nonlocal running
        with lock:
            running -= 1
        if msgs[0].body == b"boom":
            raise RuntimeError("user bug")
        return OK

    def plain(msgs, ctx):
        enter(msgs)
        threading.Event().wait(0.01)
        return leave(msgs)

    async def coroutine(msgs, ctx):
        enter(msgs)
        await asyncio.sleep(0.01)
        return leave(msgs)

    runner = ThreadRunner(plain, 3) if kind == "thread" else AsyncRunner(coroutine, 3)
    names = ["boom" if i == 4 else str(i) for i in range(12)]
    results = await asyncio.gather(*(runner.call(named(name), None) for name in names))
    assert most == 3
    assert results == [None if name == "boom" else OK for name in names]
    runner.close()


async def test_a_closed_runner_starts_nothing():
    runner = ThreadRunner(lambda m, c: OK, 1)
    runner.close()
    runner.start(ListenerCall(named("late"), None, lambda status: pytest.fail("ran after close")))
    assert await runner.wait_idle(0.1)


async def test_an_async_listener_whose_own_await_is_cancelled_counts_as_failed_and_the_worker_goes_on():
    """A listener awaiting something that gets cancelled raises CancelledError although its worker was not
    cancelled: that call is a failure (None), not the end of the worker with the call never answered."""

    async def listener(msgs, ctx):
        if msgs[0].body == b"cancelled":
            never: asyncio.Future = asyncio.get_running_loop().create_future()
            never.cancel()
            await never  # raises CancelledError inside the listener
        return OK

    runner = AsyncRunner(listener, 1)
    first = asyncio.ensure_future(runner.call(named("cancelled"), None))
    second = asyncio.ensure_future(runner.call(named("fine"), None))
    assert await asyncio.wait_for(first, 5) is None
    assert await asyncio.wait_for(second, 5) == OK
    assert await runner.wait_idle(5)
