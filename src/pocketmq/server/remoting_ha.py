"""Remoting handlers of master/slave replication (PocketMQ's own codes; docs/protocol.md, docs/ha.md).

- HA_PULL_COMMIT_LOG (30100), header ``brokerName``, ``brokerId``, ``slaveAddr``, ``physOffset`` (where the
  slave's commit log ends: its ack), ``maxBytes``, ``suspendMillis``. Reply header ``physOffset`` (where the
  body starts: the request's, or the master's first record for an empty slave), ``masterMaxOffset``; body:
  whole commit log records (the store's frames), empty when nothing new came within ``suspendMillis``;
  ``metadataVersion``: the master's metadata version (``broker.ha_metadata``), read after the records.
  Optional ``lastRecordPhysOffset`` and ``lastRecordCrc32c`` (the slave's last record: where its frame
  starts and its CRC32C; sent by slaves that hold a record): the master checks that its own last record
  before ``physOffset`` is that one. Optional ``appliedMetadataVersion``: the version of the last metadata
  snapshot the slave applied (a FIFO ack of a SYNC master waits for it; a slave behind the master's version
  is answered at once, not held). The body holds only records durable on the master.
  ILLEGAL_OPERATION when the slave cannot follow (diverged: its log is ahead of the master's or ends with
  another record; or behind the master's retention); NO_PERMISSION from a broker that is not a master or
  not of that broker name.
  The reply also carries ``confirmedPhysOffset`` (records below it were confirmed as replicated for SYNC
  sends; the slave keeps it, ``cluster.ha_epochs``) and ``epochTenure`` (the tenure id of the master's
  current epoch: when it changes, the slave compares epochs again).
- HA_EPOCHS (30102), header ``brokerName``, ``slaveAddr``: body ``{"epochs": [...]}``, the master's epochs
  (``cluster.ha_epochs``), reply header ``masterMaxOffset``. A slave asks before following a master and cuts
  what of its log is not the master's. REQUEST_CODE_NOT_SUPPORTED from an older PocketMQ.
- HA_SYNC_METADATA (30101), header ``brokerName``, ``slaveAddr``: body the metadata snapshot JSON of
  ``broker.ha_metadata`` (with its version, the commit log end and the service state of
  ``broker.ha_services``).
- Under a controller (``cluster.epoch_fence``) the three requests above carry ``controllerEpoch``, the
  newest epoch the slave knows, and their replies the master's epoch: a master of an older epoch answers
  NO_PERMISSION (deposed), and a slave refuses a reply from one.
- ACTING_MASTER_HANDOVER (30110), header ``brokerName``, ``masterAddr``: a slave stops acting as master and
  answers its acting progress (``broker.acting_progress``: acks, timers, consumer offsets, FIFO POP state,
  staged-POP registrations); ACTING_PROGRESS_APPLIED (30111), plus ``version``:
  the master stored it, the slave forgets it. NO_PERMISSION from a broker that is not a slave of that name.
- ACTING_PROGRESS_OFFER (30113), header ``brokerName``, ``brokerId``, ``slaveAddr``: a slave that acted while
  its master was frozen or cut off (the master never restarted, so it never asked) offers its progress; the
  master checks that the name server lists that slave, runs the handover above with it and answers SUCCESS once
  it took the progress, SERVICE_NOT_AVAILABLE when it could not (the slave offers again), NO_PERMISSION from a
  broker that is not that master, does not take acting progress, or does not know that slave.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pocketmq.broker.ha_metadata import metadata_snapshot
from pocketmq.cluster.metadata_version import MetadataVersion
from pocketmq.common.errors import BadRequestError, NoPermissionError, ReplicationRefusedError
from pocketmq.protocol.codes import (
    ACTING_MASTER_HANDOVER,
    ACTING_PROGRESS_APPLIED,
    ACTING_PROGRESS_OFFER,
    HA_EPOCHS,
    HA_PULL_COMMIT_LOG,
    HA_SYNC_METADATA,
    ResponseCode,
)
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.request_headers import (
    ActingProgressAppliedRequestHeader,
    ActingProgressOfferRequestHeader,
    BrokerNameRequestHeader,
    HaPullRequestHeader,
)
from pocketmq.protocol.transport import RemotingConnection, RequestRouter
from pocketmq.store.commit_log import RecordMark

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

_HA_LINK_HOOK = "pocketmq.ha.link_hook"


class HaHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def register(self, router: RequestRouter) -> None:
        router.register(HA_PULL_COMMIT_LOG, self.pull_commit_log)
        router.register(HA_SYNC_METADATA, self.sync_metadata)
        router.register(HA_EPOCHS, self.epochs)
        router.register(ACTING_MASTER_HANDOVER, self.acting_master_handover)
        router.register(ACTING_PROGRESS_APPLIED, self.acting_progress_applied)
        router.register(ACTING_PROGRESS_OFFER, self.acting_progress_offer)

    def _own(self, h: BrokerNameRequestHeader, part, what: str):
        """``part`` of this broker when the request names its broker name and ``part`` exists here."""
        broker = self._broker
        name = h.broker_name
        if part is None or name != broker.broker_name:
            raise NoPermissionError(
                f"{broker.broker_addr} is not {what} of {name!r} (it is {broker.broker_name}/{broker.config.broker_id})"
            )
        return part

    def _master(self, h: BrokerNameRequestHeader):
        """This broker's HaMaster, when it is the master named and (under a controller) not deposed."""
        master = self._own(h, self._broker.ha_master, "the master")
        master.check_slave_epoch(h.slave_addr or "", h.controller_epoch)
        return master

    async def pull_commit_log(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = HaPullRequestHeader.parse(request.ext_fields)
        master = self._master(h)
        if _HA_LINK_HOOK not in conn.attributes:  # a slave's link ends with its connection
            conn.attributes[_HA_LINK_HOOK] = True
            conn.on_close(master.link_closed)
        try:
            start, data = await master.serve_pull(
                conn,
                h.slave_addr or conn.remote_address,
                h.phys_offset,
                h.max_bytes,
                h.suspend_ms,
                _slave_last_record(h),
                _applied_metadata(h),
            )
        except ValueError as exc:
            raise ReplicationRefusedError(str(exc)) from None
        # The version is read after the records: every record of the body was stored under it or an older one.
        fields = {
            "physOffset": start,
            "masterMaxOffset": self._broker.store.max_phys_offset,
            "metadataVersion": str(master.metadata_version()),
            "confirmedPhysOffset": master.epochs.confirmed_phys_offset,
            **master.epoch_fields(),
        }
        if master.epochs.current is not None:
            fields["epochTenure"] = master.epochs.current.tenure_id
        return request.response(ResponseCode.SUCCESS, fields, body=data)

    async def epochs(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        master = self._master(BrokerNameRequestHeader.parse(request.ext_fields))
        fields = {"masterMaxOffset": self._broker.store.max_phys_offset, **master.epoch_fields()}
        return request.response(ResponseCode.SUCCESS, fields, body=master.epochs.to_body())

    async def sync_metadata(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        master = self._master(BrokerNameRequestHeader.parse(request.ext_fields))
        broker = self._broker
        return request.response(
            ResponseCode.SUCCESS,
            master.epoch_fields(),
            body=metadata_snapshot(
                broker.topics,
                broker.groups,
                broker.offsets,
                broker.services.tables,
                version=str(master.metadata_version()),
                phys_offset=broker.store.max_phys_offset,
                auth=broker.access.table.to_json(),
            ),
        )

    async def acting_master_handover(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = BrokerNameRequestHeader.parse(request.ext_fields)
        acting = self._own(h, self._broker.acting, "a slave")
        await acting.election.master_back()
        log.warning("event=acting_master_handover master=%s pending=%r", h.master_addr or "", acting.services.progress)
        return request.response(ResponseCode.SUCCESS, body=acting.services.handover_body())

    async def acting_progress_applied(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ActingProgressAppliedRequestHeader.parse(request.ext_fields)
        self._own(h, self._broker.acting, "a slave").services.applied(h.version)
        return request.response(ResponseCode.SUCCESS)

    async def acting_progress_offer(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ActingProgressOfferRequestHeader.parse(request.ext_fields)
        self._master(h)
        await self._broker.take_offered_progress(h.broker_id, h.slave_addr)
        return request.response(ResponseCode.SUCCESS)


def _applied_metadata(h: HaPullRequestHeader) -> MetadataVersion | None:
    if h.applied_metadata_version is None:
        return None
    version = MetadataVersion.parse(h.applied_metadata_version)
    if version is None:
        raise BadRequestError(
            f"header field appliedMetadataVersion {h.applied_metadata_version!r} is not a "
            "metadata version (incarnation.topics.groups[.fifo])"
        )
    return version


def _slave_last_record(h: HaPullRequestHeader) -> RecordMark | None:
    """The slave's last record from HA_PULL_COMMIT_LOG (both fields or neither; the header checked their
    ranges); None from an empty slave or an older one."""
    phys_offset, crc = h.last_record_phys_offset, h.last_record_crc32c
    if phys_offset is None and crc is None:
        return None
    if phys_offset is None or crc is None:
        raise BadRequestError("header fields lastRecordPhysOffset and lastRecordCrc32c come together")
    return RecordMark(phys_offset, crc)
