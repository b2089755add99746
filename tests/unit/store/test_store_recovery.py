"""Recovery: a store cut or corrupted at any byte of its tail comes back with exactly the valid prefix, and
its consume queues and index match the commit log it kept."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_helpers import SMALL_SEGMENT_BYTES, message, small_config

from pocketmq.common.record import encode_record
from pocketmq.runtime.files import atomic_write_json
from pocketmq.store.checkpoint import CHECKPOINT_FILE
from pocketmq.store.commit_log import FRAME_HEADER_SIZE
from pocketmq.store.message_store import MessageStore
from pocketmq.store.segment import segment_name

QUEUES = 3
MESSAGES = 45


@dataclass(frozen=True)
class Written:
    uniq_key: str
    body: bytes
    queue_id: int
    queue_offset: int
    phys_offset: int
    frame_end: int


def _body(i: int) -> bytes:
    return bytes([65 + i % 26]) * (40 + (i * 97) % 420)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A cleanly shut down store with MESSAGES records over several 4 KiB segments, and what was written."""
    data_dir = tmp_path_factory.mktemp("template") / "store"

    async def build():
        store = MessageStore(small_config(data_dir))
        store.start()
        written = []
        for i in range(MESSAGES):
            msg = message(body=_body(i), queue_id=i % QUEUES, tags=f"tag{i % 2}", keys=f"k{i} all", uniq_key=f"u{i}")
            put = await store.put_message(msg)
            written.append(
                Written(
                    f"u{i}",
                    msg.body,
                    msg.queue_id,
                    put.queue_offset,
                    put.phys_offset,
                    put.phys_offset + put.store_size + FRAME_HEADER_SIZE,
                )
            )
        await store.shutdown()
        return written

    written = asyncio.run(build())
    assert written[-1].phys_offset > 3 * SMALL_SEGMENT_BYTES  # the tail crosses segment files
    return data_dir, written


def _blank_headers(written: list[Written]) -> list[int]:
    """Start positions of the blank frames that fill segment tails."""
    return [
        prev.frame_end
        for prev, nxt in zip(written, written[1:])
        if nxt.phys_offset - prev.frame_end >= FRAME_HEADER_SIZE
    ]


def _mutate(commit_log_dir: Path, position: int, cut: bool) -> None:
    base = position - position % SMALL_SEGMENT_BYTES
    path = commit_log_dir / segment_name(base)
    rel = position - base
    with open(path, "r+b") as f:
        if cut:  # a torn write: nothing from ``position`` on reached the disk
            f.truncate(rel)
            f.truncate(SMALL_SEGMENT_BYTES)
        else:
            f.seek(rel)
            byte = f.read(1)[0]
            f.seek(rel)
            f.write(bytes([byte ^ 0xFF]))
    if cut:
        for later in sorted(commit_log_dir.iterdir()):
            if int(later.name) > base:
                os.truncate(later, 0)
                os.truncate(later, SMALL_SEGMENT_BYTES)


def _expected_survivors(written: list[Written], position: int, cut: bool) -> list[Written]:
    if cut:
        return [w for w in written if w.frame_end <= position]
    for w in written:
        if w.phys_offset <= position < w.frame_end:
            return [s for s in written if s.frame_end <= w.phys_offset]
    for start in _blank_headers(written):
        if start <= position < start + FRAME_HEADER_SIZE:
            return [s for s in written if s.frame_end <= start]
    return written  # blank padding, a skipped segment tail or the zeros after the log: nothing of value hit


async def _read_all(store: MessageStore, queue_id: int):
    got = store.get_messages("orders", queue_id, 0, 1000, max_bytes=1 << 20)
    return got.messages() if got.records else []


@given(data=st.data(), cut=st.booleans(), keep_checkpoint=st.booleans())
def test_recovery_keeps_exactly_the_valid_prefix(template, data, cut, keep_checkpoint):
    template_dir, written = template
    log_end = written[-1].frame_end
    position = data.draw(st.integers(min_value=0, max_value=log_end + 16), label="position")
    survivors = _expected_survivors(written, position, cut)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "store"
        shutil.copytree(template_dir, data_dir)
        _mutate(data_dir / "commitlog", position, cut)
        checkpoint_path = data_dir / CHECKPOINT_FILE
        if keep_checkpoint:  # an older checkpoint, at a frame boundary before the damage
            boundaries = [0] + [w.frame_end for w in survivors]
            atomic_write_json(
                checkpoint_path, {"phys_offset": data.draw(st.sampled_from(boundaries)), "saved_at_ms": 0}
            )
        else:
            checkpoint_path.unlink()
        warnings = _Captured()
        recovery_log = logging.getLogger("pocketmq.store.recovery")
        recovery_log.addHandler(warnings)
        try:
            asyncio.run(_check_recovered(data_dir, written, survivors, cut))
        finally:
            recovery_log.removeHandler(warnings)
        if not cut and len(survivors) < len(written):
            assert any(m.startswith("store.recovery dropped_bytes=") for m in warnings.messages)


