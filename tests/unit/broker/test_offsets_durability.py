"""Consumer offsets reach the disk only after the commit log records they stand on (a POP offset moves at pop
time, once its CK is appended: on disk before the CK, a power loss would skip the popped messages for good)."""

from __future__ import annotations

import json

from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.runtime.clock import ManualClock


async def test_the_offsets_file_waits_for_the_commit_log_to_be_durable(tmp_path):
    async with running_broker(tmp_path, ManualClock(), flush_interval_ms=3_600_000) as broker:
        await send(broker, "T", 3)
        await pop(broker, "G", "T")  # the CK is appended; the group's offset moves to 3
        store = broker.store
        asked = []
        durable = store.wait_durable

        async def watched(phys_offset: int, timeout_ms: int) -> bool:
            asked.append((phys_offset, store.durable_phys_offset))
            return await durable(phys_offset, timeout_ms)

        store.wait_durable = watched
        await broker._persist_offsets_durably()
        [(log_end, durable_before)] = asked
        assert log_end == store.max_phys_offset > durable_before  # the CK was not durable when asked
        assert store.durable_phys_offset >= log_end  # ... and is now, before the file was written
        saved = json.loads((broker.config.metadata_dir() / "consumer_offsets.json").read_text())
        assert saved["offsetTable"]["T@G"] == {"0": 3}


async def test_offsets_stay_unwritten_and_dirty_when_the_commit_log_cannot_be_made_durable(tmp_path):
    async with running_broker(tmp_path, ManualClock(), flush_interval_ms=3_600_000) as broker:
        await send(broker, "T", 2)
        await pop(broker, "G", "T")
        path = broker.config.metadata_dir() / "consumer_offsets.json"
        before = path.read_text() if path.exists() else None

        async def failing(phys_offset: int, timeout_ms: int) -> bool:
            return False

        broker.store.wait_durable = failing
        await broker._persist_offsets_durably()
        assert (path.read_text() if path.exists() else None) == before
        assert broker.offsets.persist()  # still dirty: the next round writes it


async def test_the_pop_state_persist_writes_offsets_behind_the_commit_log_too(tmp_path):
    async with running_broker(tmp_path, ManualClock(), flush_interval_ms=3_600_000) as broker:
        await send(broker, "T", 2)

        async def failing(phys_offset: int, timeout_ms: int) -> bool:
            return False

        broker.store.wait_durable = failing  # the CK never becomes durable: the offset must not be written
        await pop(broker, "G", "T")
        path = broker.config.metadata_dir() / "consumer_offsets.json"
        await broker.pop.persist_state()  # what the pop service's persist loop runs each round
        assert not path.exists() or "T@G" not in json.loads(path.read_text())["offsetTable"]
