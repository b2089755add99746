"""The timer wheel saved to disk, so a start does not read every pending timer record back.

A start without it reads the timer queue from the progress offset (the oldest pending timer) to its end: with a
million timers pending that is a million records, tens of seconds. So the service saves what it holds, at a
clean stop and about once a minute while many timers arrive (``<data_dir>/config/timer_wheel.bin``):

- a header: magic, the progress offset and ``loaded_until`` (the next timer queue offset the wheel has not
  read), the CRC of the stored timer record at ``loaded_until - 1`` (the *anchor*), the timer and second counts;
- per second of due time: the second, its timer count, then its (deliver_ms, timer queue offset) pairs as
  int64s, the layout of a ``TimerWheel`` bucket, so loading is one array per second;
- a CRC32 of all of the above.

It holds the timers pending *as of* ``loaded_until``: every record below it applied, none above. Records are
only appended, and a timer's tombstone always comes after its record, so that state stays true of the log's
prefix for good: a start loads it and reads the records from ``loaded_until`` on, which add the timers that
came since and remove the ones done since, exactly as reading from the progress offset would. What can make it
untrue is the prefix itself changing: a store whose tail was cut (a diverged slave), or recovered short after
a power loss, holds another record at the anchor's offset, or none, and the start reads the records instead.
Anything odd in the file is a reason to read the records, never an error: the timer records stay the truth.
"""

from __future__ import annotations

import logging
import struct
import sys
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pocketmq.runtime.files import atomic_write_bytes

log = logging.getLogger(__name__)

SNAPSHOT_FILE = "timer_wheel.bin"
_MAGIC = b"PMQTWHL1"
_HEADER = struct.Struct(">8sqqIqq")  # magic, progress, loaded_until, anchor crc, timers, seconds
_SECOND = struct.Struct(">qI")  # second, timers in it
_CRC = struct.Struct(">I")
_PAIR_BYTES = 16
_SWAP = sys.byteorder == "little"  # the arrays are in native order, the file big-endian


@dataclass
class WheelSnapshot:
    progress_offset: int
    loaded_until: int
    anchor_crc: int  # CRC32 of the timer record at loaded_until - 1
    buckets: list[tuple[int, array]]  # (second, [deliver_ms, key, ...]) in native byte order

    @property
    def timers(self) -> int:
        return sum(len(bucket) for _, bucket in self.buckets) // 2


def save(
    path: Path, progress_offset: int, loaded_until: int, anchor_crc: int, buckets: Iterable[tuple[int, array]]
) -> None:
    """Write the snapshot atomically (temp file, fsync, rename)."""
    parts = []
    timers = seconds = 0
    for second, bucket in buckets:
        if not bucket:
            continue
        data = array("q", bucket)
        if _SWAP:
            data.byteswap()  # stored big-endian, as the header
        parts.append(_SECOND.pack(second, len(bucket) // 2))
        parts.append(data.tobytes())
        timers += len(bucket) // 2
        seconds += 1
    body = b"".join([_HEADER.pack(_MAGIC, progress_offset, loaded_until, anchor_crc, timers, seconds), *parts])
    atomic_write_bytes(path, body + _CRC.pack(zlib.crc32(body)))


def read(path: Path) -> WheelSnapshot | None:
    """The snapshot in ``path``; None when there is none or it is not whole."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    snapshot = _parse(data)
    if snapshot is None:
        log.warning("event=timer_snapshot_unreadable path=%s bytes=%d", path, len(data))
    return snapshot


def _parse(data: bytes) -> WheelSnapshot | None:
    if len(data) < _HEADER.size + _CRC.size:
        return None
    body, (crc,) = data[: -_CRC.size], _CRC.unpack(data[-_CRC.size :])
    if zlib.crc32(body) != crc:
        return None
    magic, progress, loaded_until, anchor_crc, timers, seconds = _HEADER.unpack_from(body)
    if magic != _MAGIC:
        return None
    buckets: list[tuple[int, array]] = []
    pos = _HEADER.size
    for _ in range(seconds):
        if pos + _SECOND.size > len(body):
            return None
        second, count = _SECOND.unpack_from(body, pos)
        pos += _SECOND.size
        end = pos + count * _PAIR_BYTES
        if end > len(body):
            return None
        bucket = array("q")
        bucket.frombytes(body[pos:end])
        if _SWAP:
            bucket.byteswap()
        buckets.append((second, bucket))
        pos = end
    if pos != len(body) or sum(len(b) for _, b in buckets) // 2 != timers:
        return None
    return WheelSnapshot(progress, loaded_until, anchor_crc, buckets)
