"""Corrupt records: reads skip them and report them, recovery verifies what was written since the last start,
replication refuses them (a master ships a hole instead: test_store_holes.py), ``verify_store`` lists them; a write that fails for lack of room is undone."""

from __future__ import annotations

import errno
import logging
import random

import pytest
from store_helpers import BIG_SEGMENT, SMALL_SEGMENT_BYTES, flip_byte, message, small_config

from pocketmq.common.errors import StoreError
from pocketmq.common.record import RecordFormatError, decode_record, decode_records, encode_record
from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.files import load_json
from pocketmq.store.api import GetStatus, PutStatus
from pocketmq.store.checkpoint import CHECKPOINT_FILE
from pocketmq.store.commit_log import FRAME_HEADER_SIZE, CommitLog, CorruptRecordError
from pocketmq.store.hole import HOLE_MARK, QueueSlot
from pocketmq.store.integrity import BadRegion, LogLimiter, bad_regions, walk_log
from pocketmq.store.message_store import MessageStore
from pocketmq.store.segment import Segment, segment_name
from pocketmq.store.verify import verify_store


async def _fill(store, count: int = 25, queue_id: int = 0):
    return [
        await store.put_message(message(body=f"m{i}".encode() * 20, queue_id=queue_id, uniq_key=f"u{i}"))
        for i in range(count)
    ]


def _bodies(got) -> list[bytes]:
    return [m.body for m in got.messages()]


async def test_a_read_skips_a_corrupt_record_keeps_the_others_and_reports_it_once(open_store, tmp_path):
    metrics = MetricsRegistry()
    store = MessageStore(small_config(tmp_path / "s", commit_log_segment_bytes=BIG_SEGMENT), metrics=metrics)
    store.start()
    try:
        puts = await _fill(store)
        flip_byte(tmp_path / "s", puts[10].phys_offset + FRAME_HEADER_SIZE + 60)  # a body byte of offset 10
        got = store.get_messages("orders", 0, 0, 100, max_bytes=1 << 20)
        assert got.status is GetStatus.FOUND and got.next_begin_offset == 25
        assert [m.queue_offset for m in got.messages()] == [o for o in range(25) if o != 10]
        assert store.get_messages("orders", 0, 10, 1).messages()[0].queue_offset == 11  # the next valid one
        assert store.read_message(puts[10].phys_offset) is None
        assert metrics.value("pocketmq_store_corrupt_records_total", found_by="read") == 1  # once per record
        assert store.corruption.found_total == 1
    finally:
        await store.shutdown()


async def test_a_read_of_only_corrupt_records_moves_past_them(open_store, tmp_path):
    store = await open_store(tmp_path / "s", commit_log_segment_bytes=BIG_SEGMENT)
    puts = await _fill(store)
    flip_byte(tmp_path / "s", puts[24].phys_offset + 2)  # the frame size of the last record
    got = store.get_messages("orders", 0, 24, 10)
    assert got.status is GetStatus.NO_MATCHED_MESSAGE and got.next_begin_offset == 25 and not got.records
    assert len(store.get_messages("orders", 0, 0, 100, max_bytes=1 << 20).records) == 24


async def test_clean_stop_then_a_corrupt_tail_is_found_by_recovery_and_never_served(open_store, tmp_path):
    store = await open_store(tmp_path / "s", commit_log_segment_bytes=BIG_SEGMENT)
    puts = await _fill(store)
    end = store.max_phys_offset
    await store.shutdown()
    for position in range(end - 100, end):  # the last 100 bytes of the log
        flip_byte(tmp_path / "s", position)
    again = MessageStore(small_config(tmp_path / "s", commit_log_segment_bytes=BIG_SEGMENT))
    report = again.start()
    try:
        assert report.corrupt_regions == 1 and report.corrupt_bytes == end - puts[24].phys_offset
        assert report.dropped_bytes == 0  # kept in place: queue offset 24 stays taken
        got = again.get_messages("orders", 0, 0, 100, max_bytes=1 << 20)
        assert [m.queue_offset for m in got.messages()] == list(range(24)) and got.next_begin_offset == 25
        put = await again.put_message(message(body=b"after", uniq_key="after"))
        assert put.queue_offset == 25
        assert _bodies(again.get_messages("orders", 0, 24, 10)) == [b"after"]
    finally:
        await again.shutdown()
    assert load_json(tmp_path / "s" / CHECKPOINT_FILE, None)["verified_phys_offset"] == end


