"""The corrupt-tail fault: overwrite the last bytes of a stopped broker's commit log, and say which records the
bytes belonged to (the messages in them are destroyed by the harness, not lost by the broker)."""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

from pocketmq.common import properties as props
from pocketmq.protocol.message_codec import RecordFormatError, decode_record
from pocketmq.store.commit_log import CommitLog
from pocketmq.store.segment import segment_name


@dataclass(frozen=True)
class HitRecord:
    topic: str
    body: str  # the workload's message id for its own topics, a CK's or ACK's JSON for a revive record
    phys_offset: int
    tags: str = ""  # "ck", "ack", "bAck" on a revive record

    @property
    def acked_group(self) -> str | None:
        """The consumer group of a destroyed ACK record (its messages may come back: at least once)."""
        if self.tags not in ("ack", "bAck"):
            return None
        try:
            return str(json.loads(self.body)["c"])
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Corruption:
    data_end: int        # where the valid frames ended before the fault
    first_byte: int      # phys offset of the first overwritten byte
    hit: tuple[HitRecord, ...]

    def describe(self) -> str:
        records = ", ".join(f"{h.topic}:{h.tags + ':' if h.tags else ''}{h.body[:40]}@{h.phys_offset}"
                            for h in self.hit) or "none"
        return f"overwrote [{self.first_byte}, {self.data_end}) hitting {records}"


def commit_log_dir(data_dir: Path) -> Path:
    found = sorted(data_dir.rglob("commitlog"))
    if not found:
        raise FileNotFoundError(f"no commitlog directory under {data_dir}")
    return found[0]


def corrupt_tail(data_dir: Path, segment_bytes: int, nbytes: int, rng: random.Random) -> Corruption:
    """Overwrite the last ``nbytes`` of the log's valid frames with random bytes (each differing from the one
    it replaces). The broker must be stopped."""
    log = CommitLog(commit_log_dir(data_dir), segment_bytes)
    try:
        frames = list(log.scan(log.min_phys_offset))
    finally:
        for segment in log.segments:
            segment.close()
    frames = [f for f in frames if f.record is not None]
    if not frames:
        return Corruption(0, 0, ())
    data_end = frames[-1].phys_offset + frames[-1].size
    last_segment_base = (data_end - 1) - (data_end - 1) % segment_bytes
    first = max(data_end - nbytes, last_segment_base)  # within one segment file
    hit = []
    for frame in frames:
        if frame.phys_offset + frame.size > first:
            try:
                msg, _ = decode_record(frame.record)
                hit.append(HitRecord(msg.topic, msg.body.decode(errors="replace"), frame.phys_offset,
                                     msg.properties.get(props.TAGS, "")))
            except RecordFormatError:
                hit.append(HitRecord("?", "?", frame.phys_offset))
    segment_file = commit_log_dir(data_dir) / segment_name(last_segment_base)
    position = first % segment_bytes
    fd = os.open(segment_file, os.O_RDWR)
    try:
        old = os.pread(fd, data_end - first, position)
        new = bytes((b + rng.randint(1, 255)) % 256 for b in old)
        os.pwrite(fd, new, position)
        os.fsync(fd)
    finally:
        os.close(fd)
    return Corruption(data_end, first, tuple(hit))
