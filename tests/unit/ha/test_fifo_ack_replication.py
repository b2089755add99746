"""FIFO POP acks on a SYNC master answer once a slave applied a metadata snapshot holding them (docs/ha.md,
"POP acks under SYNC replication"): the metadata version and its "at least" order, the slaves' verdict, and
``HaMaster.metadata_replicated`` with held pulls on a real store."""

from __future__ import annotations

import asyncio

import pytest
from tests.unit.ha.test_ha_master import store  # noqa: F401 (fixture)
from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.write_path import LocalWritePath
from pocketmq.cluster.ha_master import HaMaster
from pocketmq.cluster.ha_state import ReplicaAcks, SyncVerdict
from pocketmq.cluster.metadata_version import MetadataVersion
from pocketmq.common.errors import BadRequestError, NotReplicatedError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.error_codes import response_code_of, v2_code_of
from pocketmq.protocol.request_headers import HaPullRequestHeader
from pocketmq.runtime.clock import ManualClock
from pocketmq.server.remoting_ha import _applied_metadata
from pocketmq.store.api import PutStatus

V = MetadataVersion


def test_a_version_reads_back_and_an_older_masters_has_no_fifo_counter():
    assert MetadataVersion.parse(str(V(17, 2, 3, 4, 5))) == V(17, 2, 3, 4, 5)
    assert MetadataVersion.parse("17.2.3.4") == V(17, 2, 3, 4, 0)
    assert MetadataVersion.parse("17.2.3") == V(17, 2, 3, 0)
    for bad in (None, "", "17.2", "17.2.3.4.5.6", "a.b.c", "1.-2.3", "1.².3"):
        assert MetadataVersion.parse(bad) is None, bad


def test_a_version_reaches_another_when_no_counter_is_behind_in_the_same_incarnation():
    needed = V(1, 5, 5, 5)
    assert V(1, 5, 5, 5).reaches(needed) and V(1, 6, 5, 9).reaches(needed)  # at least, not equal
    assert not V(1, 5, 5, 4).reaches(needed) and not V(1, 4, 9, 9).reaches(needed)
    assert not V(2, 9, 9, 9).reaches(needed)  # a restarted master's counters start again


def test_the_metadata_verdict_needs_an_in_sync_slave_that_applied_the_version():
    acks = ReplicaAcks(max_gap_bytes=100, expire_ms=1_000)
    needed = V(1, 0, 0, 3)
    assert acks.metadata_verdict(needed, 0, 0) is SyncVerdict.NO_SLAVE
    acks.heard("link", "s", 0, 0)  # a slave that says nothing (an older one) holds nothing known
    assert acks.metadata_verdict(needed, 0, 0) is SyncVerdict.WAIT
    acks.heard("link", "s", 0, 10, V(1, 0, 0, 2))
    assert acks.metadata_verdict(needed, 0, 10) is SyncVerdict.WAIT
    acks.heard("link", "s", 0, 20, V(1, 0, 0, 4))
    assert acks.metadata_verdict(needed, 0, 20) is SyncVerdict.REPLICATED
    acks.heard("link", "s", 0, 30)  # a pull without the field keeps what the slave said before
    assert acks.metadata_verdict(needed, 0, 30) is SyncVerdict.REPLICATED
    assert acks.metadata_verdict(needed, 500, 30) is SyncVerdict.NO_SLAVE  # too far behind: not in sync


def test_the_pull_header_field_is_a_version_or_a_clear_error():
    fields = {"brokerName": "b", "physOffset": "0", "maxBytes": "1024"}
    assert _applied_metadata(HaPullRequestHeader.parse(fields)) is None
    assert _applied_metadata(HaPullRequestHeader.parse({**fields, "appliedMetadataVersion": "9.1.2.3"})) == V(
        9, 1, 2, 3
    )
    with pytest.raises(BadRequestError, match="appliedMetadataVersion"):
        _applied_metadata(HaPullRequestHeader.parse({**fields, "appliedMetadataVersion": "nine"}))


class Versions:
    """The broker's metadata version, moved by the test as a FIFO ack moves it."""

    def __init__(self):
        self.now = V(1, 0, 0, 0)

    def fifo_ack(self) -> None:
        self.now = V(1, 0, 0, self.now.fifo + 1)


def ha_master(store, versions: Versions, ack_timeout_ms: int = 5_000) -> HaMaster:
    master = HaMaster(
        store,
        ack_timeout_ms=ack_timeout_ms,
        max_gap_bytes=1 << 30,
        slave_expire_ms=10_000,
        metadata_version=lambda: versions.now,
    )
    master.start()
    return master


