"""The corrupt-tail fault: overwrite the last bytes of a stopped broker's commit log, and say which records the
bytes belonged to (the messages in them are destroyed by the harness, not lost by the broker)."""

from __future__ import annotations

import json
import os
import random
import struct
from dataclasses import dataclass
from pathlib import Path

from pocketmq.common import properties as props
from pocketmq.common.record import RecordFormatError, decode_record
from pocketmq.common.topic import SCHEDULE_TOPIC, TIMER_TOPIC, pop_retry_topic
from pocketmq.store.commit_log import FRAME_HEADER, FRAME_HEADER_SIZE


@dataclass(frozen=True)
class HitRecord:
    topic: str
    body: str  # the workload's message id for its own topics, a CK's or ACK's JSON for a revive record
    phys_offset: int
    tags: str = ""  # "ck", "ack", "bAck" on a revive record

    def held_message_for(self, business_topic: str, group: str) -> bool:
        """Whether this record held a workload message ``group`` receives: as sent, waiting in the timer topic
        (a delay message: destroyed there, it is never delivered to anyone), or the group's retry copy."""
        return self.topic in (business_topic, TIMER_TOPIC, SCHEDULE_TOPIC, pop_retry_topic(group, business_topic))

    @property
    def acked_group(self) -> str | None:
        """The consumer group of a destroyed ACK record (its messages may come back: at least once)."""
        return self._group_of("ack", "bAck")

    @property
    def checkpoint_group(self) -> str | None:
        """The consumer group of a destroyed CK record (the messages it held in flight are never revived)."""
        return self._group_of("ck")

    def _group_of(self, *tags: str) -> str | None:
        if self.tags not in tags:
            return None
        try:
            return str(json.loads(self.body)["c"])
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Corruption:
    data_end: int  # where the valid frames ended before the fault
    first_byte: int  # phys offset of the first overwritten byte
    hit: tuple[HitRecord, ...]

    def describe(self) -> str:
        records = (
            ", ".join(f"{h.topic}:{h.tags + ':' if h.tags else ''}{h.body[:40]}@{h.phys_offset}" for h in self.hit)
            or "none"
        )
        return f"overwrote [{self.first_byte}, {self.data_end}) hitting {records}"


def commit_log_dir(data_dir: Path) -> Path:
    found = sorted(data_dir.rglob("commitlog"))
    if not found:
        raise FileNotFoundError(f"no commitlog directory under {data_dir}")
    return found[0]


def _frames_of_last_segment(folder: Path) -> tuple[Path, int, list[tuple[int, int, bytes]]]:
    """(file, base phys offset, [(phys offset, frame size, record)]) of the last segment holding data, walking
    the frame headers only: a record an earlier fault corrupted still counts, so the tail is the log's real
    tail. Plain reads, not mmap: reading a sparse tmpfs file through a mapping can SIGBUS when it is full."""
    for path in sorted((p for p in folder.iterdir() if p.name.isdigit()), reverse=True):
        data = path.read_bytes()
        if data[:FRAME_HEADER_SIZE] == bytes(FRAME_HEADER_SIZE):
            continue
        base, frames, pos = int(path.name), [], 0
        while pos + FRAME_HEADER_SIZE <= len(data):
            size, _ = FRAME_HEADER.unpack_from(data, pos)
            if size == 0 or abs(size) > len(data) - pos or abs(size) < FRAME_HEADER_SIZE:
                break  # the zero header that ends the data (or garbage: the data ends before it)
            if size > 0:
                frames.append((base + pos, size, data[pos + FRAME_HEADER_SIZE : pos + size]))
            pos += abs(size)
        return path, base, frames
    raise FileNotFoundError(f"no commit log data in {folder}")


def _describe(phys_offset: int, record: bytes) -> HitRecord:
    try:
        msg, _ = decode_record(record)
        return HitRecord(msg.topic, msg.body.decode(errors="replace"), phys_offset, msg.properties.get(props.TAGS, ""))
    except (RecordFormatError, ValueError, IndexError, struct.error):  # already corrupt: nothing to name
        return HitRecord("?", "?", phys_offset)


def corrupt_tail(data_dir: Path, nbytes: int, rng: random.Random, *, from_phys_offset: int | None = None) -> Corruption:
    """Overwrite the last ``nbytes`` of the log's records (within its last segment), or all from
    ``from_phys_offset`` on when given, with random bytes, each differing from the one it replaces. The broker
    must be stopped."""
    path, base, frames = _frames_of_last_segment(commit_log_dir(data_dir))
    if not frames:
        return Corruption(base, base, ())
    data_end = frames[-1][0] + frames[-1][1]
    first = max(data_end - nbytes if from_phys_offset is None else from_phys_offset, base)
    hit = tuple(_describe(phys, record) for phys, size, record in frames if phys + size > first)
    fd = os.open(path, os.O_RDWR)
    try:
        old = os.pread(fd, data_end - first, first - base)
        os.pwrite(fd, bytes((b + rng.randint(1, 255)) % 256 for b in old), first - base)
        os.fsync(fd)
    finally:
        os.close(fd)
    return Corruption(data_end, first, hit)