async def test_recovery_verifies_from_the_last_verified_point_and_resyncs_after_a_broken_header(open_store, tmp_path):
    store = await open_store(tmp_path / "s", commit_log_segment_bytes=BIG_SEGMENT)
    first = await _fill(store, 10)
    await store.shutdown()
    store = await open_store(tmp_path / "s", commit_log_segment_bytes=BIG_SEGMENT)  # verifies the 10
    second = [await store.put_message(message(body=bytes(300), queue_id=1)) for _ in range(10)]
    await store.shutdown()
    flip_byte(tmp_path / "s", first[3].phys_offset + FRAME_HEADER_SIZE + 50)  # verified before: not looked at again
    flip_byte(tmp_path / "s", second[4].phys_offset + 1)  # the frame size field: no size to trust after it
    again = MessageStore(small_config(tmp_path / "s", commit_log_segment_bytes=BIG_SEGMENT))
    report = again.start()
    try:
        assert report.corrupt_regions == 1
        assert report.corrupt_bytes == second[5].phys_offset - second[4].phys_offset  # resynced on the next frame
        queue1 = again.get_messages("orders", 1, 0, 100, max_bytes=1 << 20)
        assert [m.queue_offset for m in queue1.messages()] == [0, 1, 2, 3, 5, 6, 7, 8, 9]
        assert len(again.get_messages("orders", 0, 0, 100, max_bytes=1 << 20).records) == 9  # reads still verify
    finally:
        await again.shutdown()
    verified = verify_store(tmp_path / "s")
    assert [r.phys_offset for r in verified.bad_regions] == [first[3].phys_offset, second[4].phys_offset]
    assert verified.records_hit == {
        first[3].phys_offset: [QueueSlot("orders", 0, 3)],
        second[4].phys_offset: [QueueSlot("orders", 1, 4)],
    }
    assert verified.records_ok == 18 and verified.segments == 1


async def test_verify_store_of_a_healthy_store_with_several_segments_is_clean(open_store, tmp_path):
    store = await open_store(tmp_path / "s")
    for i in range(40):
        await store.put_message(message(body=bytes(100 + i * 13), queue_id=i % 3))
    await store.shutdown()
    verified = verify_store(tmp_path / "s")
    assert not verified.corrupt and verified.records_ok == 40 and verified.segments > 3
    before = {p.name: p.read_bytes() for p in (tmp_path / "s" / "commitlog").iterdir()}
    assert before == {p.name: p.read_bytes() for p in (tmp_path / "s" / "commitlog").iterdir()}  # read only


async def test_a_torn_tail_is_reported_by_verify_store(open_store, tmp_path):
    store = await open_store(tmp_path / "s", commit_log_segment_bytes=BIG_SEGMENT)
    puts = await _fill(store, 5)
    await store.shutdown()
    with open(tmp_path / "s" / "commitlog" / segment_name(0), "r+b") as f:
        f.seek(puts[4].phys_offset + 100)
        f.write(bytes(30))  # a hole in the last record: its tail still has non-zero bytes
    verified = verify_store(tmp_path / "s")
    assert [(r.phys_offset, r.reason) for r in verified.bad_regions] == [(puts[4].phys_offset, "crc32c_mismatch")]