class _Captured(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def _check_recovered(data_dir, written, survivors, cut):
    store = MessageStore(small_config(data_dir))
    report = store.start()
    try:
        if not cut and len(survivors) < len(written):
            assert report.dropped_bytes > 0
            assert report.dropped_from_phys_offset == report.max_phys_offset
        for queue_id in range(QUEUES):
            expected = [w for w in survivors if w.queue_id == queue_id]
            got = await _read_all(store, queue_id)
            assert [(m.properties["UNIQ_KEY"], m.body, m.queue_offset, m.phys_offset) for m in got] == [
                (w.uniq_key, w.body, w.queue_offset, w.phys_offset) for w in expected
            ]
            assert store.max_queue_offset("orders", queue_id) == len(expected)
        kept = {w.uniq_key for w in survivors}
        for w in written[::7]:
            assert bool(store.query_by_uniq_key("orders", w.uniq_key)) == (w.uniq_key in kept)
        assert len(store.query_by_key("orders", "all", max_count=64)) == len(survivors)
        # The recovered store goes on where its valid prefix ended.
        put = await store.put_message(message(body=b"after", queue_id=0, uniq_key="after"))
        assert put.queue_offset == len([w for w in survivors if w.queue_id == 0])
        assert put.phys_offset >= (survivors[-1].frame_end if survivors else 0)
    finally:
        await store.shutdown()


async def test_clean_restart_replays_nothing_and_keeps_everything(open_store, tmp_path):
    store = await open_store(tmp_path / "s")
    for i in range(30):
        await store.put_message(message(body=_body(i), queue_id=i % 2, uniq_key=f"u{i}"))
    await store.shutdown()
    again = MessageStore(small_config(tmp_path / "s"))
    report = again.start()
    try:
        assert report.records_replayed == 0 and report.dropped_bytes == 0
        assert again.max_queue_offset("orders", 0) == 15 and again.max_queue_offset("orders", 1) == 15
        assert again.query_by_uniq_key("orders", "u29")[0].body == _body(29)
    finally:
        await again.shutdown()


async def test_crash_without_checkpoint_rebuilds_queues_from_the_log(open_store, tmp_path):
    store = await open_store(tmp_path / "s")
    for i in range(20):
        await store.put_message(message(body=_body(i), queue_id=i % 4, tags="a", keys=f"k{i}"))
    await store.shutdown()
    (tmp_path / "s" / CHECKPOINT_FILE).unlink()
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    shutil.rmtree(tmp_path / "s" / "index")
    again = MessageStore(small_config(tmp_path / "s"))
    report = again.start()
    try:
        assert report.records_replayed == 20
        assert again.queues() == {"orders": [0, 1, 2, 3]}
        got = again.get_messages("orders", 2, 0, 10)
        assert [m.body for m in got.messages()] == [_body(i) for i in (2, 6, 10, 14, 18)]
        assert [m.body for m in again.query_by_key("orders", "k7")] == [_body(7)]
    finally:
        await again.shutdown()


@pytest.mark.parametrize("tail_bytes", [0, 1, 7, 8, 9])
async def test_a_frame_that_leaves_a_tiny_segment_tail_moves_the_next_one_on(open_store, tmp_path, tail_bytes):
    store = await open_store(tmp_path / "s")
    probe = message(body=b"")
    empty_frame = FRAME_HEADER_SIZE + len(encode_record(probe))
    body = bytes(SMALL_SEGMENT_BYTES - tail_bytes - empty_frame)
    first = await store.put_message(message(body=body))
    second = await store.put_message(message(body=b"next"))
    assert first.phys_offset == 0
    assert second.phys_offset == SMALL_SEGMENT_BYTES  # after the skipped tail or a blank frame
    await store.shutdown()
    again = MessageStore(small_config(tmp_path / "s"))
    (tmp_path / "s" / CHECKPOINT_FILE).unlink()
    report = again.start()
    try:
        assert report.dropped_bytes == 0 and report.records_replayed == 2
        assert [m.body for m in again.get_messages("orders", 0, 0, 5).messages()] == [body, b"next"]
    finally:
        await again.shutdown()
