"""The slave side of replication: find the group's master, follow its commit log, copy its metadata.

The master is the broker with id 0 of this slave's cluster and broker name in the name server's cluster
info (looked up again after any failure, so a master that comes back on another address is found).

Before following a master the slave compares replication epochs (HA_EPOCHS, ``ha_epochs.plan``): a log
that went on where the master's did not is cut back to the common prefix (``MessageStore.truncate_tail``,
logged with the bytes dropped), unless that would drop records confirmed as replicated, then it is refused
and kept. It compares again when the master's tenure changes (``epochTenure`` of a pull reply).

Under a controller (``cluster.epoch_fence``) every request names the newest controller epoch the slave knows
and every reply must name a master epoch not older than it: a reply of a deposed master is refused before any
of it is used (records, epochs to cut by, metadata).

Replication loop: HA_PULL_COMMIT_LOG from ``store.max_phys_offset`` (its ack, see ``ha_state``), append the
answer with ``append_replicated`` at the phys offset the master names, and ask again at once; a caught-up
slave's pull is held by the master up to ``pull_suspend_ms``; it waits ``lookup_interval_ms`` after a failure
(no master in the route, connection refused, timeout, refused by the master, a full disk) and logs a failure once
per outage,
not once per attempt. Metadata: ``sync_metadata_once`` (the broker runs it as a periodic task, every
``ha_metadata_sync_interval_ms``, failures by ``runtime.periodic``'s policy) sends HA_SYNC_METADATA, applied by
``ha_metadata.apply_metadata`` (the service state by ``services``, an ``ha_services.ServiceStateFollower``;
consumer offsets through an ``ha_metadata.OffsetsGate``). A pull reply
naming another metadata version than the one applied syncs the metadata before its records are appended, so
the next pull's ack covers them only with their topics and groups (``ha_metadata``); every pull names the
version applied (``appliedMetadataVersion``: a SYNC master's FIFO acks wait for it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pocketmq.broker.ha_metadata import OffsetsGate, apply_metadata
from pocketmq.broker.ha_services import ServiceStateFollower
from pocketmq.cluster.epoch_fence import EPOCH_FIELD, EpochFence
from pocketmq.cluster.ha_epochs import Epoch, EpochFile, PlanKind, adopt, epochs_of_body, plan
from pocketmq.common.errors import PocketMQError, ReplicationRefusedError
from pocketmq.protocol.codes import HA_EPOCHS, HA_PULL_COMMIT_LOG, HA_SYNC_METADATA, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError, response_code_of
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import BrokerNameRequestHeader, HaPullRequestHeader
from pocketmq.protocol.transport import RemotingClient
from pocketmq.runtime.clock import Clock, SystemClock

log = logging.getLogger(__name__)


class HaSlave:
    def __init__(
        self,
        store,
        topics,
        groups,
        offsets,
        namesrv,
        remoting: RemotingClient,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        slave_addr: str,
        transfer_max_bytes: int,
        pull_suspend_ms: int,
        lookup_interval_ms: int,
        request_timeout_ms: int = 3_000,
        services: ServiceStateFollower | None = None,
        epochs: EpochFile | None = None,
        after_cut: Callable[[], None] | None = None,
        clock: Clock | None = None,
        auth=None,
        fence: EpochFence | None = None,
    ):
        self.fence = fence  # under a controller: records and cuts only from a master of the newest epoch
        self._auth = auth  # the AuthTable that follows the master's users and ACLs
        self._store = store
        self._clock = clock if clock is not None else SystemClock()
        # When the master last answered a request of ours (monotonic ms; a refusal is an answer too): the acting
        # master election's sign that a master missing from a restarted name server is alive.
        self.master_answered_ms: float | None = None
        self._after_cut = after_cut  # state built from the log outside the store (the timer wheel) follows a cut
        self.epochs = epochs if epochs is not None else EpochFile(store.config.data_dir)
        self._tables = (topics, groups, offsets)
        self._services = services
        self._namesrv = namesrv
        self._remoting = remoting
        self._cluster_name = cluster_name
        self._broker_name = broker_name
        self._broker_id = broker_id
        self._slave_addr = slave_addr
        self._transfer_max_bytes = transfer_max_bytes
        self._pull_suspend_ms = pull_suspend_ms
        self._lookup_interval_s = lookup_interval_ms / 1000
        self._request_timeout_s = request_timeout_ms / 1000
        self.master_addr: str | None = None
        self.metadata_version: str | None = None  # the master's version of the last snapshot applied
        self._metadata_lock = asyncio.Lock()  # one sync at a time: an older snapshot never lands after a newer
        self._offsets_gate = OffsetsGate(offsets, store)
        self._failing: str | None = None  # the replication failure logged for the current outage

    # -- replication --------------------------------------------------------------------------------------------
    async def run_replication(self) -> None:
        while True:
            try:
                master = await self._master()
                await self._follow(master)
            except (PocketMQError, ValueError, OSError) as exc:  # OSError: saving the epochs on a full disk
                self._failed(exc)
                await asyncio.sleep(self._lookup_interval_s)

    async def _follow(self, master: str) -> None:
        """Follow ``master`` until a failure (raised) or a new tenure of it (returns: compare epochs again)."""
        await self._cut_corrupt_tail(master)
        master_epochs = await self._align(master)
        tenure = master_epochs[-1].tenure_id if master_epochs else None
        while True:
            last = self._store.last_record()  # the master checks our log ends with its record there
            fields = HaPullRequestHeader.ext_fields(
                broker_name=self._broker_name,
                broker_id=self._broker_id,
                slave_addr=self._slave_addr,
                phys_offset=self._store.max_phys_offset,
                max_bytes=self._transfer_max_bytes,
                suspend_ms=self._pull_suspend_ms,
                last_record_phys_offset=last.phys_offset if last is not None else None,
                last_record_crc32c=last.crc32c if last is not None else None,
                # what we hold: FIFO acks on a SYNC master wait for it
                applied_metadata_version=self.metadata_version,
                controller_epoch=self._epoch_known(),
            )
            request = RemotingCommand.request(HA_PULL_COMMIT_LOG, fields)
            response = await self._invoke(master, request, self._pull_suspend_ms / 1000 + self._request_timeout_s)
            version = response.ext_fields.get("metadataVersion")
            if version is not None and version != self.metadata_version:
                await self.sync_metadata_once(master)  # the records' topics and groups before our ack of them
            if response.body:
                start = int(response.ext_fields["physOffset"])
                await self._store.append_replicated(start, response.body)
                self._offsets_gate.replica_grew()
            self._recovered(master)
            self.epochs.confirmed(int(response.ext_fields.get("confirmedPhysOffset", 0)))
            if master_epochs:
                self.epochs.replace(adopt(master_epochs, self._store.max_phys_offset))
            if response.ext_fields.get("epochTenure", tenure) != tenure:
                log.info("event=master_epoch_changed broker=%s master=%s", self._broker_name, master)
                return

    async def _align(self, master: str) -> list[Epoch]:
        """Compare epochs with ``master`` and cut what of our log is not its history; the master's epochs
        ([] from an older master: then only the continuity check guards)."""
        request = RemotingCommand.request(HA_EPOCHS, self._named())
        try:
            response = await self._invoke(master, request, self._request_timeout_s)
        except RemoteServerError as exc:
            if exc.response_code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                return []
            raise
        master_epochs = epochs_of_body(response.body)
        store = self._store
        decision = plan(
            self.epochs.epochs,
            store.min_phys_offset,
            store.max_phys_offset,
            master_epochs,
            int(response.ext_fields["masterMaxOffset"]),
            self.epochs.confirmed_phys_offset,
        )
        if decision.kind is PlanKind.REFUSE:
            raise ReplicationRefusedError(f"not truncated: {decision.reason}")
        if decision.kind is PlanKind.TRUNCATE:
            old_end = store.max_phys_offset
            dropped, clamped = await self._cut(decision.truncate_to)
            log.warning(
                "event=ha_replica_truncated broker=%s master=%s from_phys_offset=%d old_max_phys_offset=%d "
                "dropped_bytes=%d confirmed_phys_offset=%d consumer_offsets_moved_back=%d reason=records past "
                "the common prefix of the master's epochs were never the master's",
                self._broker_name,
                master,
                decision.truncate_to,
                old_end,
                dropped,
                self.epochs.confirmed_phys_offset,
                clamped,
            )
        return master_epochs

    async def _cut_corrupt_tail(self, master: str) -> None:
        """Cut the corrupt stretch that ends our log, if recovery found one: every record of a slave's log
        came from a master, so copying them again from ``master`` heals it (kept, its last frame would name no
        record of the master's and the master would refuse us as diverged)."""
        corrupt_from = self._store.corrupt_tail()
        if corrupt_from is None:
            return
        old_end = self._store.max_phys_offset
        dropped, clamped = await self._cut(corrupt_from)
        log.warning(
            "event=ha_replica_truncated broker=%s master=%s from_phys_offset=%d old_max_phys_offset=%d "
            "dropped_bytes=%d consumer_offsets_moved_back=%d reason=the log ended with a corrupt stretch; its "
            "records are copied again from the master",
            self._broker_name,
            master,
            corrupt_from,
            old_end,
            dropped,
            clamped,
        )

    async def _cut(self, phys_offset: int) -> tuple[int, int]:
        """Cut our log at ``phys_offset`` with what is built on it: epochs, consumer offsets past the new queue
        ends, the timer wheel. Returns (bytes dropped, consumer offsets moved back)."""
        dropped = await self._store.truncate_tail(phys_offset)
        self.epochs.cut(phys_offset)
        clamped = clamp_offsets_to_queue_ends(self._tables[2], self._store)
        if self._after_cut is not None:
            self._after_cut()
        return dropped, clamped

    # -- metadata -----------------------------------------------------------------------------------------------
    async def sync_metadata_once(self, master: str | None = None) -> None:
        async with self._metadata_lock:
            master = master or await self._master()
            response = await self._invoke(
                master,
                RemotingCommand.request(HA_SYNC_METADATA, self._named()),
                self._request_timeout_s,
            )
            changes = apply_metadata(response.body, *self._tables, self._services, self._offsets_gate, auth=self._auth)
            self.metadata_version = changes.version
        if changes.any:
            log.info("event=metadata_synced master=%s version=%s changes=%s", master, changes.version, changes)

    # -- shared -------------------------------------------------------------------------------------------------
    def _named(self) -> dict[str, str]:
        """The header of HA_EPOCHS and HA_SYNC_METADATA: this slave's broker name and address."""
        return BrokerNameRequestHeader.ext_fields(
            broker_name=self._broker_name, slave_addr=self._slave_addr, controller_epoch=self._epoch_known()
        )

    def _epoch_known(self) -> int | None:
        return self.fence.newest_seen if self.fence is not None else None

    async def _master(self) -> str:
        """The group master's address from the name server; PocketMQError when there is none now."""
        info = await self._namesrv.cluster_info()
        group = info.broker_addr_table.get(self._broker_name)
        addr = group.master_addr if group and group.cluster == self._cluster_name else None
        if addr is None:
            raise PocketMQError(f"no master of {self._cluster_name}/{self._broker_name} in the name server's routes")
        if addr != self.master_addr:
            log.info("event=master_found broker=%s master=%s", self._broker_name, addr)
            self.master_addr = addr
        return addr

    async def _invoke(self, master: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        try:
            response = await self._remoting.invoke(master, request, timeout_s)
        except PocketMQError:
            self._remoting.drop(master)
            raise
        self.master_answered_ms = self._clock.monotonic_ms()
        expect_success(response)
        if self.fence is not None:  # before anything of the reply is used: records, epochs to cut by, metadata
            self.fence.check_master(int(response.ext_fields.get(EPOCH_FIELD, 0)))
        return response

    def _failed(self, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        diverged = (  # the master refused our log, or we refused to cut ours
            isinstance(exc, PocketMQError) and response_code_of(exc) == ResponseCode.ILLEGAL_OPERATION
        )
        if self._failing != reason and diverged:
            log.error(
                "event=ha_replica_diverged broker=%s master=%s data_dir=%s error=%s action=make this broker "
                "the master, or stop it, clear its data directory and start it again to copy the master",
                self._broker_name,
                self.master_addr,
                self._store.config.data_dir,
                reason,
            )
        elif self._failing != reason:
            log.warning(
                "event=ha_replication_failed broker=%s master=%s error=%s retry_in_ms=%d",
                self._broker_name,
                self.master_addr,
                reason,
                int(self._lookup_interval_s * 1000),
            )
        self._failing = reason

    def _recovered(self, master: str) -> None:
        if self._failing is not None:
            self._failing = None
            log.info(
                "event=ha_replication_recovered broker=%s master=%s phys_offset=%d",
                self._broker_name,
                master,
                self._store.max_phys_offset,
            )

    def __repr__(self) -> str:
        return (
            f"<HaSlave {self._broker_name}/{self._broker_id} master={self.master_addr} "
            f"phys_offset={self._store.max_phys_offset}>"
        )


def clamp_offsets_to_queue_ends(offsets, store) -> int:
    """After a cut: consumer offsets past a queue's new end counted records that are gone; set them back to the
    end (the metadata sync moves offsets forward only, so it would not). Returns how many moved."""
    moved = 0
    for key, queues in offsets.snapshot().items():
        topic, _, group = key.partition("@")
        for queue_id, queue_offset in queues.items():
            end = store.max_queue_offset(topic, int(queue_id))
            if queue_offset > end:
                offsets.reset(group, topic, int(queue_id), end)
                moved += 1
    if moved:
        offsets.persist()
    return moved
