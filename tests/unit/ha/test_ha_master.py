"""HaMaster.serve_pull on a real store: only durable records reach a slave, a held pull asks for the flush
instead of waiting for the flush interval, and a slave whose log does not end with the master's record is
refused without its offset counting as an ack."""

from __future__ import annotations

import asyncio
import logging

import pytest
from tests.unit.store.store_helpers import BIG_SEGMENT, flip_byte, message, small_config

from pocketmq.cluster.ha_master import HaMaster
from pocketmq.store.api import PutStatus
from pocketmq.store.commit_log import CommitLog, RecordMark
from pocketmq.store.message_store import MessageStore

NO_PERIODIC_FLUSH = {"flush_interval_ms": 3_600_000, "checkpoint_interval_ms": 3_600_000}


@pytest.fixture
async def store(tmp_path):
    store = MessageStore(small_config(tmp_path / "m", **NO_PERIODIC_FLUSH))
    store.start()
    yield store
    await store.shutdown()


def ha_master(store) -> HaMaster:
    master = HaMaster(store, ack_timeout_ms=2_000, max_gap_bytes=1 << 30, slave_expire_ms=10_000)
    master.start()
    return master


async def test_unflushed_records_are_served_only_after_the_pull_asked_for_their_flush(store):
    master = ha_master(store)
    for i in range(3):
        await store.put_message(message(body=bytes(100 + i)))
    assert store.durable_phys_offset == 0
    # The flush interval is an hour: the records come within the test's timeout only because the pull asked.
    start, data = await asyncio.wait_for(master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=10_000), 5)
    assert (start, len(data)) == (0, store.max_phys_offset) and store.durable_phys_offset == store.max_phys_offset


async def test_a_held_pull_gets_a_new_record_once_it_is_durable(store):
    master = ha_master(store)
    await store.put_message(message(body=b"first"))
    await store.wait_durable(store.max_phys_offset, 5_000)
    end = store.max_phys_offset
    held = asyncio.create_task(master.serve_pull("link", "s", end, 1 << 20, suspend_ms=10_000))
    await asyncio.sleep(0)  # let the pull start waiting (a scheduling step, not a wait for time)
    assert not held.done()
    rounds = store.flush_rounds
    await store.put_message(message(body=b"second"))
    start, data = await asyncio.wait_for(held, 5)
    assert start == end and len(data) == store.max_phys_offset - end
    assert store.durable_phys_offset == store.max_phys_offset and store.flush_rounds == rounds + 1


async def test_a_caught_up_pull_answers_empty_after_its_suspend_time(store):
    master = ha_master(store)
    assert await master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=20) == (0, b"")


async def test_a_slave_with_another_last_record_is_refused_and_acks_nothing(store, caplog):
    master = ha_master(store)
    offsets = [(await store.put_message(message(body=bytes(100 + i)))).phys_offset for i in range(3)]
    await store.wait_durable(store.max_phys_offset, 5_000)
    other = RecordMark(offsets[1], (store.last_record_crc32c(offsets[1], offsets[2]) + 1) % (1 << 32))
    caplog.set_level(logging.WARNING, logger="pocketmq.cluster.ha_master")
    for _ in range(2):
        with pytest.raises(ValueError, match="diverged"):
            await master.serve_pull("link", "10.0.0.9:10911", offsets[2], 1 << 20, suspend_ms=0, slave_last=other)
    assert master.acks.slaves() == []  # its offset acknowledges nothing
    refusals = [r.getMessage() for r in caplog.records if "event=slave_refused" in r.getMessage()]
    assert len(refusals) == 1 and "slave=10.0.0.9:10911" in refusals[0]  # logged once, not at every retry
    assert await master.wait_replicated(offsets[2]) is PutStatus.SLAVE_NOT_AVAILABLE

    same = RecordMark(offsets[1], store.last_record_crc32c(offsets[1], offsets[2]))
    start, data = await master.serve_pull("link", "10.0.0.9:10911", offsets[2], 1 << 20, suspend_ms=0, slave_last=same)
    assert start == offsets[2] and len(data) == store.max_phys_offset - offsets[2]
    assert [p.acked_phys_offset for p in master.acks.slaves()] == [offsets[2]]


