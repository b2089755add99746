"""Work that arrives in one turn of the event loop, done as one batch: each caller still gets its own outcome.

``TurnBatch(run)``: ``submit(item)`` queues ``item``; the first submit of a turn starts a task, whose first step
the loop runs after every callback already scheduled, so the requests served in this turn (a read of a socket
hands the loop one task per request) have all submitted when it calls ``run`` once with their items, in the
order they came. ``run`` answers with one outcome per item, a result or the exception that failed that item
alone; an exception ``run`` raises fails every item of its batch. A caller cancelled while waiting leaves its
item in the batch (its work may be done all the same).

Why: a store append, a replication wait and a look at a ledger cost about the same for one item as for dozens
(the broker's POP acks: ``broker/pop/normal.py``), and concurrent callers start in the same turns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class TurnBatch(Generic[Item, Result]):
    """``run`` takes the items of one turn and gives the outcome of each, in order: its result, or the exception
    that failed it alone."""

    def __init__(self, run: Callable[[list[Item]], Awaitable[list[Result | Exception]]]):
        self._run = run
        self._items: list[Item] = []
        self._futures: list[asyncio.Future[Result]] = []
        self._tasks: set[asyncio.Task] = set()  # batches under way (the loop keeps only weak references)

    async def submit(self, item: Item) -> Result:
        loop = asyncio.get_running_loop()
        if not self._items:
            task = loop.create_task(self._flush())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        future: asyncio.Future[Result] = loop.create_future()
        self._items.append(item)
        self._futures.append(future)
        return await future

    async def _flush(self) -> None:
        items, futures = self._items, self._futures
        self._items, self._futures = [], []
        try:
            outcomes = await self._run(items)
        except Exception as exc:
            outcomes = [exc] * len(items)
        except BaseException:  # cancelled (the loop is closing): so are its callers
            for future in futures:
                future.cancel()
            raise
        for future, outcome in zip(futures, outcomes, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def __repr__(self) -> str:
        return f"<TurnBatch waiting={len(self._items)} under_way={len(self._tasks)}>"
