"""Holes: a master ships a filler of the same length for corrupt bytes, a slave stores it, keeps the queue
offsets it stands for taken, never reads it as a message, and recovery and ``verify_store`` accept it."""

from __future__ import annotations

import shutil

from store_helpers import BIG_SEGMENT, flip_byte, message

from pocketmq.store.api import GetStatus
from pocketmq.store.checkpoint import CHECKPOINT_FILE
from pocketmq.store.commit_log import FRAME_HEADER_SIZE
from pocketmq.store.hole import HOLE_MIN_SIZE, QueueSlot, encode_hole, hole_piece_end, parse_hole_slots
from pocketmq.store.verify import verify_store

BODY_BYTE = FRAME_HEADER_SIZE + 60  # a body byte of a record (the CRC32C fails, the header is intact)


def test_a_hole_names_its_slots_and_a_changed_byte_of_them_is_refused():
    slots = [QueueSlot("orders", 0, 24), QueueSlot("ünïcode", 3, 2**40)]
    data, kept = encode_hole(200, slots)
    assert len(data) == 200 and kept == slots
    assert parse_hole_slots(data, 0, 200) == tuple(slots)
    damaged = bytearray(data)
    damaged[HOLE_MIN_SIZE + 4] ^= 1
    assert parse_hole_slots(bytes(damaged), 0, 200) is None
    assert parse_hole_slots(data, 0, 12) is None  # shorter than a hole


def test_slots_that_do_not_fit_are_left_out_and_a_minimal_hole_has_none():
    slots = [QueueSlot("t" * 100, 0, i) for i in range(5)]
    data, kept = encode_hole(300, slots)  # 113 bytes a slot
    assert kept == slots[:2] and parse_hole_slots(data, 0, 300) == tuple(slots[:2])
    data, kept = encode_hole(HOLE_MIN_SIZE, slots)
    assert kept == [] and parse_hole_slots(data, 0, HOLE_MIN_SIZE) == ()


def test_a_long_stretch_goes_in_pieces_that_each_leave_room_for_a_hole():
    assert hole_piece_end(100, 300, 1000) == 300
    assert hole_piece_end(0, 1000, 400) == 400
    assert hole_piece_end(0, 410, 400) == 410 - HOLE_MIN_SIZE  # the rest is still a whole hole
    assert hole_piece_end(0, 20, 4) == 20  # too short to cut


async def _replicate(master, replica, max_bytes: int = 1 << 20) -> None:
    while replica.max_phys_offset < master.max_phys_offset:
        await replica.append_replicated(
            replica.max_phys_offset, master.read_commit_log(replica.max_phys_offset, max_bytes)
        )


async def _pair(open_store, tmp_path):
    master = await open_store(tmp_path / "m", commit_log_segment_bytes=BIG_SEGMENT)
    replica = await open_store(tmp_path / "r", commit_log_segment_bytes=BIG_SEGMENT)
    return master, replica


def _offsets(store, queue_id: int = 0) -> list[int]:
    got = store.get_messages("orders", queue_id, 0, 100, max_bytes=1 << 20)
    return [m.queue_offset for m in got.messages()]


async def test_a_slave_gets_a_hole_for_a_corrupt_master_record_and_goes_on_past_it(open_store, tmp_path):
    master, replica = await _pair(open_store, tmp_path)
    puts = [await master.put_message(message(body=f"m{i}".encode() * 20, queue_id=i % 2)) for i in range(10)]
    flip_byte(tmp_path / "m", puts[4].phys_offset + BODY_BYTE)  # queue 0, offset 2
    await _replicate(master, replica)
    assert replica.max_phys_offset == master.max_phys_offset  # phys offsets stay the same
    assert _offsets(replica) == _offsets(master) == [0, 1, 3, 4]
    assert _offsets(replica, 1) == [0, 1, 2, 3, 4]
    assert replica.max_queue_offset("orders", 0) == 5
    got = replica.get_messages("orders", 0, 2, 1)
    assert [m.queue_offset for m in got.messages()] == [3]  # the hole unit is passed over, not served
    assert replica.read_message(puts[4].phys_offset) is None
    assert replica.corruption.found_total == 1 and master.corruption.found_total == 1
    assert replica.last_record().phys_offset == puts[9].phys_offset
    later = await master.put_message(message(body=b"later", queue_id=0))
    await _replicate(master, replica)
    assert later.queue_offset == 5 and _offsets(replica)[-1] == 5


async def test_a_hole_that_is_the_last_record_of_its_queue_keeps_its_queue_offset_taken(open_store, tmp_path):
    master, replica = await _pair(open_store, tmp_path)
    puts = [await master.put_message(message(body=b"x" * 200, queue_id=i % 2)) for i in range(6)]
    flip_byte(tmp_path / "m", puts[5].phys_offset + BODY_BYTE)  # queue 1's last, also the log's last
    await _replicate(master, replica)
    assert replica.max_queue_offset("orders", 1) == master.max_queue_offset("orders", 1) == 3
    got = replica.get_messages("orders", 1, 2, 10)
    assert got.status is GetStatus.NO_MATCHED_MESSAGE and got.next_begin_offset == 3


