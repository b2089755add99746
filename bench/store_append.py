"""Store append benchmark: 1 KiB messages straight into ``MessageStore``, beside the raw disk speed.

Runs, each in a fresh data dir under ``--dir`` (default: a temp dir on the same filesystem as ./data):

- ``raw``: plain sequential ``write`` of the same number of bytes the ASYNC run stored, in 1 MiB chunks,
  then one ``fsync``: the disk's sequential write speed as Python sees it (median of three runs; a virtual
  disk with a write-back cache makes this number jumpy);
- ``async_single``: ASYNC_FLUSH, ``put_message`` one at a time;
- ``async_batch``: ASYNC_FLUSH, ``put_messages`` batches of ``--batch``;
- ``sync``: SYNC_FLUSH, ``--concurrency`` tasks each putting one message at a time (group commit);
- ``format_floor``: no store at all, only the least Python work the record format asks of every message (pack
  the fixed part, CRC32 of the body, copy into a buffer, CRC32C of the record, pack a consume queue unit),
  written out in 1 MiB chunks and fsynced like ``raw``: the most any CPython store of this format could do on
  this machine, and so what the store's share of the raw speed can be measured against.

Every store run includes ``shutdown()``, whose final flush fsyncs what was written, so all runs end with the
data on disk. Prints one JSON line: messages/s, MB/s (stored bytes) and the fraction of the raw speed.

    .venv/bin/python bench/store_append.py [--messages 100000] [--dir PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
import zlib
from pathlib import Path

from crc32c import crc32c

from pocketmq.common.message import MessageExt
from pocketmq.common.properties import encode_properties
from pocketmq.common.record import MESSAGE_MAGIC_CODE, RECORD_HEAD
from pocketmq.store.api import FlushMode, StoreConfig
from pocketmq.store.consume_queue import UNIT
from pocketmq.store.message_store import MessageStore

BODY = os.urandom(1024)
SEGMENT_BYTES = 64 * 1024 * 1024


def _message(i: int) -> MessageExt:
    return MessageExt(
        topic="bench",
        body=BODY,
        properties={"TAGS": "t", "UNIQ_KEY": f"7F0000010000{i:020X}"},
        queue_id=i % 8,
        born_timestamp_ms=1_800_000_000_000,
        born_host=("127.0.0.1", 40000),
    )


async def _store_run(data_dir: Path, mode: FlushMode, count: int, batch: int, concurrency: int) -> dict:
    config = StoreConfig(
        data_dir=data_dir, commit_log_segment_bytes=SEGMENT_BYTES, flush_mode=mode, consume_queue_segment_units=300_000
    )
    store = MessageStore(config)
    store.start()
    messages = [_message(i) for i in range(count)]
    started = time.perf_counter()
    if concurrency > 1:

        async def worker(part: list[MessageExt]):
            for msg in part:
                await store.put_message(msg)

        await asyncio.gather(*(worker(messages[k::concurrency]) for k in range(concurrency)))
    elif batch > 1:
        for k in range(0, count, batch):
            await store.put_messages(messages[k : k + batch])
    else:
        for msg in messages:
            await store.put_message(msg)
    stored_bytes = store.max_phys_offset
    rounds = store.flush_rounds
    await store.shutdown()
    elapsed = time.perf_counter() - started
    return {
        "messages_per_s": round(count / elapsed),
        "mb_per_s": round(stored_bytes / elapsed / 1e6, 1),
        "seconds": round(elapsed, 3),
        "stored_bytes": stored_bytes,
        "flush_rounds": rounds,
    }


def _raw_run(path: Path, total_bytes: int) -> dict:
    chunk = os.urandom(1 << 20)
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = 0
        while written < total_bytes:
            written += os.write(fd, chunk[: min(len(chunk), total_bytes - written)])
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    return {"mb_per_s": round(total_bytes / elapsed / 1e6, 1), "seconds": round(elapsed, 3), "bytes": total_bytes}


def _format_floor_run(path: Path, count: int) -> dict:
    # Everything per message that does not depend on the message (the topic, the properties' encoding, the
    # hosts) is done once, outside the loop: a real store cannot skip those, so this is a true upper bound.
    topic = b"bench"
    props = encode_properties(_message(0).properties).encode()
    tail = bytes((len(topic),)) + topic + len(props).to_bytes(2, "big") + props
    host = bytes((127, 0, 0, 1))
    record_bytes = RECORD_HEAD.size + len(BODY) + len(tail)
    frame_header = b"\0" * 8
    stored_bytes = 0
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        chunk = bytearray()
        units = bytearray()
        for i in range(count):
            at = len(chunk)
            chunk += frame_header
            chunk += RECORD_HEAD.pack(
                record_bytes,
                MESSAGE_MAGIC_CODE,
                zlib.crc32(BODY) & 0x7FFFFFFF,
                i % 8,
                0,
                i,
                stored_bytes,
                0,
                0,
                host,
                1,
                0,
                host,
                2,
                0,
                0,
                len(BODY),
            )
            chunk += BODY
            chunk += tail
            with memoryview(chunk) as view:
                crc32c(view[at + 8 :])
            units += UNIT.pack(stored_bytes, record_bytes, 0)
            stored_bytes += 8 + record_bytes
            if len(chunk) >= 1 << 20:
                os.write(fd, chunk)
                chunk = bytearray()
        os.write(fd, chunk)
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    return {
        "messages_per_s": round(count / elapsed),
        "mb_per_s": round(stored_bytes / elapsed / 1e6, 1),
        "seconds": round(elapsed, 3),
        "stored_bytes": stored_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (default: a temp dir in .)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pocketmq-bench-", dir=args.dir or Path.cwd()))
    try:
        result = {"bench": "store_append", "message_bytes": len(BODY), "messages": args.messages}
        result["async_single"] = asyncio.run(_store_run(root / "a1", FlushMode.ASYNC, args.messages, 1, 1))
        raws = sorted(
            (_raw_run(root / "raw", result["async_single"]["stored_bytes"]) for _ in range(3)),
            key=lambda r: r["mb_per_s"],
        )
        result["raw"] = {**raws[1], "runs_mb_per_s": [r["mb_per_s"] for r in raws]}  # the median of three
        result["async_batch"] = asyncio.run(_store_run(root / "a2", FlushMode.ASYNC, args.messages, args.batch, 1))
        result["sync"] = asyncio.run(_store_run(root / "s", FlushMode.SYNC, args.messages, 1, args.concurrency))
        result["format_floor"] = _format_floor_run(root / "floor", args.messages)
        raw = result["raw"]["mb_per_s"]
        for run in ("async_single", "async_batch", "sync", "format_floor"):
            result[run]["fraction_of_raw"] = round(result[run]["mb_per_s"] / raw, 2)
        result["batch"] = args.batch
        result["concurrency"] = args.concurrency
        print(json.dumps(result))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