async def test_a_slave_whose_last_record_the_masters_recovery_found_corrupt_follows_on_its_word(tmp_path):
    config = small_config(tmp_path / "m", commit_log_segment_bytes=BIG_SEGMENT, **NO_PERIODIC_FLUSH)
    store = MessageStore(config)
    store.start()
    offsets = [(await store.put_message(message(body=bytes(100 + i)))).phys_offset for i in range(3)]
    slave_end = store.max_phys_offset
    good_copy = RecordMark(offsets[2], store.last_record_crc32c(offsets[2], slave_end))  # what its slave holds
    await store.shutdown()
    flip_byte(tmp_path / "m", offsets[2] + 2)  # the last record's frame size, after a clean stop
    store = MessageStore(config)
    store.start()
    try:
        master = ha_master(store)
        later = await store.put_message(message(body=b"later"))
        await store.wait_durable(store.max_phys_offset, 5_000)
        start, data = await master.serve_pull("link", "s", slave_end, 1 << 20, suspend_ms=0, slave_last=good_copy)
        assert start == slave_end == later.phys_offset and len(data) == store.max_phys_offset - slave_end
        # A record the master holds whole is still compared: another CRC there is refused.
        other = RecordMark(offsets[1], (store.last_record_crc32c(offsets[1], offsets[2]) + 1) % (1 << 32))
        with pytest.raises(ValueError, match="diverged"):
            await master.serve_pull("link", "t", offsets[2], 1 << 20, suspend_ms=0, slave_last=other)
    finally:
        await store.shutdown()


async def test_a_slave_ahead_of_the_master_is_refused_and_acks_nothing(store):
    master = ha_master(store)
    await store.put_message(message(body=b"only"))
    with pytest.raises(ValueError, match="beyond the master's end"):
        await master.serve_pull("link", "s", store.max_phys_offset + 1000, 1 << 20, suspend_ms=0)
    assert master.acks.slaves() == []


def test_the_pull_header_names_the_last_record_or_nothing():
    from pocketmq.common.errors import BadRequestError
    from pocketmq.protocol.request_headers import HaPullRequestHeader
    from pocketmq.server.remoting_ha import _slave_last_record

    def last_record(fields):
        return _slave_last_record(
            HaPullRequestHeader.parse({"brokerName": "b", "physOffset": "300", "maxBytes": "1024", **fields})
        )

    assert last_record({}) is None  # an empty or older slave
    assert last_record({"lastRecordPhysOffset": "200", "lastRecordCrc32c": "4294967295"}) == RecordMark(200, 0xFFFFFFFF)
    for bad in (
        {"lastRecordPhysOffset": "200"},
        {"lastRecordPhysOffset": "-1", "lastRecordCrc32c": "5"},
        {"lastRecordPhysOffset": "200", "lastRecordCrc32c": str(1 << 32)},
    ):
        with pytest.raises(BadRequestError):
            last_record(bad)


async def test_a_failed_flush_answers_the_pull_with_nothing_unflushed(tmp_path, monkeypatch):
    # A short flush interval: the group commit waits that long after a failed round (shutdown included).
    store = MessageStore(small_config(tmp_path / "m", flush_interval_ms=50, checkpoint_interval_ms=3_600_000))
    store.start()
    master = ha_master(store)
    await store.put_message(message(body=b"x"))

    def disk_error(segments):
        raise OSError("injected fsync failure")

    monkeypatch.setattr(CommitLog, "flush_segments", staticmethod(disk_error))
    # Answered at the failure, not after the 10 s suspend, and without the record the disk did not take.
    assert await asyncio.wait_for(master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=10_000), 5) == (0, b"")
    monkeypatch.undo()
    await store.shutdown()


async def test_a_deposed_master_serves_no_slave_of_a_newer_epoch_and_confirms_no_send(store):
    from pocketmq.cluster.epoch_fence import DeposedMasterError, EpochFence

    master = HaMaster(
        store, ack_timeout_ms=10_000, max_gap_bytes=1 << 30, slave_expire_ms=10_000, fence=EpochFence(3, 3)
    )
    master.start()
    assert master.epoch_fields() == {"controllerEpoch": "3"}
    master.check_slave_epoch("s", 3)
    await master.serve_pull("link", "s", 0, 1 << 20, suspend_ms=0)  # an in-sync slave at the log's start
    stored = await store.put_message(message(body=b"sync"))
    waiting = asyncio.create_task(master.wait_replicated(stored.phys_offset))
    await asyncio.sleep(0)  # the send waits for the slave's ack (a scheduling step, not a wait for time)
    assert not waiting.done()
    with pytest.raises(DeposedMasterError):
        master.check_slave_epoch("s", 4)  # the slave knows epoch 4: this master was deposed
    # the waiting send fails at once rather than after its 10 s timeout, and no later send is confirmed
    assert await asyncio.wait_for(waiting, 5) is PutStatus.FLUSH_SLAVE_TIMEOUT
    assert await master.wait_replicated(stored.phys_offset) is PutStatus.SLAVE_NOT_AVAILABLE
    with pytest.raises(DeposedMasterError):
        master.check_slave_epoch("other", 3)  # nor does a slave that has not heard of epoch 4 yet follow it


def test_without_a_controller_replication_names_no_epoch(store):
    master = ha_master(store)
    master.check_slave_epoch("s", 9)
    assert master.epoch_fields() == {}
