"""TurnBatch: the items submitted in one loop turn go to one run, each caller gets its own outcome, in order."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.runtime.turn_batch import TurnBatch

pytestmark = pytest.mark.timeout(10)


class Recorder:
    """A run that records its batches; an item "bad" fails alone, a batch holding "boom" fails as a whole."""

    def __init__(self):
        self.batches: list[list[str]] = []

    async def __call__(self, items: list[str]) -> list[str | Exception]:
        self.batches.append(items)
        await asyncio.sleep(0)  # a write that suspends, as a store append under SYNC replication does
        if "boom" in items:
            raise OSError("the whole batch failed")
        return [ValueError(item) if item == "bad" else item.upper() for item in items]


async def test_the_items_of_one_turn_go_to_one_run_in_order():
    run = Recorder()
    batch: TurnBatch[str, str] = TurnBatch(run)
    assert await asyncio.gather(*(batch.submit(item) for item in "abcde")) == list("ABCDE")
    assert run.batches == [list("abcde")]


async def test_a_later_turn_is_another_batch():
    run = Recorder()
    batch: TurnBatch[str, str] = TurnBatch(run)
    assert await batch.submit("a") == "A"
    assert await asyncio.gather(batch.submit("b"), batch.submit("c")) == ["B", "C"]
    assert run.batches == [["a"], ["b", "c"]]


async def test_an_item_that_fails_alone_fails_only_its_caller():
    batch: TurnBatch[str, str] = TurnBatch(Recorder())
    outcomes = await asyncio.gather(*(batch.submit(item) for item in ("a", "bad", "c")), return_exceptions=True)
    assert outcomes[0] == "A" and outcomes[2] == "C"
    assert isinstance(outcomes[1], ValueError)


async def test_a_run_that_raises_fails_every_caller_of_its_batch_only():
    run = Recorder()
    batch: TurnBatch[str, str] = TurnBatch(run)
    failed = await asyncio.gather(batch.submit("a"), batch.submit("boom"), return_exceptions=True)
    assert all(isinstance(outcome, OSError) for outcome in failed)
    assert await batch.submit("d") == "D"  # the next turn's batch is not touched


async def test_a_cancelled_caller_leaves_the_others_answered():
    run = Recorder()
    batch: TurnBatch[str, str] = TurnBatch(run)
    first = asyncio.ensure_future(batch.submit("a"))
    second = asyncio.ensure_future(batch.submit("b"))
    await asyncio.sleep(0)  # both submitted: the batch is under way
    first.cancel()
    assert await second == "B"
    assert first.cancelled()
    assert run.batches == [["a", "b"]]
