"""Corrupt records: finding them in a stretch of the commit log, and reporting the ones readers meet.

``walk_log(commit_log, start, end)`` yields, in log order, every valid frame of ``[start, end)`` and a
``BadRegion`` for every stretch between them that holds no valid frame. After a bad byte it does not trust
any size field: it resynchronises on the next valid frame (``CommitLog.bad_region_end``), found by searching the segment for the record
magic code (a candidate frame starts 12 bytes before it) and validating the candidate fully (size, CRC32C,
magic, total size, and a phys offset field equal to its own position, which bytes inside a body cannot
fake by accident). Frames never cross a segment, so a segment without a valid frame after the bad byte ends
the region at the segment's end. ``pocketmq store verify`` walks a whole stopped store with it; recovery
checks what was written since the last verified point with ``bad_regions``, the same regions found without
building a frame for every valid record.

``CorruptionReporter`` is what the store tells when it meets a corrupt record: it counts each distinct
record once (by phys offset, in a bounded set), increments ``pocketmq_store_corrupt_records_total`` with a
``found_by`` label (``read``, ``recovery``, ``replication_source``, ``replication``) when the store has a
metrics registry, and logs at WARNING, at most one line per ``LOG_INTERVAL_MS`` with the number of
reports it held back (a consumer re-reading a corrupt record cannot flood the log).

Thread safety: event loop only (the store's single thread).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pocketmq.runtime.clock import Clock
from pocketmq.store.commit_log import CommitLog, Frame, frame_problem, parse_frame, valid_frames_end

log = logging.getLogger(__name__)

LOG_INTERVAL_MS = 10_000
REMEMBERED_RECORDS = 4096  # distinct corrupt phys offsets kept to count each record once


@dataclass(frozen=True, slots=True)
class BadRegion:
    """``length`` bytes from ``phys_offset`` that hold no valid frame; ``reason`` is the first check failed."""

    phys_offset: int
    length: int
    reason: str


def walk_log(commit_log: CommitLog, start: int, end: int) -> Iterator[Frame | BadRegion]:
    """Valid frames and bad regions of ``[start, end)`` (``start`` a frame boundary), in log order."""
    pos = commit_log.next_position(start)
    while pos < end:
        segment = commit_log.segment_for(pos)
        if segment is None:
            return
        rel = pos - segment.base_offset
        limit = min(segment.size_bytes, end - segment.base_offset)
        frame = parse_frame(segment.view, rel, limit - rel, pos)
        if frame is not None:
            yield frame
            pos = commit_log.next_position(pos + frame.size)
            continue
        stop = commit_log.bad_region_end(pos, end)
        yield BadRegion(pos, stop - pos, frame_problem(segment.view, rel, limit - rel, pos))
        pos = commit_log.next_position(stop)


def bad_regions(commit_log: CommitLog, start: int, end: int) -> Iterator[BadRegion]:
    """The bad regions of ``[start, end)``, the ones ``walk_log`` yields, found without building a frame for
    every valid record (recovery's pass over what was written since the last start)."""
    pos = commit_log.next_position(start)
    while pos < end:
        segment = commit_log.segment_for(pos)
        if segment is None:
            return
        base = segment.base_offset
        limit = min(segment.size_bytes, end - base)
        rel = valid_frames_end(segment.view, pos - base, limit, base)
        pos = commit_log.next_position(base + rel)
        if rel < limit and pos == base + rel:  # not a segment tail too short for a frame: a frame that is not valid
            stop = commit_log.bad_region_end(pos, end)
            yield BadRegion(pos, stop - pos, frame_problem(segment.view, rel, limit - rel, pos))
            pos = commit_log.next_position(stop)


class LogLimiter:
    """At most one log line per ``interval_ms``: ``allow(now_ms)`` -> (log now?, reports held back before)."""

    def __init__(self, interval_ms: int):
        self._interval_ms = interval_ms
        self._next_ms: int | None = None
        self._held_back = 0

    def allow(self, now_ms: int) -> tuple[bool, int]:
        if self._next_ms is not None and now_ms < self._next_ms:
            self._held_back += 1
            return False, 0
        held_back, self._held_back = self._held_back, 0
        self._next_ms = now_ms + self._interval_ms
        return True, held_back


class CorruptionReporter:
    """Counts, logs (rate limited) and exports the corrupt records the store meets (see the module docstring)."""

    def __init__(self, clock: Clock, metrics=None):
        self._clock = clock
        self._limiter = LogLimiter(LOG_INTERVAL_MS)
        self._seen: dict[int, None] = {}  # insertion ordered: the oldest is forgotten first
        self._counter = (
            None
            if metrics is None
            else metrics.counter(
                "pocketmq_store_corrupt_records_total",
                "Distinct corrupt commit log records found, by who found them",
                ("found_by",),
            )
        )
        self.found_total = 0

    def report(self, found_by: str, phys_offset: int, reason: str, detail: str = "") -> None:
        if phys_offset not in self._seen:
            self._seen[phys_offset] = None
            if len(self._seen) > REMEMBERED_RECORDS:
                del self._seen[next(iter(self._seen))]
            self.found_total += 1
            if self._counter is not None:
                self._counter.inc(found_by=found_by)
        allowed, held_back = self._limiter.allow(self._clock.now_ms())
        if allowed:
            log.warning(
                "store.corrupt_record found_by=%s phys_offset=%d reason=%s%s held_back=%d",
                found_by,
                phys_offset,
                reason,
                f" {detail}" if detail else "",
                held_back,
            )
