"""Puts and reads: queue offsets, get_messages statuses and filters, time search, limits, listeners, repr."""

from __future__ import annotations

from store_helpers import message

from pocketmq.common.record import decode_record
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import GetStatus, PutStatus
from pocketmq.store.tags import tag_hash_code


async def test_put_assigns_queue_offsets_per_queue_and_get_reads_them_back(open_store):
    store = await open_store()
    results = await store.put_messages([message(body=f"m{i}", queue_id=i % 2) for i in range(6)])
    assert [r.queue_offset for r in results] == [0, 0, 1, 1, 2, 2]
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert len({r.phys_offset for r in results}) == 6
    got = store.get_messages("orders", 1, 0, 10)
    assert got.status is GetStatus.FOUND
    assert [m.body for m in got.messages()] == [b"m1", b"m3", b"m5"]
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (3, 0, 3)
    first = decode_record(got.records[0])[0]
    assert first.store_host == ("127.0.0.1", 10911) and first.born_host == ("10.0.0.7", 51000)
    assert store.read_message(results[1].phys_offset).body == b"m1"
    assert results[1].offset_msg_id == first.offset_msg_id


async def test_get_statuses_at_the_bounds(open_store):
    store = await open_store()
    assert store.get_messages("orders", 0, 0, 1).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    await store.put_messages([message(body="a"), message(body="b")])
    assert store.get_messages("orders", 0, 2, 1).status is GetStatus.OFFSET_OVERFLOW_ONE
    badly = store.get_messages("orders", 0, 9, 1)
    assert badly.status is GetStatus.OFFSET_OVERFLOW_BADLY and badly.next_begin_offset == 0
    one = store.get_messages("orders", 0, 1, 5)
    assert [m.body for m in one.messages()] == [b"b"] and one.next_begin_offset == 2


async def test_max_count_and_max_bytes_bound_a_get_but_one_record_always_comes(open_store):
    store = await open_store()
    await store.put_messages([message(body=b"x" * 300) for _ in range(10)])
    assert len(store.get_messages("orders", 0, 0, 4).records) == 4
    by_bytes = store.get_messages("orders", 0, 0, 10, max_bytes=1000)
    assert len(by_bytes.records) == 2 and by_bytes.next_begin_offset == 2
    assert len(store.get_messages("orders", 0, 0, 10, max_bytes=1).records) == 1


async def test_tag_filter_skips_units_by_hash_code(open_store):
    store = await open_store()
    await store.put_messages([message(body=f"{i}", tags="red" if i % 3 == 0 else "blue") for i in range(9)])
    await store.put_message(message(body="untagged"))
    red = tag_hash_code("red")
    got = store.get_messages("orders", 0, 0, 32, tag_filter=lambda code: code == red)
    assert [m.body for m in got.messages()] == [b"0", b"3", b"6"]
    assert got.next_begin_offset == 10
    none = store.get_messages("orders", 0, 7, 32, tag_filter=lambda code: code == red)
    assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 10
    untagged = store.get_messages("orders", 0, 9, 1, tag_filter=lambda code: code == 0)
    assert untagged.messages()[0].body == b"untagged"


async def test_record_filter_passes_over_the_records_it_drops_and_max_count_counts_kept_ones(open_store, monkeypatch):
    store = await open_store()
    await store.put_messages([message(body=f"{i}") for i in range(10)])
    even = lambda record: int(decode_record(record)[0].body) % 2 == 0  # noqa: E731
    got = store.get_messages("orders", 0, 0, 3, record_filter=even)
    assert [m.body for m in got.messages()] == [b"0", b"2", b"4"] and got.next_begin_offset == 5
    none = store.get_messages("orders", 0, 9, 32, record_filter=even)
    assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 10
    # a get tests a bounded number of records, then says how far it got: the next one goes on from there
    monkeypatch.setattr("pocketmq.store.message_store.MAX_RECORD_FILTER_READS", 3)
    bounded = store.get_messages("orders", 0, 0, 32, record_filter=lambda record: False)
    assert bounded.status is GetStatus.NO_MATCHED_MESSAGE and bounded.next_begin_offset == 3


async def test_queue_offset_by_time_is_the_first_record_at_or_after_it(open_store):
    clock = ManualClock(1_800_000_000_000)
    store = await open_store(clock=clock)
    for _ in range(5):
        await store.put_message(message())
        clock.advance(1000)
    base = 1_800_000_000_000
    assert store.queue_offset_by_time("orders", 0, base - 1) == 0
    assert store.queue_offset_by_time("orders", 0, base + 2000) == 2
    assert store.queue_offset_by_time("orders", 0, base + 2500) == 3
    assert store.queue_offset_by_time("orders", 0, base + 99_000) == 5
    assert store.earliest_store_time_ms("orders", 0) == base
    assert store.earliest_store_time_ms("orders", 7) == -1
    assert store.queue_offset_by_time("nothing", 0, base) == 0


async def test_oversized_and_bad_records_are_refused_whole_batch(open_store):
    store = await open_store(max_message_bytes=1024)
    refused = await store.put_messages([message(body=b"ok"), message(body=b"x" * 2000)])
    assert [r.status for r in refused] == [PutStatus.MESSAGE_ILLEGAL] * 2
    assert store.max_queue_offset("orders", 0) == 0 and store.max_phys_offset == 0
    props = await store.put_message(message(big="v" * 40_000))
    assert props.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    topic = await store.put_message(message(topic="t" * 200))
    assert topic.status is PutStatus.MESSAGE_ILLEGAL
    larger_than_segment = await open_store(max_message_bytes=1 << 20, data_dir=store.config.data_dir.parent / "b")
    assert (await larger_than_segment.put_message(message(body=b"y" * 5000))).status is PutStatus.MESSAGE_ILLEGAL
    ok = await store.put_message(message(body=b"fine"))
    assert ok.status is PutStatus.PUT_OK and ok.queue_offset == 0


async def test_arrival_listener_hears_once_per_queue_per_batch(open_store):
    store = await open_store()
    heard = []
    store.add_arrival_listener(lambda topic, queue_id, max_offset: heard.append((topic, queue_id, max_offset)))
    await store.put_messages([message(queue_id=0), message(queue_id=0), message(queue_id=3)])
    assert sorted(heard) == [("orders", 0, 2), ("orders", 3, 1)]


async def test_delete_topic_forgets_its_queues(open_store):
    store = await open_store()
    await store.put_messages([message(topic="a", queue_id=q) for q in range(3)] + [message(topic="b")])
    assert store.queues() == {"a": [0, 1, 2], "b": [0]}
    store.delete_topic("a")
    assert store.queues() == {"b": [0]}
    assert not (store.config.data_dir / "consumequeue" / "a").exists()
    assert store.get_messages("a", 0, 0, 1).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    assert (await store.put_message(message(topic="a"))).queue_offset == 0


async def test_repr_shows_state_and_a_closed_store_refuses_puts(open_store):
    store = await open_store()
    await store.put_message(message())
    assert "running" in repr(store) and "max_phys=" in repr(store) and "queues=1" in repr(store)
    await store.shutdown()
    assert "closed" in repr(store)
    assert (await store.put_message(message())).status is PutStatus.SERVICE_NOT_AVAILABLE
