"""Where a broker's special services write: one ``WritePath`` for the timer, revive, the pop engine and the
transaction service together.

The special services (delay/timer delivery, POP revive, the pop engine's CK and ACK records and dead letters,
transactions' endings and checks) write through a ``WritePath``, which has one part per service: ``timer``
(``TimerWrites``), ``revive`` (``ReviveWrites``), ``pop`` (``PopWrites``) and ``transaction``
(``TransactionWrites``). There are three:

- ``LocalWritePath``: a master's; everything goes to its own store (``LocalTimerWrites``, ``LocalReviveWrites``,
  ``LocalPopWrites``), and under SYNC replication acks and changes answer once a slave has them;
- ``broker.acting_writes.EscapedWritePath``: a slave acting as master; everything goes through the escape bridge
  to another group's master, and what it closed is kept in the side file (``broker.acting_progress``);
- ``ReadOnlyWritePath``: a slave that does not act; every write is refused with the slave's reason, as its
  store refuses them (only replication writes a slave's store, so it stays a byte-exact replica).

The services hold the broker's one ``WritePathSwitch`` and read ``current`` on every write, so a role change is
one ``use`` in one place (``broker.acting_services``), and no service can be left writing to the old place:
before, each service had its own ``writes`` swapped by hand, and stopping to act restored only the pop engine's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from pocketmq.common.errors import StoreError
from pocketmq.store.api import PutStatus
from pocketmq.store.write_result import WriteResult

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
    from pocketmq.broker.pop.revive_queue import ReviveQueue
    from pocketmq.broker.transaction.records import DiscardReason, Resolution, Source
    from pocketmq.broker.transaction.writes import TransactionWrites
    from pocketmq.cluster.escape import Routes
    from pocketmq.common.message import MessageExt
    from pocketmq.store.api import PutResult

log = logging.getLogger(__name__)


class Replication(Protocol):
    """A SYNC_MASTER's wait for its slaves (``cluster.ha_master.HaMaster``)."""

    async def replicated(self, outcome: list[PutResult] | Awaitable[list[PutResult]]) -> list[PutResult]:
        """The results once a slave holds their records (statuses adjusted when none did in time)."""
        ...

    async def metadata_replicated(self) -> PutStatus:
        """Once a slave applied the master's metadata as it is now."""
        ...


class TimerWrites(Protocol):
    async def deliver(self, due: list[tuple[int, int]], reals: list[MessageExt | None]) -> list[WriteResult]:
        """Deliver the real messages (None: lost, only the timer is closed) of the (due ms, timer queue offset)
        pairs ``due`` and close their timers; one result per pair."""
        ...


class ReviveWrites(Protocol):
    async def put_copies(self, messages: list[MessageExt]) -> list[WriteResult]:
        """Write retry copies and dead letters; one result per message."""
        ...

    async def close(self, queue: ReviveQueue, closes: list[tuple[AckRecord, list[PopCheckpoint]]]) -> None:
        """Close each CK (its ACK) and open its rewritten CKs; raises when they were not written
        (``revive_queue.PartlyClosedError`` when the first ones were)."""
        ...


class PopWrites(Protocol):
    def forwardable(self, ck_key: str, queue_offset: int) -> bool:
        """Whether an ack or change of a handle whose CK is not open here goes on to where its CK is (a slave
        acting as master, for the CKs its pops escaped); False: the handle is invalid."""
        ...

    async def put_messages(self, messages: list[MessageExt]) -> None:
        """Dead letters of the pop path (forwarded by a client, FIFO past its max attempts)."""
        ...

    async def checkpoint(self, queue: ReviveQueue, ck: PopCheckpoint) -> int:
        """Write a pop's CK; returns the revive queue id its receipt handles name."""
        ...

    async def acks(self, queue: ReviveQueue, acks: list[AckRecord]) -> None: ...

    async def forward_acks(self, acks: list[AckRecord]) -> None:
        """Acks of handles whose CKs live elsewhere (only ``forwardable`` ones)."""
        ...

    def escaped_in_flight(self, group: str, topic: str, queue_id: int) -> list[PopCheckpoint]:
        """The CKs of pops made here that live elsewhere and are still this broker's to track (a slave acting as
        master: escaped, not past their revive time), with their acks so far; the staged gate counts them."""
        ...

    async def change(self, queue: ReviveQueue | None, old_ack: AckRecord, new_ck: PopCheckpoint) -> int:
        """Close a message in its CK and open a one-message CK with the new deadline; returns its revive queue id."""
        ...

    async def fifo_state(self) -> None:
        """After a FIFO ack or change of invisible time (which write no record)."""
        ...


