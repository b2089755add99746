"""Flushing: SYNC_FLUSH group commit, FLUSH_DISK_TIMEOUT, ASYNC_FLUSH checkpoints."""

from __future__ import annotations

import asyncio
import threading

from store_helpers import message

from pocketmq.store.api import FlushMode, PutStatus
from pocketmq.store.checkpoint import Checkpoint
from pocketmq.store.commit_log import CommitLog
from pocketmq.testing.polling import eventually


async def test_sync_flush_many_concurrent_puts_share_few_fsyncs(open_store):
    store = await open_store(flush_mode=FlushMode.SYNC, commit_log_segment_bytes=1 << 20)
    results = await asyncio.gather(*(store.put_message(message(body=f"{i}", queue_id=i % 4)) for i in range(200)))
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert 1 <= store.flush_rounds < 20
    assert store.max_phys_offset <= store._group_commit.durable_phys_offset


async def test_sync_flush_times_out_when_fsync_hangs(open_store, monkeypatch):
    store = await open_store(flush_mode=FlushMode.SYNC, sync_flush_timeout_ms=50)
    release = threading.Event()
    real_flush = CommitLog.flush_segments

    def stuck_flush(segments):
        release.wait(10)
        real_flush(segments)

    monkeypatch.setattr(CommitLog, "flush_segments", staticmethod(stuck_flush))
    try:
        result = await store.put_message(message(body="slow disk"))
    finally:
        release.set()
    assert result.status is PutStatus.FLUSH_DISK_TIMEOUT and result.status.stored
    assert store.get_messages("orders", 0, 0, 1).messages()[0].body == b"slow disk"


async def test_async_flush_saves_a_checkpoint_covering_queues_and_index(open_store, tmp_path):
    store = await open_store(tmp_path / "s", flush_interval_ms=10, checkpoint_interval_ms=10)
    await store.put_messages([message(keys="k") for _ in range(5)])
    end = store.max_phys_offset
    checkpoint = Checkpoint(tmp_path / "s")
    await eventually(lambda: checkpoint.load() == end, message="checkpoint at the log end")
    assert any(p.stat().st_size for p in (tmp_path / "s" / "index").iterdir())
