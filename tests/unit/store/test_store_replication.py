"""Replication API: a replica fed by read_commit_log/append_replicated reads the same as its master."""

from __future__ import annotations

import pytest

from pocketmq.errors import StoreError
from pocketmq.store.api import GetStatus
from pocketmq.store.message_store import MessageStore
from store_helpers import message


async def _follow(master: MessageStore, replica: MessageStore, chunk_bytes: int) -> int:
    rounds = 0
    while replica.max_phys_offset < master.max_phys_offset:
        data = master.read_commit_log(replica.max_phys_offset, chunk_bytes)
        assert data, "a reader behind the end always gets at least one frame"
        await replica.append_replicated(replica.max_phys_offset, data)
        rounds += 1
    return rounds


def _snapshot(store: MessageStore):
    return {(topic, q): store.get_messages(topic, q, 0, 1000, max_bytes=1 << 20).records
            for topic, ids in store.queues().items() for q in ids}


async def test_replica_reads_the_same_as_its_master(open_store, tmp_path):
    master = await open_store(tmp_path / "m")
    replica = await open_store(tmp_path / "r")
    for i in range(60):
        await master.put_message(message(topic=f"t{i % 2}", body=bytes(50 + i * 7), queue_id=i % 3,
                                         uniq_key=f"u{i}", keys="all"))
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
    for i in range(40):
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