class WritePath(Protocol):
    """One place all the special services write to (see the module doc)."""

    @property
    def name(self) -> str: ...  # for logs: local, escaped, read_only

    @property
    def timer(self) -> TimerWrites: ...

    @property
    def revive(self) -> ReviveWrites: ...

    @property
    def pop(self) -> PopWrites: ...

    @property
    def transaction(self) -> TransactionWrites: ...


class LocalWritePath:
    """A master's: its own store. ``replication``: the ``HaMaster`` of a SYNC_MASTER (pop acks and changes
    answer once a slave holds them, as sends do), else None."""

    name = "local"

    def __init__(self, store, topics, replication: Replication | None = None):
        from pocketmq.broker.pop.revive import LocalReviveWrites
        from pocketmq.broker.pop.revive_queue import LocalPopWrites
        from pocketmq.broker.timer.service import LocalTimerWrites
        from pocketmq.broker.transaction.writes import LocalTransactionWrites

        # Imported here: the services import this module for their types, and these live beside them.
        self.timer = LocalTimerWrites(store, topics)
        self.revive = LocalReviveWrites(store, topics)
        self.pop = LocalPopWrites(store, topics, replication)
        self.transaction = LocalTransactionWrites(store, topics)


class ReadOnlyWritePath:
    """A slave's while it does not act: every write is refused with ``reason``, as its read-only store would
    (a pop, an ack or a dead letter fails with StoreError, the timer and revive get a transient refusal)."""

    name = "read_only"

    def __init__(self, reason: str):
        self._reason = reason
        self.timer = self.revive = self.pop = self.transaction = self

    escapes = False

    def forwardable(self, ck_key: str, queue_offset: int) -> bool:
        return False  # a handle whose CK is not open here is invalid, as on a master

    def escaped_in_flight(self, group: str, topic: str, queue_id: int) -> list[PopCheckpoint]:
        return []

    def _refusal(self) -> WriteResult:
        return WriteResult.transient(PutStatus.SERVICE_NOT_AVAILABLE.value, self._reason)

    def _refuse(self, what: str) -> StoreError:
        return StoreError(f"{what}: {PutStatus.SERVICE_NOT_AVAILABLE.value} {self._reason}")

    async def deliver(self, due: list[tuple[int, int]], reals: list[MessageExt | None]) -> list[WriteResult]:
        return [self._refusal()] * len(due)

    async def put_copies(self, messages: list[MessageExt]) -> list[WriteResult]:
        return [self._refusal()] * len(messages)

    async def close(self, queue: ReviveQueue, closes: list[tuple[AckRecord, list[PopCheckpoint]]]) -> None:
        raise self._refuse(f"revive queue {queue.queue_id}")

    async def put_messages(self, messages: list[MessageExt]) -> None:
        raise self._refuse("store refused the copies")

    async def checkpoint(self, queue: ReviveQueue, ck: PopCheckpoint) -> int:
        raise self._refuse(f"revive queue {queue.queue_id}")

    async def acks(self, queue: ReviveQueue, acks: list[AckRecord]) -> None:
        raise self._refuse(f"revive queue {queue.queue_id}")

    async def forward_acks(self, acks: list[AckRecord]) -> None:
        raise self._refuse("forwarded acks")

    async def change(self, queue: ReviveQueue | None, old_ack: AckRecord, new_ck: PopCheckpoint) -> int:
        raise self._refuse(f"revive queue {queue.queue_id if queue is not None else '?'}")

    async def fifo_state(self) -> None:
        """Refused: a slave that does not act follows its master's FIFO state (the next metadata sync replaces
        its own), so an ack or change of invisible time made here would not hold, and answering OK would say it
        does. The client gets the error and the message stays in flight on the master."""
        raise self._refuse("FIFO POP state")

    def end_nowait(self, half: MessageExt, resolution: Resolution, source: Source) -> WriteResult:
        return self._refusal()

    async def discard(self, half: MessageExt, reason: DiscardReason, checks: int) -> WriteResult:
        return self._refusal()

    async def marks(self, checks: list[tuple[int, int]]) -> WriteResult:
        return self._refusal()

    async def escape(self, half: MessageExt, checks: int, routes: Routes) -> WriteResult:
        return self._refusal()


class WritePathSwitch:
    """The broker's current write path: the services read ``current`` on every write; ``use`` changes it for all
    of them at once (a slave starting and stopping to act as master)."""

    def __init__(self, path: WritePath):
        self._path = path

    @property
    def current(self) -> WritePath:
        return self._path

    def use(self, path: WritePath) -> None:
        if path is not self._path:
            log.info("event=write_path_changed from=%s to=%s", self._path.name, path.name)
        self._path = path

    def __repr__(self) -> str:
        return f"<WritePathSwitch {self._path.name}>"