async def test_recovery_and_verify_accept_a_hole_and_rebuild_its_units(open_store, tmp_path):
    master, replica = await _pair(open_store, tmp_path)
    puts = [await master.put_message(message(body=b"y" * 150, queue_id=i % 3)) for i in range(9)]
    flip_byte(tmp_path / "m", puts[3].phys_offset + BODY_BYTE)  # queue 0, offset 1
    flip_byte(tmp_path / "m", puts[4].phys_offset + 2)  # queue 1, offset 1, its frame size: one stretch of two
    await _replicate(master, replica)
    await replica.shutdown()
    verified = verify_store(tmp_path / "r")
    assert not verified.corrupt and verified.records_ok == 7
    assert [(h.phys_offset, h.hole) for h in verified.holes] == [
        (puts[3].phys_offset, (QueueSlot("orders", 0, 1), QueueSlot("orders", 1, 1)))
    ]
    shutil.rmtree(tmp_path / "r" / "consumequeue")  # recovery replays the whole log: the hole's units come back
    (tmp_path / "r" / CHECKPOINT_FILE).unlink()
    again = await open_store(tmp_path / "r", commit_log_segment_bytes=BIG_SEGMENT)
    assert again.max_phys_offset == master.max_phys_offset
    assert [again.max_queue_offset("orders", q) for q in range(3)] == [3, 3, 3]
    assert _offsets(again, 0) == [0, 2] and _offsets(again, 1) == [0, 2] and _offsets(again, 2) == [0, 1, 2]


async def test_a_long_corrupt_stretch_goes_in_pieces_and_the_slave_can_reconnect_inside_it(open_store, tmp_path):
    master, replica = await _pair(open_store, tmp_path)
    puts = [await master.put_message(message(body=b"z" * 400, queue_id=0)) for i in range(8)]
    for put in puts[2:6]:
        flip_byte(tmp_path / "m", put.phys_offset + 2)  # four frame sizes broken: one stretch of ~1.7 KB
    await _replicate(master, replica, max_bytes=600)
    assert replica.max_phys_offset == master.max_phys_offset
    assert _offsets(replica) == [0, 1, 6, 7] and replica.max_queue_offset("orders", 0) == 8
    # A slave whose log ends inside the stretch (between two pieces) is still the master's prefix.
    mid = puts[2].phys_offset + len(master.read_commit_log(puts[2].phys_offset, 600))
    assert puts[2].phys_offset < mid < puts[6].phys_offset
    crc = master.last_record_crc32c(puts[1].phys_offset, puts[2].phys_offset)
    assert crc is not None and master.last_record_crc32c(puts[1].phys_offset, mid) == crc


async def test_a_slave_with_the_good_copy_of_the_masters_corrupt_last_record_still_follows(open_store, tmp_path):
    master, replica = await _pair(open_store, tmp_path)
    puts = [await master.put_message(message(body=b"w" * 100)) for _ in range(3)]
    await _replicate(master, replica)
    flip_byte(tmp_path / "m", puts[2].phys_offset + BODY_BYTE)  # after the slave copied it
    last = replica.last_record()
    assert master.last_record_crc32c(last.phys_offset, replica.max_phys_offset) == last.crc32c
    assert len(replica.get_messages("orders", 0, 0, 10).records) == 3  # the slave's copy stays readable
    flip_byte(tmp_path / "m", puts[2].phys_offset + 2)  # a broken header proves nothing: refused as before
    assert master.last_record_crc32c(last.phys_offset, replica.max_phys_offset) is None


async def test_a_corrupt_stretch_found_by_recovery_is_remembered_and_a_corrupt_tail_named(open_store, tmp_path):
    master, replica = await _pair(open_store, tmp_path)
    puts = [await master.put_message(message(body=b"v" * 100)) for _ in range(4)]
    await _replicate(master, replica)
    await master.shutdown()
    await replica.shutdown()
    flip_byte(tmp_path / "m", puts[1].phys_offset + 2)  # a frame size inside the log: valid records follow
    flip_byte(tmp_path / "r", puts[3].phys_offset + 2)  # the replica's last frame size: its tail
    master = await open_store(tmp_path / "m", commit_log_segment_bytes=BIG_SEGMENT)
    replica = await open_store(tmp_path / "r", commit_log_segment_bytes=BIG_SEGMENT)
    assert master.recovered_corrupt_stretch(puts[1].phys_offset, puts[2].phys_offset)
    assert not master.recovered_corrupt_stretch(puts[1].phys_offset, puts[3].phys_offset)  # a valid record in it
    assert not master.recovered_corrupt_stretch(puts[2].phys_offset, puts[3].phys_offset)
    assert master.corrupt_tail() is None  # the stretch is not where the log ends
    assert replica.corrupt_tail() == puts[3].phys_offset
    assert await replica.truncate_tail(puts[3].phys_offset) > 0
    assert replica.corrupt_tail() is None and not replica.recovered_corrupt_stretch(puts[3].phys_offset, 1 << 20)
    await _replicate(master, replica)  # copied again
    assert _offsets(replica) == [0, 1, 2, 3] and _offsets(master) == [0, 2, 3]  # record 1 was copied before
