"""Retention decisions (pure): which of the oldest commit log segments to delete now.

A segment goes when it is older than ``file_reserved_hours`` (by its file's last write, as RocketMQ judges
it), or while the data dir's filesystem is fuller than ``disk_max_used_ratio`` (then regardless of age).
Segments go oldest first and stop at the first one that may stay, so the log stays contiguous. The caller
passes only deletable candidates: never the active (last) segment, and only segments the checkpoint
covers, so the consume queues and the index of what is deleted are on disk.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SegmentAge:
    base_offset: int
    size_bytes: int
    last_write_ms: int


@dataclass(frozen=True, slots=True)
class DiskUsage:
    total_bytes: int
    used_bytes: int


def segments_to_delete(
    candidates: list[SegmentAge], now_ms: int, reserved_ms: int, disk: DiskUsage, max_used_ratio: float
) -> int:
    """How many of ``candidates`` (oldest first) to delete."""
    used_bytes = disk.used_bytes
    count = 0
    for segment in candidates:
        expired = now_ms - segment.last_write_ms >= reserved_ms
        disk_full = disk.total_bytes > 0 and used_bytes > max_used_ratio * disk.total_bytes
        if not (expired or disk_full):
            break
        count += 1
        used_bytes -= segment.size_bytes
    return count
