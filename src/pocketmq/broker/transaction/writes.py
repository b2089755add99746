"""The transaction part of the broker's write paths (``broker.write_path.TransactionWrites``): this broker's store
(a master's ``LocalWritePath``), or another group's master (a slave acting as master: ``EscapedWritePath``).

``LocalTransactionWrites`` writes each ending as one store batch, so a crash never splits it: a commit is the
committed message and its resolution op, a discard the discarded copy and its op, a rollback the op alone. A
check round's marks are one record per batch of checks. Results are typed (``store.write_result``).

``EscapedTransactionWrites`` has one write: a pending half message sent, still a half message, to a queue of its
real topic on another group's master (RocketMQ RIP-32's ``escapeMessage``), which stores it as its own and checks
it. The slave's replica is never written; it ends, checks and discards nothing itself.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from pocketmq.broker.transaction.records import (
    DISCARD_TOPIC,
    DiscardReason,
    Resolution,
    Source,
    check_mark_op,
    committed_message,
    discarded_message,
    escaped_half,
    real_topic,
    resolution_op,
)
from pocketmq.cluster.escape import EscapeBridge, Routes
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import PERM_READ_WRITE, TopicConfig
from pocketmq.store.api import PutResult
from pocketmq.store.write_result import WriteResult, of_puts


class TransactionWrites(Protocol):
    # True on a slave acting as master: its pending half messages go to another group's master, which checks
    # them (``escape``); it ends, checks and discards none itself.
    escapes: bool

    def end_nowait(
        self, half: MessageExt, resolution: Resolution, source: Source
    ) -> WriteResult | Awaitable[WriteResult]:
        """Write a half message's ending (a commit: the real message and the op record; a rollback: the op)."""
        ...

    async def discard(self, half: MessageExt, reason: DiscardReason, checks: int) -> WriteResult:
        """Put a half message aside in TRANS_CHECK_MAX_TIME_TOPIC and end it."""
        ...

    async def marks(self, checks: list[tuple[int, int]]) -> WriteResult:
        """Record checks made: (half queue offset, checks done) each."""
        ...

    async def escape(self, half: MessageExt, checks: int, routes: Routes) -> WriteResult:
        """Send a pending half message to another group's master (only when ``escapes``)."""
        ...


class LocalTransactionWrites:
    escapes = False

    def __init__(self, store, topics):
        self._store = store
        self._topics = topics

    def end_nowait(
        self, half: MessageExt, resolution: Resolution, source: Source
    ) -> WriteResult | Awaitable[WriteResult]:
        """A commit (the real message and the op) or a rollback (the op): its result at once under ASYNC_FLUSH
        (no task for the broker's hottest transaction path), else an awaitable of it (after the fsync)."""
        records = [resolution_op([half.queue_offset], resolution, source)]
        if resolution is Resolution.COMMIT:
            try:
                config = self._topics.get(real_topic(half)) or self._topics.get_or_create(real_topic(half))
            except PocketMQError as exc:  # the topic was deleted and may not be created again
                return WriteResult.transient(type(exc).__name__, str(exc))
            records.insert(0, committed_message(half, config.write_queue_nums))
        puts = self._store.append_messages(records)
        if self._store.sync_flush and puts[0].status.stored:
            return self._when_durable(puts)
        return of_puts(puts)

    async def _when_durable(self, puts: list[PutResult]) -> WriteResult:
        return of_puts(await self._store.wait_puts_durable(puts))

    async def discard(self, half: MessageExt, reason: DiscardReason, checks: int) -> WriteResult:
        if self._topics.get(DISCARD_TOPIC) is None:
            self._topics.create_or_update(TopicConfig(DISCARD_TOPIC, 1, 1, PERM_READ_WRITE))  # RocketMQ: perm 6
        records = [
            discarded_message(half, reason, checks),
            resolution_op([half.queue_offset], Resolution.DISCARD, Source.BROKER),
        ]
        return of_puts(await self._store.put_messages(records))

    async def marks(self, checks: list[tuple[int, int]]) -> WriteResult:
        return of_puts(await self._store.put_messages([check_mark_op(checks)]))

    async def escape(self, half: MessageExt, checks: int, routes: Routes) -> WriteResult:
        return WriteResult.permanent("NOT_ESCAPED", "a master checks its half messages itself")


class EscapedTransactionWrites:
    escapes = True

    def __init__(self, bridge: EscapeBridge):
        self._bridge = bridge

    def end_nowait(self, half: MessageExt, resolution: Resolution, source: Source) -> WriteResult:
        return _NOT_HERE

    async def discard(self, half: MessageExt, reason: DiscardReason, checks: int) -> WriteResult:
        return _NOT_HERE

    async def marks(self, checks: list[tuple[int, int]]) -> WriteResult:
        return _NOT_HERE

    async def escape(self, half: MessageExt, checks: int, routes: Routes) -> WriteResult:
        result = await self._bridge.put_message(escaped_half(half, checks), routes, kind="transaction")
        return result.write_result()


_NOT_HERE = WriteResult.transient(
    "ESCAPED", "a slave acting as master escapes its half messages: another group's master ends them"
)