async def test_replication_refuses_a_corrupt_frame_and_the_master_ships_a_hole_instead(open_store, tmp_path):
    metrics = MetricsRegistry()
    master = await open_store(tmp_path / "m", commit_log_segment_bytes=BIG_SEGMENT)
    replica = MessageStore(small_config(tmp_path / "r", commit_log_segment_bytes=BIG_SEGMENT), metrics=metrics)
    replica.start()
    try:
        puts = await _fill(master, 5)
        data = bytearray(master.read_commit_log(0, 1 << 20))
        data[puts[2].phys_offset + 30] ^= 1
        with pytest.raises(CorruptRecordError) as refused:
            await replica.append_replicated(0, bytes(data))
        assert refused.value.phys_offset == puts[2].phys_offset
        assert replica.max_phys_offset == 0  # nothing written
        assert metrics.value("pocketmq_store_corrupt_records_total", found_by="replication") == 1
        flip_byte(tmp_path / "m", puts[2].phys_offset + 30)
        served = master.read_commit_log(0, 1 << 20)
        assert len(served) == puts[2].phys_offset  # the valid frames before it
        hole = master.read_commit_log(puts[2].phys_offset, 1 << 20)  # not the bytes: a hole of their length
        assert len(hole) == puts[3].phys_offset - puts[2].phys_offset and int.from_bytes(hole[4:8]) == HOLE_MARK
        await replica.append_replicated(0, served)
        assert len(replica.get_messages("orders", 0, 0, 10).records) == 2
    finally:
        await replica.shutdown()


def test_the_log_limiter_lets_one_line_through_per_interval_and_counts_the_rest():
    limiter = LogLimiter(1000)
    assert limiter.allow(0) == (True, 0)
    assert limiter.allow(10) == (False, 0) and limiter.allow(999) == (False, 0)
    assert limiter.allow(1000) == (True, 2)
    assert limiter.allow(1500) == (False, 0)


async def test_reports_are_logged_at_most_once_per_interval(open_store, tmp_path, caplog):
    store = await open_store(tmp_path / "s", commit_log_segment_bytes=BIG_SEGMENT)
    puts = await _fill(store, 5)
    for put in puts[1:4]:
        flip_byte(tmp_path / "s", put.phys_offset + FRAME_HEADER_SIZE + 60)
    with caplog.at_level(logging.WARNING, logger="pocketmq.store.integrity"):
        for _ in range(5):
            store.get_messages("orders", 0, 0, 10)
    lines = [r.getMessage() for r in caplog.records if "store.corrupt_record" in r.getMessage()]
    assert len(lines) == 1 and "queue_offset=1" in lines[0] and "reason=crc32c_mismatch" in lines[0]
    assert store.corruption.found_total == 3


# ---- full disk ---------------------------------------------------------------------------------------


class _FullDisk:
    """A fault seam: ``Segment.write`` raises ENOSPC for files under ``part`` while armed."""

    def __init__(self, monkeypatch, part: str):
        self.armed = False
        original = Segment.write

        def write(segment, pos, data):
            if self.armed and part in segment.path.parts:
                raise OSError(errno.ENOSPC, "No space left on device")
            return original(segment, pos, data)

        monkeypatch.setattr(Segment, "write", write)


@pytest.mark.parametrize("failing_part", ["commitlog", "consumequeue"])
async def test_a_write_that_finds_the_disk_full_is_undone_and_refused(open_store, tmp_path, monkeypatch, failing_part):
    store = await open_store(tmp_path / "s")
    await _fill(store, 3)
    end, max_offset = store.max_phys_offset, store.max_queue_offset("orders", 0)
    disk = _FullDisk(monkeypatch, failing_part)
    disk.armed = True
    refused = await store.put_messages([message(body=b"x" * 100, uniq_key="refused") for _ in range(3)])
    assert {r.status for r in refused} == {PutStatus.SERVICE_NOT_AVAILABLE}
    assert refused[0].reason.startswith("disk full")
    assert (store.max_phys_offset, store.max_queue_offset("orders", 0)) == (end, max_offset)
    assert len(store.get_messages("orders", 0, 0, 10).records) == 3  # reads go on
    assert not store.query_by_uniq_key("orders", "refused")
    disk.armed = False
    accepted = await store.put_message(message(body=b"later", uniq_key="later"))
    assert accepted.status is PutStatus.PUT_OK and accepted.queue_offset == 3
    await store.shutdown()
    again = await open_store(tmp_path / "s")
    assert _bodies(again.get_messages("orders", 0, 3, 10)) == [b"later"]
    assert again.max_queue_offset("orders", 0) == 4


