"""The corrupt-tail fault overwrites exactly the last bytes of a real store's records and names them."""

from __future__ import annotations

import random

from pocketmq.common.message import MessageExt
from pocketmq.common.record import encode_record
from pocketmq.store.commit_log import CommitLog
from pocketmq.testing.chaos.corruption import HitRecord, corrupt_tail

SEGMENT_BYTES = 64 * 1024


def _log_with(tmp_path, bodies: list[str]) -> tuple[CommitLog, list[int]]:
    log = CommitLog(tmp_path / "data" / "store" / "commitlog", SEGMENT_BYTES)
    records = [
        encode_record(MessageExt(topic="chaos", body=b.encode(), queue_id=0, queue_offset=i))
        for i, b in enumerate(bodies)
    ]
    return log, log.append(records)


def _valid_ends(tmp_path) -> int:
    log = CommitLog(tmp_path / "data" / "store" / "commitlog", SEGMENT_BYTES)
    try:
        frames = list(log.scan(0, log.readable_end()))  # a log not recovered yet: scan what is allocated
    finally:
        for segment in log.segments:
            segment.close()
    return frames[-1].phys_offset + frames[-1].size if frames else 0


def test_the_last_bytes_are_overwritten_and_the_records_hit_are_named(tmp_path):
    log, offsets = _log_with(tmp_path, [f"s{i}" for i in range(50)])
    end = log.max_phys_offset
    for segment in log.segments:
        segment.close()
    corruption = corrupt_tail(tmp_path / "data", 30, random.Random(1))
    assert (corruption.first_byte, corruption.data_end) == (end - 30, end)
    assert [h.body for h in corruption.hit] == ["s49"]
    assert _valid_ends(tmp_path) == offsets[49]  # the store's own scan now stops at the corrupt record
    again = corrupt_tail(tmp_path / "data", 200, random.Random(2))
    assert again.data_end == end  # the tail is the log's, not the last valid record's
    assert "s48" in [h.body for h in again.hit] and "?" in [h.body for h in again.hit]
    from_s40 = corrupt_tail(tmp_path / "data", 0, random.Random(3), from_phys_offset=offsets[40])
    assert from_s40.first_byte == offsets[40] and [h.body for h in from_s40.hit][:8] == [f"s{i}" for i in range(40, 48)]


def test_a_destroyed_record_excuses_the_messages_it_held_for_a_group():
    def held(topic: str) -> bool:
        return HitRecord(topic, "s9", 0).held_message_for("chaos", "g1")

    assert held("chaos") and held("%RETRY%g1_chaos")
    assert held("rmq_sys_wheel_timer")  # a delay message not delivered yet: never delivered to anyone
    assert not held("%RETRY%g2_chaos") and not held("rmq_sys_REVIVE_LOG_chaos")
