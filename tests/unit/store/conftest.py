"""Store test fixtures (helpers live in store_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_helpers import small_config

from pocketmq.store.message_store import MessageStore


@pytest.fixture
async def open_store(tmp_path):
    """``await open_store(**config_overrides)`` -> a started store, shut down at the end of the test."""
    stores = []

    async def factory(data_dir: Path | None = None, clock=None, disk_usage=None, **overrides) -> MessageStore:
        config = small_config(data_dir or tmp_path / "store", **overrides)
        extra = {"disk_usage": disk_usage} if disk_usage is not None else {}
        store = MessageStore(config, clock, **extra) if clock is not None else MessageStore(config, **extra)
        store.start()
        stores.append(store)
        return store

    yield factory
    for store in stores:
        await store.shutdown()
