"""A consume queue: the index of one (topic, queue id) into the commit log, one fixed-size unit per message.

Byte layout (big-endian), as RocketMQ's consume queue::

    unit   int64 phys_offset   int32 size   int64 tags_code        (20 bytes)

- ``phys_offset`` is the commit log position of the record's frame, ``size`` the record's length (the frame's
  payload), ``tags_code`` the tag's Java hash code (``tags.tag_hash_code``; 0 without a tag).
- The unit of queue offset ``q`` sits at byte ``q * 20`` of the queue's logical file, which is cut into
  segment files of ``units_per_segment`` units in ``<consumequeue>/<topic>/<queue id>/``, each named by the
  byte position of its first unit (20 digits, RocketMQ's naming). Seeking a queue offset is arithmetic: O(1).
- Units are written contiguously; a unit whose ``size`` is 0 was never written (segments are sparse), so the
  first zero unit of the last segment is ``max_queue_offset`` (the next offset to write).
- A *hole unit* (``size`` is ``HOLE_UNIT_SIZE``, ``phys_offset`` the hole frame's) keeps a queue offset taken
  whose record a slave never got (its master's copy was corrupt: hole.py); readers pass over it.
- Units are in ascending ``phys_offset`` order, which makes "first unit at or past a phys offset" and "first
  unit stored at or after a time" binary searches.

Recovery (``truncate_from_phys``): units of records at or past the recovery point are cut and re-dispatched
from the commit log; the scan goes backwards from the end, so torn or garbage units past the last fsynced
unit are cut too. Retention (``delete_below_phys``): segments whose every unit points below the commit log's
minimum are deleted (never the last one, which holds ``max_queue_offset``), and ``min_queue_offset`` moves to
the first unit still in the log.

Thread safety: one writer (the event loop): put, truncate, delete. ``flush_segments`` of what ``take_dirty``
returned runs in the flush worker thread while the loop may write.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path

from pocketmq.common.errors import StoreError
from pocketmq.store.segment import Segment, open_segments, segment_at

UNIT = struct.Struct(">qiq")
UNIT_SIZE = UNIT.size  # 20
_SIZE_FIELD = struct.Struct(">i")
_SIZE_FIELD_POS = 8
HOLE_UNIT_SIZE = -1  # the size field of a unit that holds a queue offset for a record replication lost


class ConsumeQueue:
    """Units of one queue; ``min_queue_offset`` <= offsets < ``max_queue_offset`` are readable."""

    def __init__(self, folder: Path, topic: str, queue_id: int, units_per_segment: int):
        self.folder = Path(folder)
        self.topic = topic
        self.queue_id = queue_id
        self.units_per_segment = units_per_segment
        self.segment_bytes = units_per_segment * UNIT_SIZE
        self._dirty: dict[int, Segment] = {}
        self.folder.mkdir(parents=True, exist_ok=True)
        self.segments: list[Segment] = open_segments(self.folder, self.segment_bytes, f"consume queue {self.name}")
        self.min_queue_offset = self.segments[0].base_offset // UNIT_SIZE if self.segments else 0
        self.max_queue_offset = self._find_end()

    @property
    def name(self) -> str:
        return f"{self.topic}/{self.queue_id}"

    def _find_end(self) -> int:
        """The first never-written unit of the last segment (binary search on the size field, within the
        file's allocated bytes: probing its sparse tail could allocate pages, see segment.py)."""
        if not self.segments:
            return 0
        last = self.segments[-1]
        lo, hi = 0, min(self.units_per_segment, last.readable_end() // UNIT_SIZE)
        while lo < hi:
            mid = (lo + hi) // 2
            if _SIZE_FIELD.unpack_from(last.view, mid * UNIT_SIZE + _SIZE_FIELD_POS)[0] != 0:
                lo = mid + 1
            else:
                hi = mid
        return last.base_offset // UNIT_SIZE + lo

    # ---- writing ---------------------------------------------------------------------------------------

    def put(self, queue_offset: int, units: bytes | bytearray) -> None:
        """Write packed units starting at ``queue_offset`` (one ``pwrite`` per segment touched)."""
        if not self.segments:
            self.min_queue_offset = queue_offset
        pos = queue_offset * UNIT_SIZE
        view = memoryview(units)
        while view:
            segment = self._segment_for_write(pos)
            rel = pos - segment.base_offset
            take = min(len(view), self.segment_bytes - rel)
            segment.write(rel, view[:take])
            self._dirty[segment.base_offset] = segment
            view = view[take:]
            pos += take
        self.max_queue_offset = max(self.max_queue_offset, pos // UNIT_SIZE)

    def _segment_for_write(self, pos: int) -> Segment:
        segment = self._segment_at(pos)
        if segment is not None:
            return segment
        base = pos - pos % self.segment_bytes
        if self.segments and base != self.segments[-1].end_offset:
            raise StoreError(f"consume queue {self.name}: write at unit {pos // UNIT_SIZE} leaves a hole")
        segment = Segment(self.folder, base, self.segment_bytes)
        self.segments.append(segment)
        return segment

    def _segment_at(self, pos: int) -> Segment | None:
        return segment_at(self.segments, pos, self.segment_bytes)

    # ---- reading ---------------------------------------------------------------------------------------

    def read_units(self, queue_offset: int, max_units: int) -> list[tuple[int, int, int]]:
        """Up to ``max_units`` units ``(phys_offset, size, tags_code)`` from ``queue_offset`` on, within one
        segment and below ``max_queue_offset``."""
        end = min(self.max_queue_offset, queue_offset + max_units)
        if queue_offset < self.min_queue_offset or queue_offset >= end:
            return []
        pos = queue_offset * UNIT_SIZE
        segment = self._segment_at(pos)
        if segment is None:
            return []
        rel = pos - segment.base_offset
        rel_end = min(self.segment_bytes, rel + (end - queue_offset) * UNIT_SIZE)
        return list(UNIT.iter_unpack(segment.view[rel:rel_end]))

    def unit(self, queue_offset: int) -> tuple[int, int, int] | None:
        units = self.read_units(queue_offset, 1)
        return units[0] if units else None

    def _phys_at(self, queue_offset: int) -> int:
        """The phys offset of a unit in [min, max): its segment exists (segments are contiguous)."""
        pos = queue_offset * UNIT_SIZE
        segment = self._segment_at(pos)
        if segment is None:
            raise StoreError(f"consume queue {self.name}: no segment holds unit {queue_offset}")
        return UNIT.unpack_from(segment.view, pos - segment.base_offset)[0]

    def first_offset_with_phys_at_least(self, phys_offset: int) -> int:
        """The smallest queue offset in [min, max) whose unit points at or past ``phys_offset`` (else max)."""
        lo, hi = self.min_queue_offset, self.max_queue_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if self._phys_at(mid) < phys_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def offset_by_time(self, timestamp_ms: int, store_timestamp_of: Callable[[int], int]) -> int:
        """The smallest queue offset whose record was stored at or after ``timestamp_ms`` (binary search on
        the records' store timestamps, read from the commit log by phys offset); ``max_queue_offset`` when
        every record is older."""
        lo, hi = self.min_queue_offset, self.max_queue_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if store_timestamp_of(self._phys_at(mid)) < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # ---- recovery and retention ------------------------------------------------------------------------

    def truncate_from_phys(self, phys_offset: int) -> int:
        """Cut every unit from the first one (scanning back from the end) that points at or past
        ``phys_offset`` or is not a valid unit; returns how many units were cut."""
        keep = self.max_queue_offset
        while keep > self.min_queue_offset:
            unit = self.unit(keep - 1)
            if unit is not None and 0 <= unit[0] < phys_offset and (unit[1] > 0 or unit[1] == HOLE_UNIT_SIZE):
                break
            keep -= 1
        cut = self.max_queue_offset - keep
        if cut:
            self.truncate_to(keep)
        return cut

    def truncate_to(self, queue_offset: int) -> None:
        """Make ``queue_offset`` the next offset to write: zero later units, delete later segments."""
        pos = queue_offset * UNIT_SIZE
        while self.segments and self.segments[-1].base_offset > pos:
            self._dirty.pop(self.segments[-1].base_offset, None)
            self.segments.pop().delete()
        segment = self._segment_at(pos)
        if segment is not None:
            segment.truncate_after(pos - segment.base_offset)
            self._dirty[segment.base_offset] = segment
        self.max_queue_offset = queue_offset
        self.min_queue_offset = min(self.min_queue_offset, queue_offset)

    def delete_below_phys(self, min_phys_offset: int) -> int:
        """Retention: delete leading segments whose units all point below ``min_phys_offset`` (never the
        last segment) and move ``min_queue_offset`` to the first unit still in the log. Returns the number
        of segments deleted."""
        deleted = 0
        while len(self.segments) > 1:
            first = self.segments[0]
            last_unit_offset = first.end_offset // UNIT_SIZE - 1
            if self._phys_at(last_unit_offset) >= min_phys_offset:
                break
            self._dirty.pop(first.base_offset, None)
            self.segments.pop(0).delete()
            deleted += 1
        if self.segments:
            self.min_queue_offset = max(self.min_queue_offset, self.segments[0].base_offset // UNIT_SIZE)
            self.min_queue_offset = self.first_offset_with_phys_at_least(min_phys_offset)
        return deleted

    # ---- flushing and closing --------------------------------------------------------------------------

    def take_dirty(self) -> list[Segment]:
        dirty = list(self._dirty.values())
        self._dirty.clear()
        return dirty

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments = []
        self._dirty.clear()

    def destroy(self) -> None:
        """Close and delete the queue's folder (topic deletion)."""
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __repr__(self) -> str:
        return f"<ConsumeQueue {self.name} min={self.min_queue_offset} max={self.max_queue_offset}>"
