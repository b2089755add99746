"""Helpers for the store tests: small segments so a few messages cross files, a message factory."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pocketmq.common.message import MessageExt
from pocketmq.store.api import FlushMode, StoreConfig

SMALL_SEGMENT_BYTES = 4096


def small_config(data_dir: Path, **overrides) -> StoreConfig:
    base = StoreConfig(
        data_dir=data_dir,
        commit_log_segment_bytes=SMALL_SEGMENT_BYTES,
        consume_queue_segment_units=8,
        flush_mode=FlushMode.ASYNC,
        flush_interval_ms=20,
        checkpoint_interval_ms=20,
        cleanup_interval_ms=3_600_000,
    )
    return dataclasses.replace(base, **overrides)


def message(
    topic: str = "orders",
    body: bytes | str = b"body",
    *,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    uniq_key: str | None = None,
    **properties: str,
) -> MessageExt:
    props = dict(properties)
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = keys
    if uniq_key:
        props["UNIQ_KEY"] = uniq_key
    return MessageExt(
        topic=topic,
        body=body.encode() if isinstance(body, str) else body,
        properties=props,
        queue_id=queue_id,
        born_timestamp_ms=1_700_000_000_000,
        born_host=("10.0.0.7", 51000),
    )
