"""The special services of a slave acting as master, and the master taking them back (docs/ha.md).

``ActingServices`` (a slave): ``start()`` switches the broker's write path to the escape bridge
(``broker.write_path``, ``broker.acting_writes.EscapedWritePath``: the timer, revive and the pop engine at once),
re-applies the side file (``broker.acting_progress``: acks already kept, timers already delivered, so a restart
of the acting slave does not repeat them) and runs timer delivery, revive, the transaction service (which
escapes every pending half message to another group's master) and an offsets persister; ``stop()`` stops them and switches the write path back to the read-only one, again for all three at once. While acting,
POP on the slave works too. ``ActingMasterElection`` calls them.

Handover (``take_services_back``, run by a master with ``enable_slave_acting_master`` at start, before its own
timer and revive run): it asks each slave of its group in the name server for its acting progress
(``cluster.acting_handover``: ACTING_MASTER_HANDOVER, 30110; the slave stops acting first), appends an ACK
record for every CK the slave closed or a consumer acked there and a tombstone for every timer it delivered to
its own store, moves its consumer offsets forward to the slave's (pops and commits made on the slave), merges the slave's FIFO POP
state into its own (``FifoPopState.merge``: what the slave delivered stays in flight with its attempt and
deadline, what was acked there stays done, so a message group continues in order), takes the staged-POP
registrations the slave changed while acting over its own (registered again, unregistered) and adds the
registrations and queue origins it lacks, saves both, then confirms (ACTING_PROGRESS_APPLIED,
30111) so the slave forgets them. Its revive and timer then read those records like any others: what the
slave did is not done twice. A slave that does not answer in time is asked again (``HANDOVER_ATTEMPTS``: it
answers only once its rounds under way have ended); one that cannot be reached is skipped (logged): if it
acted, its CKs are revived and its timers delivered again by the master, at least once, never lost.

A master that was frozen or cut off long enough for its slave to act never restarts, so it never asks: the slave,
once it stops acting because the name server shows the master again and while a master has not taken what it
did (``ActingProgress.handover_due``), offers it (``offer_progress``: ACTING_PROGRESS_OFFER, 30113), and the
running master runs the same handover with that slave (``take_offered``; the ACKs reach its revive, the
tombstones its timer wheel, the offsets and FIFO state its running POP). Until then (an election period and a
few round trips) the master hands out again what the slave popped: at least once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pocketmq.broker.acting_progress import ActingProgress, parse_snapshot
from pocketmq.broker.acting_writes import EscapedWritePath
from pocketmq.broker.ha_metadata import apply_offsets
from pocketmq.broker.pop.revive_queue import ack_message
from pocketmq.broker.timer.service import tombstone
from pocketmq.common.errors import (
    ConnectTimeoutError,
    NoPermissionError,
    PocketMQError,
    RemotingTimeoutError,
    ServiceNotAvailableError,
    StoreError,
)
from pocketmq.protocol.route import MASTER_ID
from pocketmq.runtime.periodic import PeriodicTask

if TYPE_CHECKING:
    from pocketmq.broker.offsets import ConsumerOffsetManager
    from pocketmq.broker.pop.engine import PopService
    from pocketmq.broker.timer.service import TimerService
    from pocketmq.broker.transaction.service import TransactionService
    from pocketmq.broker.write_path import WritePath, WritePathSwitch
    from pocketmq.cluster.acting_handover import HandoverClient, ProgressOffer
    from pocketmq.cluster.escape import EscapeBridge
    from pocketmq.cluster.namesrv_client import NamesrvClient
    from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

# ACTING_MASTER_HANDOVER asked this many times of a slave that does not answer in time: each waits
# cluster.acting_handover.HANDOVER_TIMEOUT_S, and the master's start (its revive and timer) waits for them
HANDOVER_ATTEMPTS = 3
SLOW_STOP_MS = 1_000

# A periodic task (not started) of ``action`` every ``interval_ms``, named (``Broker.periodic``).
Periodic = Callable[[str, int, Callable[[], object]], PeriodicTask]


class ActingServices:
    """A slave's special services while it acts as master (see the module doc). ``read_only``: the write path
    while it does not act; ``periodic``: makes the offsets persister (``Broker.periodic``)."""

    def __init__(
        self,
        *,
        bridge: EscapeBridge,
        progress: ActingProgress,
        revive_topic: str,
        write_path: WritePathSwitch,
        read_only: WritePath,
        timer: TimerService,
        pop: PopService,
        transactions: TransactionService,
        offsets: ConsumerOffsetManager,
        persist_interval_ms: int,
        periodic: Periodic,
        master: ProgressOffer,
    ):
        self.bridge = bridge
        self.progress = progress
        self._escaped = EscapedWritePath(bridge, progress, revive_topic)
        self._write_path = write_path
        self._read_only = read_only
        self._timer = timer
        self._pop = pop
        self._transactions = transactions
        self._offsets = offsets
        # Pops on the acting slave move consumer offsets and the FIFO pop state (as on a master: PopService's
        # persist task); saving them as often bounds what a kill -9 of the slave hands out again.
        self._persister = periodic("acting-persist-pop-state", persist_interval_ms, self._persist_pop_state)
        self._master = master
        self._offer_failure: str | None = None  # the last offer's error, logged once while it repeats

    async def start(self) -> None:
        try:
            self.progress.record_acting()  # a master that did not restart must still take what is done from here
        except OSError as exc:
            log.warning("event=acting_progress_not_saved error=%r", exc)  # kept in memory: offered all the same
        timer, revive = self._timer, self._pop.revive
        self._write_path.use(self._escaped)  # the timer, revive and pops: all through the escape bridge
        # Registrations changed here are newer than the master's: kept for it (its own would win otherwise).
        self._pop.staged.registry.watch(self.progress.record_stages)
        timer.load_new()
        delivered = self.progress.delivered_timers()
        for queue_offset, deliver_ms in delivered:
            timer.forget_delivered(deliver_ms, queue_offset)
        acks = self.progress.acks()  # the side file parsed once, not once per revive queue
        acks_by_queue: dict[int, list] = {}
        for queue_id, ack in acks:
            acks_by_queue.setdefault(queue_id, []).append(ack)
        offsets_moved = 0
        for queue in revive.queues:
            queue.catch_up()
            for ack in acks_by_queue.get(queue.queue_id, ()):
                queue.ledger.apply_ack(ack)
            # The master's pops since the last metadata sync: their CKs are here, their offsets may not be.
            offsets_moved += queue.raise_pop_offsets(self._offsets)
        timer.start_delivery()
        self._persister.start()
        revive.start()
        await self._transactions.start()  # its progress moves past what it escapes (in the offsets handed back)
        log.info(
            "event=acting_services_started open_cks=%d pending_timers=%d acks_kept=%d timers_delivered=%d "
            "pop_offsets_moved=%d",
            sum(len(q.ledger) for q in revive.queues),
            timer.pending,
            len(acks),
            len(delivered),
            offsets_moved,
        )

    async def stop(self) -> None:
        # A returning master waits for this (its handover request has a timeout): a stop slower than
        # SLOW_STOP_MS names the step that took the time.
        steps_ms: dict[str, int] = {}

        async def step(name: str, awaitable) -> None:
            started = time.monotonic()
            await awaitable
            steps_ms[name] = int((time.monotonic() - started) * 1000)

        # Revive, transactions and the timer stop (after their round in progress) while they still write through
        # the bridge.
        await step("revive", self._pop.revive.stop())
        await step("transactions", self._transactions.stop())
        await step("timer", self._timer.stop_delivery())
        await step("persister", self._persister.stop())
        # From here every write fails again (a slave's store is read-only), pops first among them.
        self._write_path.use(self._read_only)
        # A pop still escaping its CK moves its offset when the escape returns: that offset must be in what the
        # master takes over (handover_body), or the master hands those messages out again beside the CK.
        await step("pop_settle", self._pop.settle())
        self._pop.staged.registry.watch(None)
        try:
            self._persist_pop_state()
        except OSError as exc:
            # A returning master takes this state from memory (handover_body) and the slave follows the master's
            # from then on: a full disk here must not fail the handover, or the master would hand out again what
            # was popped and acked here (a fault-harness run).
            log.warning("event=acting_pop_state_not_saved error=%r", exc)
        if sum(steps_ms.values()) >= SLOW_STOP_MS:
            log.warning(
                "event=acting_services_stop_slow total_ms=%d %s",
                sum(steps_ms.values()),
                " ".join(f"{name}_ms={ms}" for name, ms in steps_ms.items()),
            )

    def _persist_pop_state(self) -> None:
        self._offsets.persist()
        self._pop.fifo.persist()

    def handover_body(self) -> bytes:
        """What a returning master takes over (ACTING_MASTER_HANDOVER): the side file, the consumer offsets, the
        FIFO POP state and the staged-POP registrations (the last two are the slave's own while it acts)."""
        pop = self._pop
        return self.progress.snapshot(self._offsets.snapshot(), pop.fifo.to_json(), pop.staged.registry.to_json())

    @property
    def handover_due(self) -> bool:
        """Whether no master took what this slave did since it last started acting (``offer_progress``)."""
        return self.progress.handover_due

    async def offer_progress(self, master_addr: str) -> bool:
        """Offer the acting progress to the master at ``master_addr``, back without having taken it (it did not
        restart); returns whether it took it (its handover with this slave ran, ACTING_PROGRESS_APPLIED
        included). A failure is logged; the election offers again at its next check."""
        try:
            await self._master.offer(master_addr)
        except PocketMQError as exc:
            # offered at every election check (a second) while refused: a master that cannot take it (its acting
            # switched off, say) would fill the log with the same line
            failure = f"{master_addr} {exc}"
            log.log(
                logging.INFO if failure == self._offer_failure else logging.WARNING,
                "event=acting_progress_offer_failed master=%s error=%s",
                master_addr,
                exc,
            )
            self._offer_failure = failure
            return False
        self._offer_failure = None
        log.warning("event=acting_progress_offered master=%s due=%s", master_addr, self.handover_due)
        return True

    def runtime_info(self, acting: bool) -> dict[str, str]:
        return {
            "actingMaster": str(acting).lower(),
            "escapedTotal": str(self.bridge.escaped),
            "escapeFailures": str(self.bridge.failures),
            "actingProgressEntries": str(len(self.progress)),
        }

    def applied(self, version: int) -> int:
        before = len(self.progress)
        try:
            self.progress.applied(version)
        except OSError as exc:
            # Forgotten in memory (the master has them); the file keeps them until its next save, and a master
            # handed them again after a restart of this slave only appends the same ACKs and tombstones again.
            log.warning("event=acting_progress_not_saved version=%d error=%r", version, exc)
        removed = before - len(self.progress)
        log.info(
            "event=acting_progress_handed_over version=%d entries=%d left=%d", version, removed, len(self.progress)
        )
        return removed


@dataclass(frozen=True)
class ReturningMaster:
    """What a starting master takes its slaves' acting progress into (``take_services_back``)."""

    broker_name: str
    revive_topic: str
    store: MessageStore
    offsets: ConsumerOffsetManager
    pop: PopService  # its FIFO POP state and staged-POP registrations
    namesrv: NamesrvClient
    slaves: HandoverClient
    # one handover at a time: the one at start and the ones slaves offer (each takes one slave's progress)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, compare=False)


async def take_services_back(master: ReturningMaster) -> None:
    """A starting master: take over the acting progress of every slave of its group (see the module doc)."""
    try:
        slaves = await _slaves(master)
    except PocketMQError as exc:
        log.warning("event=acting_handover_skipped reason=no_cluster_info error=%s", exc)
        return
    async with master.lock:
        for broker_id, addr in slaves:
            await _take_with_retries(master, broker_id, addr)


async def take_offered(master: ReturningMaster, broker_id: int, addr: str) -> None:
    """A running master: the slave ``broker_id`` at ``addr`` offers what it did while acting (ACTING_PROGRESS_OFFER,
    see the module doc). NoPermissionError when the name server does not list it as a slave of this group (the
    master calls that address back); ServiceNotAvailableError when the handover failed (the slave offers again)."""
    if (broker_id, addr) not in await _slaves(master):
        raise NoPermissionError(f"{addr} is not slave {broker_id} of {master.broker_name} in the name server")
    async with master.lock:
        if not await _take_with_retries(master, broker_id, addr):
            raise ServiceNotAvailableError(f"the acting progress of {addr} was not taken (the master logged why)")


async def _slaves(master: ReturningMaster) -> list[tuple[int, str]]:
    """(broker id, address) of the slaves of the master's group in the name server."""
    info = await master.namesrv.cluster_info()
    group = info.broker_addr_table.get(master.broker_name)
    return sorted((bid, addr) for bid, addr in (group.broker_addrs.items() if group else ()) if bid != MASTER_ID)


async def _take_with_retries(master: ReturningMaster, broker_id: int, addr: str) -> bool:
    for attempt in range(1, HANDOVER_ATTEMPTS + 1):
        try:
            await _take_from(master, broker_id, addr)
            return True
        except RemotingTimeoutError as exc:
            # The slave answers once it has stopped acting, after the revive, timer and transaction rounds under
            # way, whose escaped writes may each wait out their own timeout; a slave that did not answer in time
            # is asked again (it answers at once when it has already stopped).
            if attempt == HANDOVER_ATTEMPTS or isinstance(exc, ConnectTimeoutError):
                _handover_failed(master.broker_name, broker_id, addr, exc)
                return False
            log.info(
                "event=acting_handover_retry slave=%s/%d addr=%s attempt=%d error=%s",
                master.broker_name,
                broker_id,
                addr,
                attempt,
                exc,
            )
        except (PocketMQError, ValueError, OSError) as exc:
            # OSError: the master could not save what it took (a full disk). It starts all the same: the slave
            # was not told the progress was applied, so it keeps it and offers it again.
            _handover_failed(master.broker_name, broker_id, addr, exc)
            return False
    return False


def _handover_failed(broker_name: str, broker_id: int, addr: str, exc: Exception) -> None:
    log.warning(
        "event=acting_handover_failed slave=%s/%d addr=%s error=%s (what it did while acting may be done "
        "again: at least once)",
        broker_name,
        broker_id,
        addr,
        exc,
    )


async def _take_from(master: ReturningMaster, broker_id: int, addr: str) -> None:
    handover = parse_snapshot(await master.slaves.take_progress(addr))
    try:
        offsets_moved = apply_offsets(handover.consumer_offsets, master.offsets)
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"consumer offsets do not parse: {exc}") from None
    fifo = master.pop.fifo
    fifo.load()  # at start, before the POP service does (merged here, saved below); a no-op once loaded
    fifo_merged = fifo.merge(handover.pop_fifo)
    fifo.persist()
    registry = master.pop.staged.registry
    # What the slave changed while acting replaces the master's entry; of the rest, what the master lacks is added.
    stages_taken = registry.apply_changes(handover.stage_changes)
    stages_added = registry.merge_missing(handover.pop_stages)
    if handover.acks or handover.timers:
        records = [ack_message(master.revive_topic, queue_id, ack) for queue_id, ack in handover.acks]
        records += [tombstone(queue_offset, deliver_ms) for queue_offset, deliver_ms in handover.timers]
        results = await master.store.put_messages(records)
        if not all(r.status.stored for r in results):
            raise StoreError(f"acting progress not stored: {results[0].status.value}")
    await master.slaves.progress_applied(addr, handover.version)
    log.warning(
        "event=acting_services_taken_back slave=%s/%d acks=%d timers=%d offsets_moved=%d "
        "fifo_queues_merged=%d pop_stages_changed=%d pop_stages_added=%d version=%d",
        master.broker_name,
        broker_id,
        len(handover.acks),
        len(handover.timers),
        offsets_moved,
        fifo_merged,
        stages_taken,
        stages_added,
        handover.version,
    )
