"""MessageStore.truncate_tail: a running store drops its records from a boundary on, with their consume queue
units and index entries, durably (a reopen and a replication after it agree), and refuses any other offset."""

from __future__ import annotations

import json

import pytest
from store_helpers import SMALL_SEGMENT_BYTES, message, small_config

from pocketmq.common.errors import StoreError
from pocketmq.store.api import GetStatus
from pocketmq.store.message_store import MessageStore


def _bodies(store: MessageStore, topic: str, queue_id: int = 0) -> list[bytes]:
    from pocketmq.common.record import decode_record

    result = store.get_messages(topic, queue_id, 0, 1000, max_bytes=1 << 22)
    return [decode_record(r)[0].body for r in result.records]


async def _put(store: MessageStore, topic: str, body: bytes, **kw):
    result = await store.put_message(message(topic=topic, body=body, **kw))
    assert result.status.stored
    return result


async def test_the_tail_goes_with_its_queue_units_and_index_entries_and_stays_gone_after_a_reopen(open_store, tmp_path):
    store = await open_store(tmp_path / "s")
    for i in range(5):
        await _put(store, "kept", b"k%d" % i, uniq_key=f"k{i}")
    await store.wait_durable(store.max_phys_offset, 5_000)  # part of what goes is below the checkpoint too
    cut = store.max_phys_offset
    for i in range(4):
        await _put(store, "kept", b"gone%d" % i, uniq_key=f"g{i}")
        await _put(store, "only-after", b"a%d" % i, queue_id=1, uniq_key=f"a{i}")
    end = store.max_phys_offset

    assert await store.truncate_tail(cut) == end - cut

    assert store.max_phys_offset == cut and store.durable_phys_offset == cut
    assert _bodies(store, "kept") == [b"k%d" % i for i in range(5)]
    assert store.max_queue_offset("kept", 0) == 5 and store.max_queue_offset("only-after", 1) == 0
    assert store.get_messages("only-after", 1, 0, 10).status is GetStatus.NO_MESSAGE_IN_QUEUE
    assert store.query_by_uniq_key("kept", "g0") == [] and store.query_by_uniq_key("kept", "k4")[0].body == b"k4"
    last = store.last_record()
    assert last is not None and last.phys_offset < cut
    # New records continue at the cut with the next queue offsets.
    after = await _put(store, "kept", b"new", uniq_key="n")
    assert (after.phys_offset, after.queue_offset) == (cut, 5)
    await store.shutdown()

    reopened = MessageStore(small_config(tmp_path / "s"))
    report = reopened.start()
    try:
        assert report.dropped_bytes == 0
        assert _bodies(reopened, "kept") == [b"k%d" % i for i in range(5)] + [b"new"]
        assert reopened.max_queue_offset("only-after", 1) == 0
        assert reopened.query_by_uniq_key("kept", "g1") == []
    finally:
        await reopened.shutdown()


async def test_what_is_written_after_a_cut_is_verified_by_the_next_recovery(tmp_path):
    store = MessageStore(small_config(tmp_path / "s"))
    store.start()
    await _put(store, "t", b"kept")
    cut = store.max_phys_offset
    await _put(store, "t", b"gone")
    await store.shutdown()
    store = MessageStore(small_config(tmp_path / "s"))
    store.start()  # recovery verified everything: up to the end
    await store.truncate_tail(cut)
    await _put(store, "t", b"new")
    await store.shutdown()
    assert json.loads((tmp_path / "s" / "checkpoint").read_text())["verified_phys_offset"] == cut


async def test_a_cut_across_segments_deletes_the_later_segments(open_store, tmp_path):
    store = await open_store(tmp_path / "s")
    await _put(store, "t", b"first")
    cut = store.max_phys_offset
    while store.max_phys_offset < 2 * SMALL_SEGMENT_BYTES + 100:
        await _put(store, "t", bytes(900))
    assert await store.truncate_tail(cut) > SMALL_SEGMENT_BYTES
    assert sorted(p.name for p in (tmp_path / "s" / "commitlog").iterdir()) == [f"{0:020d}"]
    assert _bodies(store, "t") == [b"first"]


async def test_everything_can_go(open_store, tmp_path):
    store = await open_store(tmp_path / "s")
    for i in range(3):
        await _put(store, "t", b"x%d" % i)
    await store.truncate_tail(0)
    assert store.max_phys_offset == 0 and store.last_record() is None and store.max_queue_offset("t", 0) == 0


async def test_an_offset_inside_a_record_or_past_the_end_changes_nothing(open_store, tmp_path):
    store = await open_store(tmp_path / "s")
    first = await _put(store, "t", b"one")
    await _put(store, "t", b"two")
    end = store.max_phys_offset
    for bad in (first.phys_offset + 3, end + 10):
        with pytest.raises(StoreError, match="not a record boundary"):
            await store.truncate_tail(bad)
    assert store.max_phys_offset == end and _bodies(store, "t") == [b"one", b"two"]
    assert await store.truncate_tail(end) == 0
