"""Metadata that travels with the replicated records (broker/ha_metadata.py, broker/ha_slave.py): the master's
metadata version, a slave that syncs before it appends (and so before it acks), snapshot offsets that wait for
the replica to hold their CKs; and the POP side (broker/pop/revive_queue.py): acks that answer only once a
slave has them, and how far a revive queue's CKs say a group has popped."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import json

import pytest
from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.ha_metadata import OffsetsGate, apply_metadata, metadata_snapshot, metadata_version
from pocketmq.broker.ha_slave import HaSlave
from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.write_path import LocalWritePath
from pocketmq.common.errors import NotReplicatedError, RemotingError
from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.codes import HA_EPOCHS, HA_PULL_COMMIT_LOG, HA_SYNC_METADATA, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError, response_code_of, v2_code_of
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import PutStatus
from pocketmq.testing.fakes import HANG_UP, FakeNameServer, FakePeer, answer
from pocketmq.testing.polling import eventually


async def test_the_version_changes_with_topics_and_groups_and_comes_with_the_snapshot(tmp_path):
    async with running_broker(tmp_path / "m") as master, running_broker(tmp_path / "s") as slave:
        before = metadata_version(1, master.topics, master.groups)
        assert metadata_version(1, master.topics, master.groups) == before
        assert metadata_version(2, master.topics, master.groups) != before  # a restarted master
        master.topics.create_or_update(TopicConfig("new-topic", 2, 2))
        with_topic = metadata_version(1, master.topics, master.groups)
        master.groups.create_or_update(SubscriptionGroupConfig("new-group"))
        with_group = metadata_version(1, master.topics, master.groups)
        assert len({before, with_topic, with_group}) == 3

        body = metadata_snapshot(master.topics, master.groups, master.offsets, version=str(with_group), phys_offset=7)
        assert json.loads(body)["physOffset"] == 7
        changes = apply_metadata(body, slave.topics, slave.groups, slave.offsets)
        assert changes.version == str(with_group)
        assert slave.topics.get("new-topic") == master.topics.get("new-topic") and slave.groups.get("new-group")
        # an older master's snapshot has no version: the slave knows none
        older = metadata_snapshot(master.topics, master.groups, master.offsets)
        assert apply_metadata(older, slave.topics, slave.groups, slave.offsets).version is None


class FakeStore:
    def __init__(self, max_phys_offset: int = 0):
        self.max_phys_offset = max_phys_offset
        self.appended: list[tuple[int, bytes]] = []
        self.calls: list[str] = []
        self.config = dataclasses.make_dataclass("C", [("data_dir", str)])("/nowhere")

    def last_record(self):
        return None

    def corrupt_tail(self):
        return None

    async def append_replicated(self, phys_offset: int, data: bytes) -> int:
        self.calls.append("append")
        self.appended.append((phys_offset, data))
        self.max_phys_offset = phys_offset + len(data)
        return self.max_phys_offset


def offsets_table(tmp_path) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(tmp_path / "consumer_offsets.json")


def test_snapshot_offsets_wait_until_the_replica_holds_the_log_they_stand_on(tmp_path):
    store, offsets = FakeStore(100), offsets_table(tmp_path)
    gate = OffsetsGate(offsets, store)
    assert gate.offer({"T@G": {0: 5}}, 150) == 0 and offsets.query("G", "T", 0) is None  # CKs up to 150 missing
    store.max_phys_offset = 140
    assert gate.replica_grew() == 0 and offsets.query("G", "T", 0) is None
    assert gate.offer({"T@G": {0: 9}}, 160) == 0  # a newer snapshot replaces the waiting one
    store.max_phys_offset = 160
    assert gate.replica_grew() == 1 and offsets.query("G", "T", 0) == 9
    assert gate.waiting is None and gate.replica_grew() == 0
    assert gate.offer({"T@G": {0: 11}}, 160) == 1 and offsets.query("G", "T", 0) == 11  # reached: at once
    assert gate.offer({"T@G": {0: 12}}, None) == 1 and offsets.query("G", "T", 0) == 12  # an older master


async def test_offsets_of_a_snapshot_go_through_the_gate_and_a_bad_one_changes_nothing(tmp_path):
    async with running_broker(tmp_path / "s") as slave:
        gate = OffsetsGate(slave.offsets, FakeStore(0))
        body = json.dumps({"topics": [], "groups": [], "offsets": {"T@G": {"0": 4}}, "physOffset": 10}).encode()
        assert apply_metadata(body, slave.topics, slave.groups, slave.offsets, offsets_gate=gate).offsets_moved == 0
        assert gate.waiting == ({"T@G": {0: 4}}, 10)
        topics = len(slave.topics.names())
        bad = json.dumps({"topics": [], "groups": [], "offsets": {"T@G": {"0": "x"}}}).encode()
        with pytest.raises(ValueError):
            apply_metadata(bad, slave.topics, slave.groups, slave.offsets, offsets_gate=gate)
        assert len(slave.topics.names()) == topics and gate.waiting == ({"T@G": {0: 4}}, 10)


class ScriptedMaster:
    """The scripts of a fake master peer: a slave's pulls get ``pulls`` (version, records; then the master hangs
    up, which ends the slave's loop) and its metadata syncs a snapshot of the version of the last pull; the order
    of requests and appends goes into ``store.calls``."""

    def __init__(self, store: FakeStore, pulls: list[tuple[str, bytes]]):
        self.store, self.pulls = store, list(pulls)
        self.version: str | None = None
        self.synced = 0
        self.applied: list[str | None] = []  # appliedMetadataVersion of each pull

    def peer(self) -> FakePeer:
        # a master without epochs: only the metadata version is under test here
        return (
            FakePeer()
            .on(HA_EPOCHS, answer(ResponseCode.REQUEST_CODE_NOT_SUPPORTED))
            .on(HA_SYNC_METADATA, self.sync)
            .on(HA_PULL_COMMIT_LOG, self.pull)
        )

    def sync(self, request: RemotingCommand) -> RemotingCommand:
        self.store.calls.append("sync")
        self.synced += 1
        body = json.dumps({"topics": [], "groups": [], "offsets": {}, "version": self.version}).encode()
        return request.response(ResponseCode.SUCCESS, body=body)

    def pull(self, request: RemotingCommand):
        self.store.calls.append(f"pull@{request.ext_fields['physOffset']}")
        self.applied.append(request.ext_fields.get("appliedMetadataVersion"))
        if not self.pulls:
            return HANG_UP  # the test is over
        version, data = self.pulls.pop(0)
        self.version = version
        return request.response(
            ResponseCode.SUCCESS, {"physOffset": self.store.max_phys_offset, "metadataVersion": version}, body=data
        )


@contextlib.asynccontextmanager
async def following(store: FakeStore, master: ScriptedMaster, remoting, tmp_path):
    """A slave of ``store`` and the address of ``master``, served by a fake peer."""
    from pocketmq.broker.groups import SubscriptionGroupManager
    from pocketmq.broker.topics import TopicManager

    topics = TopicManager(tmp_path / "topics.json", auto_create_enabled=False, default_queue_nums=1)
    groups = SubscriptionGroupManager(tmp_path / "groups.json", auto_create=False)
    async with master.peer() as peer:
        slave = HaSlave(
            store,
            topics,
            groups,
            offsets_table(tmp_path),
            FakeNameServer().group("b", {0: peer.addr}, "c"),
            remoting,
            cluster_name="c",
            broker_name="b",
            broker_id=1,
            slave_addr="slave:1",
            transfer_max_bytes=1 << 20,
            pull_suspend_ms=0,
            lookup_interval_ms=1,
        )
        yield slave, peer.addr


async def test_a_slave_syncs_the_metadata_before_it_appends_records_of_a_new_version(tmp_path, remoting):
    store = FakeStore()
    master = ScriptedMaster(store, [("v1", b"a" * 10), ("v1", b"b" * 10), ("v2", b"c" * 10), ("v2", b"")])
    async with following(store, master, remoting, tmp_path) as (slave, master_addr):
        with pytest.raises(RemotingError):
            await slave._follow(master_addr)
    # Each new version is synced before the records that came with it are appended, so the ack of those
    # records (the next pull's offset) follows the sync; the same version again costs nothing.
    assert store.calls == [
        "pull@0",
        "sync",
        "append",
        "pull@10",
        "append",
        "pull@20",
        "sync",
        "append",
        "pull@30",
        "pull@30",
    ]
    assert master.synced == 2 and slave.metadata_version == "v2"
    # every pull names the version the slave applied (what a SYNC master's FIFO acks wait for)
    assert master.applied == [None, "v1", "v1", "v2", "v2"]


async def test_a_write_that_fails_does_not_end_replication(tmp_path, remoting):
    """A full disk under the slave (fault-harness seed 312: the replication task ended on an OSError, and the
    group ran without a replica until the slave restarted): the slave asks again, and goes on once it can write."""

    class FullOnce(FakeStore):
        async def append_replicated(self, phys_offset: int, data: bytes) -> int:
            if "full" not in self.calls:
                self.calls.append("full")
                raise OSError(errno.ENOSPC, "No space left on device")  # as saving the epochs would raise
            return await super().append_replicated(phys_offset, data)

    store = FullOnce()
    master = ScriptedMaster(store, [("v1", b"a" * 10), ("v1", b"a" * 10)])
    async with following(store, master, remoting, tmp_path) as (slave, _master_addr):
        replicating = asyncio.ensure_future(slave.run_replication())
        try:
            await eventually(lambda: store.max_phys_offset == 10, 5, "the slave appending after the failure")
        finally:
            replicating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await replicating
    assert store.calls[:4] == ["pull@0", "sync", "full", "pull@0"] and store.appended == [(0, b"a" * 10)]


async def test_a_failed_sync_appends_nothing(tmp_path, remoting):
    store = FakeStore()

    class Refusing(ScriptedMaster):
        def sync(self, request):
            return request.response(ResponseCode.SYSTEM_ERROR, remark="busy")

    async with following(store, Refusing(store, [("v1", b"a" * 10)]), remoting, tmp_path) as (slave, master_addr):
        with pytest.raises(RemoteServerError):
            await slave._follow(master_addr)
    assert store.appended == [] and slave.metadata_version is None  # the next pull asks for them again


class FakeReplication:
    """HaMaster.replicated with a fixed answer."""

    def __init__(self, status: PutStatus):
        self.status = status
        self.waited: list[int] = []

    async def replicated(self, results):
        self.waited.append(max(r.phys_offset for r in results))
        return [dataclasses.replace(r, status=self.status) for r in results]


@pytest.mark.parametrize(
    "status, code",
    [
        (PutStatus.FLUSH_SLAVE_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT),
        (PutStatus.SLAVE_NOT_AVAILABLE, ResponseCode.SLAVE_NOT_AVAILABLE),
    ],
)
async def test_an_ack_and_a_change_answer_only_once_a_slave_has_them(tmp_path, status, code):
    async with running_broker(tmp_path, ManualClock(1_000_000)) as broker:
        await send(broker, "T", 3)
        [(_, h0), (_, h1), (_, h2)] = await pop(broker, "G", "T")
        replication = FakeReplication(PutStatus.PUT_OK)
        broker.write_path.use(LocalWritePath(broker.store, broker.topics, replication))
        assert await broker.pop.ack("G", [h0]) == [None]
        assert replication.waited == [broker.store.last_record().phys_offset]  # the ACK record's
        broker.write_path.use(LocalWritePath(broker.store, broker.topics, FakeReplication(status)))
        with pytest.raises(NotReplicatedError) as refused:
            await broker.pop.ack("G", [h1])
        assert response_code_of(refused.value) == code and v2_code_of(refused.value) in (50402, 50002)
        with pytest.raises(NotReplicatedError) as unconfirmed:
            await broker.pop.change_invisible("G", h2, 30_000)
        broker.write_path.use(LocalWritePath(broker.store, broker.topics, FakeReplication(PutStatus.PUT_OK)))
        # stored on the master all the same: the acked handle is closed there, the changed one is replaced by the
        # new handle the error carries (auto renewal goes on with it)
        assert [type(e).__name__ for e in await broker.pop.ack("G", [h1, h2])] == ["InvalidReceiptHandleError"] * 2
        assert unconfirmed.value.handle.invisible_time_ms == 30_000
        assert await broker.pop.ack("G", [unconfirmed.value.handle]) == [None]


async def test_a_revive_queue_knows_how_far_its_cks_popped_this_group(tmp_path):
    async with running_broker(tmp_path, ManualClock(1_000_000)) as broker:
        await send(broker, "T", 5)
        await pop(broker, "G", "T", max_count=3)
        await pop(broker, "G", "T", max_count=1)
        queues = broker.pop.revive.queues
        elsewhere = PopCheckpoint.of_offsets("T", "G", 0, [40], 1, 1000, "another-group", queues[0].queue_id)
        await queues[0].append([elsewhere])  # escaped here: not ours
        popped_to = {}
        for queue in queues:
            queue.catch_up()
            popped_to.update(queue.popped_to)
        assert popped_to == {("G", "T", 0): 4}
