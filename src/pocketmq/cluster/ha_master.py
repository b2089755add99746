"""The master side of replication: serve slaves' commit-log pulls and hold SYNC_MASTER sends until acked.

A slave's HA_PULL_COMMIT_LOG asks for the commit log from the phys offset where its own log ends (which is
also its ack, see ``ha_state``) and names its last record; the master refuses a slave whose log is not a
prefix of its own (``replication_start``), except that a last record inside a stretch the master's recovery
found corrupt is taken on the slave's word (the slave aligned epochs with the master first, so the same tenure
wrote both copies, and the slave's is the good one). It answers with whole records read by ``read_commit_log``, only
those durable on its disk (``pull_step``), a hole of the same length in place of a record that fails its
CRC32C (``store/hole.py``: the slave stays aligned and replication goes on): a record a power loss could take from the master never reaches a
slave, so the master never writes a different record where a slave holds one. When the slave is caught up
the pull is held up to its ``suspendMillis``: until new records arrive (long polling) and are flushed, and
it asks the store's group commit for that flush at once (under ASYNC_FLUSH too, rather than waiting for the
flush interval; one fsync covers every pull and put waiting), so a SYNC send is acknowledged about one fsync
and one round trip after it is stored.

Epochs (``cluster.ha_epochs``): the master serves its epoch list (HA_EPOCHS) and raises its confirmed offset
(``epochs.confirmed``) whenever a SYNC send is answered as replicated; pull replies carry it, so a slave never
cuts records that a producer may have been told are on two brokers.

Fencing (``cluster.epoch_fence``, under a controller only): every slave request names the newest controller
epoch the slave knows; a master of an older epoch refuses it before the slave's offset counts as an ack, and
fails the sends waiting for one, so a deposed master never gets a SYNC send acknowledged.

``replicated(outcome)`` is what the send path of a SYNC_MASTER awaits: the store's results, with PUT_OK
turned into FLUSH_SLAVE_TIMEOUT (no ack within ``ack_timeout_ms``, or the slave left while waiting) or
SLAVE_NOT_AVAILABLE (no slave in sync when the send arrived).

``metadata_replicated()`` is what a FIFO ack (or change of invisible time) of a SYNC_MASTER awaits: it writes
no record, only the FIFO POP state, which reaches a slave with a metadata snapshot. The ack made the master's
metadata version (``cluster.metadata_version``) new; the master answers pulls at once while the slave's applied
version (``appliedMetadataVersion`` of its pull) is not the master's, and wakes held pulls when the version
changes, so the slave learns of it within a round trip, syncs, and says so in its next pull. The ack then
answers PUT_OK, or FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE as a send would.

Replication lag per slave (``slave_lags``; runtime info ``haSlaveLag`` and the gauges
``pocketmq_ha_slave_lag_bytes`` / ``pocketmq_ha_slave_lag_seconds``): bytes = the master's log end minus the
slave's ack; seconds = the age (store timestamp to now) of the oldest record the slave has not acked, 0 when
it has everything. Computed when asked (a scrape, a runtime-info request), one small read per slave.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import itertools
import json
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from pocketmq.cluster.epoch_fence import EPOCH_FIELD, DeposedMasterError, EpochFence
from pocketmq.cluster.ha_epochs import EpochFile
from pocketmq.cluster.ha_state import PullStep, ReplicaAcks, SyncVerdict, pull_step, replication_start
from pocketmq.cluster.metadata_version import MetadataVersion
from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.store.api import PutStatus
from pocketmq.store.commit_log import RecordMark

log = logging.getLogger(__name__)

MAX_REFUSALS_REMEMBERED = 64  # slaves whose refusal is logged once, not at every retry


@dataclass(frozen=True, slots=True)
class SlaveLag:
    slave_addr: str
    lag_bytes: int
    lag_ms: int  # age of the oldest record the slave has not acked; 0 when it has them all


def replication_lag(
    slave_addr: str, acked_phys_offset: int, master_max_phys_offset: int, oldest_unacked_store_ms: int, now_ms: int
) -> SlaveLag:
    """A slave's lag; ``oldest_unacked_store_ms`` is -1 when no record follows its ack (or it is unreadable)."""
    lag_bytes = max(0, master_max_phys_offset - acked_phys_offset)
    lag_ms = max(0, now_ms - oldest_unacked_store_ms) if lag_bytes and oldest_unacked_store_ms >= 0 else 0
    return SlaveLag(slave_addr, lag_bytes, lag_ms)


