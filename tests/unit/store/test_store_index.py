"""Index lookups by UNIQ_KEY and KEYS: per topic, bounded, time filtered, durable."""

from __future__ import annotations

from store_helpers import message

from pocketmq.runtime.clock import ManualClock
from pocketmq.store.index import ENTRY_SIZE
from pocketmq.store.message_store import MAX_QUERY_RESULTS


async def test_query_by_uniq_key_is_per_topic(open_store):
    store = await open_store()
    await store.put_messages(
        [message(topic="a", uniq_key="id-1", body="in a"), message(topic="b", uniq_key="id-1", body="in b")]
    )
    assert [m.body for m in store.query_by_uniq_key("a", "id-1")] == [b"in a"]
    assert [m.body for m in store.query_by_uniq_key("b", "id-1")] == [b"in b"]
    assert store.query_by_uniq_key("a", "id-2") == []


async def test_query_by_key_matches_any_word_of_keys_bounded_and_newest(open_store):
    store = await open_store()
    await store.put_messages([message(keys=f"order-{i % 2} shared", body=f"{i}") for i in range(100)])
    odd = store.query_by_key("orders", "order-1", max_count=3)
    assert [m.body for m in odd] == [b"95", b"97", b"99"]
    assert len(store.query_by_key("orders", "shared", max_count=1000)) == MAX_QUERY_RESULTS
    assert store.query_by_key("orders", "order") == []  # whole words only


async def test_query_by_key_filters_by_store_time(open_store):
    clock = ManualClock(1_800_000_000_000)
    store = await open_store(clock=clock)
    for i in range(4):
        await store.put_message(message(keys="k", body=f"{i}"))
        clock.advance(10_000)
    got = store.query_by_key("orders", "k", 10, 1_800_000_010_000, 1_800_000_020_000)
    assert [m.body for m in got] == [b"1", b"2"]


async def test_index_survives_restart_from_its_files(open_store, tmp_path):
    store = await open_store(tmp_path / "s")
    await store.put_messages([message(keys="k1 k2", uniq_key=f"u{i}") for i in range(10)])
    await store.shutdown()
    files = list((tmp_path / "s" / "index").iterdir())
    assert sum(f.stat().st_size for f in files) == 10 * 3 * ENTRY_SIZE
    again = await open_store(tmp_path / "s")
    assert len(again.query_by_key("orders", "k2")) == 10
    assert again.query_by_uniq_key("orders", "u4")[0].queue_offset == 4