async def test_without_a_slave_a_fifo_ack_answers_slave_not_available(store):
    versions = Versions()
    master = ha_master(store, versions)
    versions.fifo_ack()
    assert await master.metadata_replicated() is PutStatus.SLAVE_NOT_AVAILABLE


async def test_a_fifo_ack_wakes_the_held_pull_and_answers_once_the_slave_reports_it(store):
    versions = Versions()
    master = ha_master(store, versions)
    await master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=0, applied_metadata=versions.now)
    held = asyncio.create_task(
        master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=60_000, applied_metadata=versions.now)
    )
    await asyncio.sleep(0)  # let the pull start waiting (a scheduling step, not a wait for time)
    assert not held.done()
    versions.fifo_ack()
    ack = asyncio.create_task(master.metadata_replicated())
    # The held pull answers now (not after its minute): its reply names the new version, the slave syncs.
    assert await asyncio.wait_for(held, 5) == (0, b"")
    assert not ack.done()
    # A pull from a slave behind the version is not held either (the version changed between its pulls).
    assert await asyncio.wait_for(
        master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=60_000, applied_metadata=V(1, 0, 0, 0)), 5
    ) == (0, b"")
    assert not ack.done()
    synced = V(1, 0, 0, 2)  # the snapshot it applied is newer still (another ack since): at least is enough
    versions.now = synced
    pull = asyncio.create_task(master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=60_000, applied_metadata=synced))
    assert await asyncio.wait_for(ack, 5) is PutStatus.PUT_OK
    assert not pull.done()  # caught up in records and metadata: held again
    pull.cancel()


async def test_a_fifo_ack_no_slave_applies_in_time_answers_flush_slave_timeout(store):
    versions = Versions()
    master = ha_master(store, versions, ack_timeout_ms=50)
    await master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=0, applied_metadata=versions.now)
    versions.fifo_ack()
    assert await master.metadata_replicated() is PutStatus.FLUSH_SLAVE_TIMEOUT


async def test_a_slave_that_leaves_releases_the_waiting_fifo_acks_at_once(store):
    versions = Versions()
    master = ha_master(store, versions, ack_timeout_ms=600_000)
    await master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=0, applied_metadata=versions.now)
    versions.fifo_ack()
    ack = asyncio.create_task(master.metadata_replicated())
    await asyncio.sleep(0)
    master.link_closed("link")
    assert await asyncio.wait_for(ack, 5) is PutStatus.FLUSH_SLAVE_TIMEOUT


class FakeMetadataReplication:
    """HaMaster.metadata_replicated with a fixed answer; records the broker's FIFO counter at each wait."""

    def __init__(self, broker, status: PutStatus):
        self._broker = broker
        self.status = status
        self.waited_at: list[int] = []

    async def metadata_replicated(self) -> PutStatus:
        self.waited_at.append(self._broker.pop.fifo.data_version)
        return self.status


@pytest.mark.parametrize(
    "status, code",
    [
        (PutStatus.FLUSH_SLAVE_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT),
        (PutStatus.SLAVE_NOT_AVAILABLE, ResponseCode.SLAVE_NOT_AVAILABLE),
    ],
)
async def test_a_fifo_ack_and_change_wait_for_the_slave_and_pops_do_not(tmp_path, status, code):
    async with running_broker(tmp_path, ManualClock(1_000_000)) as broker:
        await send(broker, "T", 3, group_of=lambda i: f"g{i}")
        replication = FakeMetadataReplication(broker, PutStatus.PUT_OK)
        broker.write_path.use(LocalWritePath(broker.store, broker.topics, replication))
        [(_, h0), (_, h1), (_, h2)] = await pop(broker, "G", "T", fifo=True)
        assert replication.waited_at == [] and broker.pop.fifo.data_version == 0  # a pop does not wait
        assert await broker.pop.ack("G", [h0]) == [None]
        assert replication.waited_at == [1]  # after the ack counted in the version the slave must reach

        replication.status = status
        with pytest.raises(NotReplicatedError) as refused:
            await broker.pop.ack("G", [h1])
        assert response_code_of(refused.value) == code and v2_code_of(refused.value) in (50402, 50002)
        with pytest.raises(NotReplicatedError) as unconfirmed:
            await broker.pop.change_invisible("G", h2, 30_000)
        assert replication.waited_at == [1, 2, 3]
        # done on the master all the same: the acked message is acked, the changed one's new handle works
        replication.status = PutStatus.PUT_OK
        assert [type(e).__name__ for e in await broker.pop.ack("G", [h1])] == ["InvalidReceiptHandleError"]
        assert unconfirmed.value.handle.invisible_time_ms == 30_000
        assert await broker.pop.ack("G", [unconfirmed.value.handle]) == [None]
        assert broker.ha_master.metadata_version().fifo == broker.pop.fifo.data_version == 4