class HaMaster:
    def __init__(
        self,
        store,
        *,
        clock: Clock = SYSTEM_CLOCK,
        ack_timeout_ms: int,
        max_gap_bytes: int,
        slave_expire_ms: int,
        metrics: MetricsRegistry | None = None,
        epochs: EpochFile | None = None,
        metadata_version: Callable[[], MetadataVersion] = lambda: MetadataVersion(0, 0, 0),
        fence: EpochFence | None = None,
    ):
        self._store = store
        self.fence = fence  # under a controller: a deposed master serves no slave and confirms no send
        self.metadata_version = metadata_version  # the broker's metadata version now
        # The master's epochs (served to slaves) and confirmed offset: raised when a SYNC send is answered
        # replicated, so a slave never cuts what a producer may have been told is on two brokers.
        self.epochs = epochs if epochs is not None else EpochFile(store.config.data_dir)
        self._metrics = metrics if metrics is not None else MetricsRegistry()
        self._clock = clock
        self._ack_timeout_ms = ack_timeout_ms
        self.acks = ReplicaAcks(max_gap_bytes=max_gap_bytes, expire_ms=slave_expire_ms)
        # Made by the first held pull and dropped when set: a put with no pull waiting costs nothing.
        self._arrived: asyncio.Event | None = None
        self._waiters: list[tuple[int, int, asyncio.Future]] = []  # heap of (record phys offset, seq, future)
        self._metadata_waiters: list[tuple[MetadataVersion, asyncio.Future]] = []  # FIFO acks: (version, future)
        self._seq = itertools.count()
        self._refusals: dict[str, str] = {}  # slave address -> why it was refused (logged once)

    def start(self) -> None:
        self._store.add_arrival_listener(self._on_arrival)
        self._metrics.add_collector(self._collect_lag)

    def _on_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        self._wake_pulls()

    def metadata_changed(self) -> None:
        """Metadata that comes with no record changed (users, ACLs): held pulls answer now with the new version,
        so their slaves sync at once instead of at the next periodic sync."""
        self._wake_pulls()

    def _wake_pulls(self) -> None:
        if self._arrived is not None:
            self._arrived.set()
            self._arrived = None

    # -- slaves -------------------------------------------------------------------------------------------------
    async def serve_pull(
        self,
        link: Hashable,
        slave_addr: str,
        slave_phys_offset: int,
        max_bytes: int,
        suspend_ms: int,
        slave_last: RecordMark | None = None,
        applied_metadata: MetadataVersion | None = None,
    ) -> tuple[int, bytes]:
        """(start phys offset, whole durable records from there); ValueError when the slave cannot follow this
        log (then it is not counted as a slave: its offset acknowledges nothing). ``applied_metadata``: the
        slave's (None from a slave that does not say)."""
        store = self._store
        there = store.last_record_crc32c(slave_last.phys_offset, slave_phys_offset) if slave_last else None
        if there is None and slave_last and store.recovered_corrupt_stretch(slave_last.phys_offset, slave_phys_offset):
            # We lost the bytes of the slave's last record (our recovery found them corrupt), so we cannot compare
            # it; the slave aligned its epochs with ours before pulling, so one tenure of ours wrote both copies:
            # the slave holds the good one.
            there = slave_last.crc32c
        try:
            start = replication_start(
                slave_phys_offset, store.min_phys_offset, store.max_phys_offset, slave_last, there
            )
        except ValueError as exc:
            self._refused(slave_addr, str(exc))
            raise
        self._refusals.pop(slave_addr, None)
        now_ms = self._clock.now_ms()
        if self.acks.heard(link, slave_addr, slave_phys_offset, now_ms, applied_metadata):
            log.info(
                "event=slave_connected slave=%s phys_offset=%d master_max_phys_offset=%d",
                slave_addr,
                slave_phys_offset,
                store.max_phys_offset,
            )
        self._release_acked()
        self._release_metadata()
        data = store.read_commit_log(start, max_bytes, durable_only=True)
        held_at = self.metadata_version()
        # A slave behind our metadata is answered at once: the reply's version makes it sync (a FIFO ack waits).
        if not data and suspend_ms > 0 and (applied_metadata is None or applied_metadata.reaches(held_at)):
            try:
                async with asyncio.timeout(suspend_ms / 1000):
                    data = await self._durable_records(start, max_bytes, suspend_ms, held_at)
            except TimeoutError:
                data = store.read_commit_log(start, max_bytes, durable_only=True)
        return start, data

    async def _durable_records(self, start: int, max_bytes: int, suspend_ms: int, held_at: MetadataVersion) -> bytes:
        """Hold a caught-up pull until records after ``start`` are durable, or the metadata version is no longer
        ``held_at`` (the caller bounds the wait)."""
        store = self._store
        while True:
            if self.metadata_version() != held_at:
                return store.read_commit_log(start, max_bytes, durable_only=True)
            step = pull_step(start, store.durable_phys_offset, store.max_phys_offset)
            if step is PullStep.SERVE:
                return store.read_commit_log(start, max_bytes, durable_only=True)
            if step is PullStep.AWAIT_FLUSH:
                if not await store.wait_durable(store.max_phys_offset, suspend_ms):
                    # A failed flush or a stopping store: answer what is durable; the slave asks again (and a
                    # failing disk's next round waits out the group commit's retry delay).
                    return store.read_commit_log(start, max_bytes, durable_only=True)
                continue
            if self._arrived is None:
                self._arrived = asyncio.Event()
            await self._arrived.wait()

    def check_slave_epoch(self, slave_addr: str, slave_epoch: int | None) -> None:
        """A slave's request names the newest controller epoch it knows: DeposedMasterError when this master's
        is older (its sends waiting for an ack fail at once: none can come from a slave of a newer epoch)."""
        if self.fence is None:
            return
        try:
            self.fence.check_slave(slave_epoch)
        except DeposedMasterError as exc:
            self._refused(slave_addr, str(exc))
            self._fail_waiters()
            raise

    def epoch_fields(self) -> dict[str, str]:
        """The reply fields naming this master's controller epoch (none without a controller)."""
        return {EPOCH_FIELD: str(self.fence.master_epoch)} if self.fence is not None else {}

    def _deposed(self) -> bool:
        return self.fence is not None and self.fence.deposed()

    def _refused(self, slave_addr: str, reason: str) -> None:
        if self._refusals.get(slave_addr) == reason:
            return
        if len(self._refusals) >= MAX_REFUSALS_REMEMBERED:
            self._refusals.pop(next(iter(self._refusals)))
        self._refusals[slave_addr] = reason
        log.warning("event=slave_refused slave=%s reason=%s", slave_addr, reason)

    def link_closed(self, link: Hashable) -> None:
        progress = self.acks.gone(link)
        if progress is not None:
            log.warning(
                "event=slave_disconnected slave=%s acked_phys_offset=%d",
                progress.slave_addr,
                progress.acked_phys_offset,
            )
            self._release_when_no_slave()

    def in_sync_slave_addrs(self) -> frozenset[str]:
        """The advertised addresses of the slaves in sync now (the controller's in-sync set)."""
        now_ms = self._clock.now_ms()
        return frozenset(p.slave_addr for p in self.acks.in_sync(self._store.max_phys_offset, now_ms))

    def _release_when_no_slave(self) -> None:
        """Sends waiting on an ack that can no longer come answer now (the record may or may not be there)."""
        if self.acks.in_sync(self._store.max_phys_offset, self._clock.now_ms()):
            return
        self._fail_waiters()

    def _fail_waiters(self) -> None:
        for future in [w[2] for w in self._waiters] + [w[1] for w in self._metadata_waiters]:
            if not future.done():
                future.set_result(PutStatus.FLUSH_SLAVE_TIMEOUT)
        self._waiters.clear()
        self._metadata_waiters.clear()

    def _release_acked(self) -> None:
        acked = self.acks.best_acked_phys_offset
        while self._waiters and self._waiters[0][0] < acked:
            future = heapq.heappop(self._waiters)[2]
            if not future.done():
                self.epochs.confirmed(acked)
                future.set_result(PutStatus.PUT_OK)

    def _release_metadata(self) -> None:
        if not self._metadata_waiters:
            return
        now_ms, master_max = self._clock.now_ms(), self._store.max_phys_offset
        waiting = []
        for needed, future in self._metadata_waiters:
            if future.done():
                continue  # timed out
            if self.acks.metadata_verdict(needed, master_max, now_ms) is SyncVerdict.REPLICATED:
                future.set_result(PutStatus.PUT_OK)
            else:
                waiting.append((needed, future))
        self._metadata_waiters = waiting

    # -- SYNC_MASTER sends --------------------------------------------------------------------------------------
    async def replicated(self, outcome) -> list:
        """The send path's results (a list, or an awaitable of one) once replicated, statuses adjusted."""
        results = outcome if isinstance(outcome, list) else await outcome
        stored = [r.phys_offset for r in results if r.status is PutStatus.PUT_OK]
        if not stored:
            return results
        status = await self.wait_replicated(max(stored))
        if status is PutStatus.PUT_OK:
            return results
        return [dataclasses.replace(r, status=status) if r.status is PutStatus.PUT_OK else r for r in results]

    async def wait_replicated(self, record_phys_offset: int) -> PutStatus:
        now_ms = self._expire_slaves()
        verdict = self.acks.verdict(record_phys_offset, self._store.max_phys_offset, now_ms)
        if verdict is SyncVerdict.NO_SLAVE or self._deposed():
            return PutStatus.SLAVE_NOT_AVAILABLE
        if verdict is SyncVerdict.REPLICATED:
            self.epochs.confirmed(self.acks.best_acked_phys_offset)
            return PutStatus.PUT_OK
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (record_phys_offset, next(self._seq), future))
        return await self._ack_of(future)

    async def metadata_replicated(self) -> PutStatus:
        """Once a slave applied the master's metadata as it is now (a FIFO ack just changed it): PUT_OK, or
        SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT as ``wait_replicated``."""
        needed = self.metadata_version()
        self._wake_pulls()  # a held pull answers now with the new version: its slave syncs at once
        verdict = self.acks.metadata_verdict(needed, self._store.max_phys_offset, self._expire_slaves())
        if verdict is SyncVerdict.NO_SLAVE or self._deposed():
            return PutStatus.SLAVE_NOT_AVAILABLE
        if verdict is SyncVerdict.REPLICATED:
            return PutStatus.PUT_OK
        future = asyncio.get_running_loop().create_future()
        self._metadata_waiters.append((needed, future))
        return await self._ack_of(future)

    def _expire_slaves(self) -> int:
        """Forget silent slaves; returns now."""
        now_ms = self._clock.now_ms()
        for progress in self.acks.expire(now_ms):
            log.warning(
                "event=slave_expired slave=%s acked_phys_offset=%d", progress.slave_addr, progress.acked_phys_offset
            )
        return now_ms

    async def _ack_of(self, future: asyncio.Future) -> PutStatus:
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._ack_timeout_ms / 1000)
        except TimeoutError:
            future.cancel()  # dropped once an ack passes it or the slaves leave
            return PutStatus.FLUSH_SLAVE_TIMEOUT

    def slave_lags(self) -> list[SlaveLag]:
        """Each connected slave's lag (the largest when one address has several links), by address."""
        master_max = self._store.max_phys_offset
        now_ms = self._clock.now_ms()
        lags: dict[str, SlaveLag] = {}
        for p in self.acks.slaves():
            oldest_ms = (
                self._store.first_store_timestamp_ms(p.acked_phys_offset) if p.acked_phys_offset < master_max else -1
            )
            lag = replication_lag(p.slave_addr, p.acked_phys_offset, master_max, oldest_ms, now_ms)
            if p.slave_addr not in lags or lag.lag_bytes > lags[p.slave_addr].lag_bytes:
                lags[p.slave_addr] = lag
        return [lags[addr] for addr in sorted(lags)]

    def _collect_lag(self) -> None:
        lag_bytes = self._metrics.gauge(
            "pocketmq_ha_slave_lag_bytes", "Commit log bytes the master holds that the slave has not acked", ("slave",)
        )
        lag_seconds = self._metrics.gauge(
            "pocketmq_ha_slave_lag_seconds", "Age of the oldest record the slave has not acked", ("slave",)
        )
        lag_bytes.clear()  # a slave that left has no lag to show
        lag_seconds.clear()
        for lag in self.slave_lags():
            lag_bytes.set(lag.lag_bytes, slave=lag.slave_addr)
            lag_seconds.set(lag.lag_ms / 1000, slave=lag.slave_addr)

    def runtime_info(self) -> dict[str, str]:
        slaves = self.acks.slaves()
        lags = self.slave_lags()
        return {
            "haConnections": str(len(slaves)),
            "haSlaves": ",".join(f"{p.slave_addr}@{p.acked_phys_offset}" for p in slaves),
            "haMaxLagBytes": str(max((lag.lag_bytes for lag in lags), default=0)),
            "haSlaveLag": json.dumps(
                {lag.slave_addr: {"lagBytes": lag.lag_bytes, "lagMs": lag.lag_ms} for lag in lags}
            ),
        }

    def __repr__(self) -> str:
        return (
            f"<HaMaster {self.acks!r} waiting_sends={len(self._waiters)} "
            f"waiting_fifo_acks={len(self._metadata_waiters)}>"
        )
