"""The store's flush thread: in-place waits for quick waited-for rounds, the loop freed for slow ones, errors
carried back, and the moving average that decides; the group commit's one expiry timer for every wait."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from pocketmq.store.flush_thread import FlushThread
from pocketmq.store.group_commit import GroupCommit


@pytest.fixture
def flusher():
    threads = []

    def make(block_loop_max_s: float) -> FlushThread:
        threads.append(FlushThread("test-flush", block_loop_max_s))
        return threads[-1]

    yield make
    for thread in threads:
        thread.stop()


async def test_a_round_runs_in_the_flush_thread_and_its_error_reaches_the_caller(flusher):
    thread = flusher(0.001)
    ran_on = []
    await thread.run(lambda: ran_on.append(threading.current_thread().name), waited=True)
    assert ran_on == ["test-flush"]

    def disk_full():
        raise OSError(28, "No space left on device")

    for waited in (True, False):  # raised whether the loop waited in place or on the loop
        with pytest.raises(OSError, match="No space"):
            await thread.run(disk_full, waited=waited)
    await thread.run(lambda: ran_on.append("after"), waited=True)  # the thread outlives a failed round
    assert ran_on[-1] == "after"


async def test_a_round_slower_than_the_bound_frees_the_loop_until_it_ends(flusher):
    thread = flusher(0.001)
    disk_answers = threading.Event()

    def stuck_fsync():  # returns only once the loop has run the callback below: a blocked loop would never
        assert disk_answers.wait(30)

    asyncio.get_running_loop().call_soon(disk_answers.set)
    await asyncio.wait_for(thread.run(stuck_fsync, waited=True), 30)


async def test_slow_waited_rounds_end_the_in_place_waits_until_quick_ones_bring_them_back(flusher):
    thread = flusher(0.001)
    assert thread.waits_in_place  # a fresh store tries them first
    await thread.run(lambda: time.sleep(0.02), waited=True)  # one slow fsync: the average is over 5 ms
    assert not thread.waits_in_place
    for _ in range(30):  # each quick round takes a quarter off the average
        await thread.run(lambda: None, waited=True)
    assert thread.waits_in_place


async def test_rounds_nobody_waits_on_do_not_count_and_a_zero_bound_never_waits_in_place(flusher):
    thread = flusher(0.001)
    await thread.run(lambda: time.sleep(0.02), waited=False)  # an ASYNC_FLUSH or checkpoint round
    assert thread.waits_in_place and thread.average_round_s == 0
    assert not flusher(0).waits_in_place


async def test_each_wait_times_out_at_its_own_deadline_with_one_timer():
    disk_answers = asyncio.Event()

    async def flush(checkpoint: bool) -> int:
        await disk_answers.wait()
        return 100

    commit = GroupCommit(flush, sync=True, flush_interval_ms=10, checkpoint_interval_ms=60_000)
    patient = asyncio.ensure_future(commit.wait_durable(50, timeout_ms=30_000))
    hasty = asyncio.ensure_future(commit.wait_durable(60, timeout_ms=20))  # a later offset, an earlier deadline
    assert await asyncio.wait_for(hasty, 10) is False
    assert not patient.done() and commit.has_waiters
    disk_answers.set()
    assert await asyncio.wait_for(patient, 10) is True
    assert not commit.has_waiters and commit.durable_phys_offset == 100
    assert await commit.wait_durable(100, timeout_ms=1) is True  # covered already: no wait
    await commit.stop()
