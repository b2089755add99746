"""The broadcasting stage offset store (client/stage_offset_store.py): records per queue, rewritten as one
file and read back by a new store (a restarted consumer)."""

from __future__ import annotations

import asyncio

from pocketmq.client.stage_offset_store import LocalFileStageOffsetStore
from pocketmq.client.stages import StageOffsetRecord
from pocketmq.common.message import MessageQueue


def test_local_records_survive_a_new_store(tmp_path):
    q0, q1 = MessageQueue("orders", "b", 0), MessageQueue("orders", "b", 1)

    async def scenario():
        store = LocalFileStageOffsetStore(tmp_path, "10.0.0.1@1", "grp")
        assert await store.read(q0) is None
        await store.write(q0, StageOffsetRecord(12, {("s", "g"): 7}))
        await store.write(q1, StageOffsetRecord(3, {("s", None): 1}))
        again = LocalFileStageOffsetStore(tmp_path, "10.0.0.1@1", "grp")
        return await again.read(q0), await again.read(q1)

    assert asyncio.run(scenario()) == (StageOffsetRecord(12, {("s", "g"): 7}), StageOffsetRecord(3, {("s", None): 1}))