def test_readable_end_stops_at_the_last_written_page_of_a_sparse_segment(tmp_path):
    segment = Segment(tmp_path, 0, BIG_SEGMENT)
    try:
        assert segment.readable_end() == 0
        segment.write(10, b"x")
        assert 0 < segment.readable_end() <= 64 * 1024
        segment.write(500_000, b"y")
        assert 500_001 <= segment.readable_end() <= 500_000 + 64 * 1024
    finally:
        segment.close()


# ---- the client side's decode ------------------------------------------------------------------------


def test_decoding_a_record_with_invalid_utf8_raises_a_record_format_error():
    good = encode_record(message(topic="orders", body=b"ok"))
    bad = bytearray(good)
    topic_at = bad.index(b"orders")
    bad[topic_at] = 0xFF
    with pytest.raises(RecordFormatError, match="UTF-8"):
        decode_record(bytes(bad))
    with pytest.raises(RecordFormatError):
        decode_records(good + bytes(bad))
    assert decode_record(good)[0].body == b"ok"


@pytest.mark.parametrize("failing_part", ["commitlog", "consumequeue"])
async def test_a_replicated_write_that_finds_the_disk_full_is_undone_and_raises_a_store_error(
    open_store, tmp_path, monkeypatch, failing_part
):
    master = await open_store(tmp_path / "m")
    replica = await open_store(tmp_path / "r")
    await _fill(master, 3)
    disk = _FullDisk(monkeypatch, failing_part)
    disk.armed = True
    with pytest.raises(StoreError, match="disk full"):  # the slave's loop retries a StoreError, not an OSError
        await replica.append_replicated(0, master.read_commit_log(0, 1 << 20))
    assert replica.max_phys_offset == 0 and replica.max_queue_offset("orders", 0) == 0
    disk.armed = False
    assert await replica.append_replicated(0, master.read_commit_log(0, 1 << 20)) == master.max_phys_offset
    assert len(replica.get_messages("orders", 0, 0, 10).records) == 3


@pytest.mark.parametrize("seed", range(12))
async def test_recovery_s_fast_pass_finds_the_bad_regions_the_full_walk_finds(open_store, tmp_path, seed):
    """Several segments (blank frames at their ends), records of many sizes, a few bytes flipped anywhere."""
    rng = random.Random(seed)
    store = await open_store(tmp_path / "s")
    for i in range(60):
        await store.put_message(message(body=bytes(rng.randrange(1, 400)), queue_id=i % 3))
    end = store.max_phys_offset
    await store.shutdown()
    for _ in range(rng.randrange(1, 5)):
        flip_byte(tmp_path / "s", rng.randrange(end), SMALL_SEGMENT_BYTES)
    commit_log = CommitLog(tmp_path / "s" / "commitlog", SMALL_SEGMENT_BYTES, writable=False)
    try:
        start = commit_log.min_phys_offset
        walked = [item for item in walk_log(commit_log, start, end) if isinstance(item, BadRegion)]
        assert walked  # every flip lands in a frame: some region is bad
        assert list(bad_regions(commit_log, start, end)) == walked
        middle = commit_log.next_position(walked[0].phys_offset + walked[0].length)  # from a later frame boundary
        assert list(bad_regions(commit_log, middle, end)) == walked[1:]
    finally:
        commit_log.close()
