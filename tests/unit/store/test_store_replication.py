"""Replication API: a replica fed by read_commit_log/append_replicated reads the same as its master."""

from __future__ import annotations

import pytest
from store_helpers import SMALL_SEGMENT_BYTES, message

from pocketmq.common.errors import StoreError
from pocketmq.store.api import GetStatus
from pocketmq.store.commit_log import RecordMark
from pocketmq.store.message_store import MessageStore


async def _follow(master: MessageStore, replica: MessageStore, chunk_bytes: int) -> int:
    rounds = 0
    while replica.max_phys_offset < master.max_phys_offset:
        data = master.read_commit_log(replica.max_phys_offset, chunk_bytes)
        assert data, "a reader behind the end always gets at least one frame"
        await replica.append_replicated(replica.max_phys_offset, data)
        rounds += 1
    return rounds


def _snapshot(store: MessageStore):
    return {
        (topic, q): store.get_messages(topic, q, 0, 1000, max_bytes=1 << 20).records
        for topic, ids in store.queues().items()
        for q in ids
    }


async def test_replica_reads_the_same_as_its_master(open_store, tmp_path):
    master = await open_store(tmp_path / "m")
    replica = await open_store(tmp_path / "r")
    for i in range(60):
        await master.put_message(
            message(topic=f"t{i % 2}", body=bytes(50 + i * 7), queue_id=i % 3, uniq_key=f"u{i}", keys="all")
        )
    heard = []
    replica.add_arrival_listener(lambda *args: heard.append(args))
    assert await _follow(master, replica, chunk_bytes=700) > 3
    assert replica.max_phys_offset == master.max_phys_offset
    assert _snapshot(replica) == _snapshot(master)
    assert replica.query_by_uniq_key("t1", "u31")[0].body == bytes(50 + 31 * 7)
    assert heard
    await replica.shutdown()
    restarted = await open_store(tmp_path / "r")
    assert _snapshot(restarted) == _snapshot(master)


async def test_replica_can_start_mid_log_and_refuses_bad_data(open_store, tmp_path):
    master = await open_store(tmp_path / "m")
    for _ in range(40):
        await master.put_message(message(body=bytes(300)))
    start = master.get_messages("orders", 0, 20, 1).messages()[0].phys_offset
    replica = await open_store(tmp_path / "r")
    data = master.read_commit_log(start, 2000)
    corrupt = bytearray(data)
    corrupt[20] ^= 0xFF
    with pytest.raises(StoreError):
        await replica.append_replicated(start, bytes(corrupt))
    await replica.append_replicated(start, data)
    with pytest.raises(StoreError):
        await replica.append_replicated(start, data)  # not where the replica's log ends
    await _follow(master, replica, 2000)
    got = replica.get_messages("orders", 0, 20, 100)
    assert got.status is GetStatus.FOUND and len(got.records) == 20
    assert got.records == master.get_messages("orders", 0, 20, 100).records
    with pytest.raises(StoreError):
        replica.read_commit_log(0, 100)  # below what the replica holds
    assert master.read_commit_log(master.max_phys_offset, 100) == b""


async def test_durable_only_reads_stop_at_the_flushed_end_and_a_flush_can_be_asked_for(open_store, tmp_path):
    # No periodic flush within the test: only wait_durable can make the records durable.
    store = await open_store(tmp_path / "m", flush_interval_ms=3_600_000, checkpoint_interval_ms=3_600_000)
    for i in range(3):
        await store.put_message(message(body=bytes(100 + i)))
    assert store.durable_phys_offset == 0 < store.max_phys_offset
    assert store.read_commit_log(0, 1 << 20, durable_only=True) == b""
    rounds = store.flush_rounds
    assert await store.wait_durable(store.max_phys_offset, timeout_ms=5_000)
    assert store.flush_rounds == rounds + 1  # one group-commit round, at once (not the hour-long interval)
    assert store.durable_phys_offset == store.max_phys_offset
    assert store.read_commit_log(0, 1 << 20, durable_only=True) == store.read_commit_log(0, 1 << 20)
    await store.put_message(message(body=b"not flushed"))
    durable = store.read_commit_log(0, 1 << 20, durable_only=True)
    assert len(durable) == store.durable_phys_offset < store.max_phys_offset  # whole frames up to the flushed end


async def _copy_segments_until(master: MessageStore, replica: MessageStore, segment_base: int) -> None:
    while replica.max_phys_offset < segment_base:  # a read returns the frames of one segment at most
        end = replica.max_phys_offset
        await replica.append_replicated(end, master.read_commit_log(end, 1 << 20))
    assert replica.max_phys_offset == segment_base


def _before_a_blank_frame(store: MessageStore, offsets: list[int]) -> int:
    """The index of a record that a blank frame follows (the next one did not fit in its segment)."""
    return next(
        i
        for i in range(len(offsets) - 1)
        if offsets[i + 1] % SMALL_SEGMENT_BYTES == 0
        and offsets[i] + len(store.read_commit_log(offsets[i], 1)) + 8 <= offsets[i + 1]
    )


def _frame_crc(store: MessageStore, phys_offset: int) -> int:
    return int.from_bytes(store.read_commit_log(phys_offset, 1)[4:8], "big")


async def test_last_record_names_the_end_of_a_log_and_another_log_checks_it(open_store, tmp_path):
    master = await open_store(tmp_path / "m")
    offsets = [(await master.put_message(message(body=bytes(300 + i)))).phys_offset for i in range(60)]
    last = master.last_record()
    assert (last.phys_offset, last.crc32c) == (offsets[-1], _frame_crc(master, offsets[-1]))
    assert master.last_record_crc32c(offsets[-1], master.max_phys_offset) == last.crc32c
    assert master.last_record_crc32c(offsets[-2], master.max_phys_offset) is None  # not the last one there
    assert master.last_record_crc32c(offsets[-1] + 8, master.max_phys_offset) is None  # no frame starts there
    # A record followed by a blank frame filling its segment: a log ending at the next segment (it has the
    # blank) or right after the record (not yet) both end with that record.
    i = _before_a_blank_frame(master, offsets)
    crc = _frame_crc(master, offsets[i])
    assert master.last_record_crc32c(offsets[i], offsets[i + 1]) == crc
    record_end = offsets[i] + len(master.read_commit_log(offsets[i], 1))
    assert master.last_record_crc32c(offsets[i], record_end) == crc

    replica = await open_store(tmp_path / "r")
    assert replica.last_record() is None
    await _copy_segments_until(master, replica, offsets[i + 1])  # whole segments: the blank included
    assert replica.last_record() == RecordMark(offsets[i], crc)
    await _follow(master, replica, 1000)
    assert replica.last_record() == master.last_record()
    await master.shutdown()
    reopened = await open_store(tmp_path / "m")  # found again by walking the frame headers
    assert reopened.last_record() == last


async def test_last_record_of_a_reopened_log_ending_with_a_blank_frame(open_store, tmp_path):
    store = await open_store(tmp_path / "m")
    offsets = [(await store.put_message(message(body=bytes(300 + i)))).phys_offset for i in range(60)]
    i = _before_a_blank_frame(store, offsets)
    replica = await open_store(tmp_path / "r")
    await _copy_segments_until(store, replica, offsets[i + 1])
    await replica.shutdown()
    reopened = await open_store(tmp_path / "r")  # its log ends with the blank frame: the record is before it
    assert reopened.max_phys_offset == offsets[i + 1]
    assert reopened.last_record() == RecordMark(offsets[i], _frame_crc(store, offsets[i]))
