"""Helpers for the store tests: small segments so a few messages cross files, a message factory."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pocketmq.common.message import MessageExt
from pocketmq.store.api import FlushMode, StoreConfig
from pocketmq.store.segment import segment_name

SMALL_SEGMENT_BYTES = 4096
BIG_SEGMENT = 1 << 20  # every record of a test in one segment file


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


def flip_byte(data_dir: Path, phys_offset: int, segment_bytes: int = BIG_SEGMENT) -> None:
    """Corrupt one byte of the commit log under ``data_dir`` (XOR 0x5A)."""
    base = phys_offset - phys_offset % segment_bytes
    with open(Path(data_dir) / "commitlog" / segment_name(base), "r+b") as f:
        f.seek(phys_offset - base)
        byte = f.read(1)[0]
        f.seek(phys_offset - base)
        f.write(bytes([byte ^ 0x5A]))
