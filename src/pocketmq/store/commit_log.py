"""The commit log: every record of every queue, back to back, in fixed-size segment files.

Byte layout (big-endian). The log is a sequence of *frames*; a frame never crosses a segment boundary::

    record frame   int32 frame_size (> 0)   uint32 crc32c(record)   record (RocketMQ 4.x layout, frame_size - 8 bytes)
    blank frame    int32 -frame_size (< 0)  uint32 BLANK_MARK       zeros (frame_size - 8 bytes)
    hole frame     int32 -frame_size (< 0)  uint32 HOLE_MARK        the queue slots it stands for, zeros (hole.py)
    end of data    int32 0                  (a segment is preallocated with zeros)

- A message's ``phys_offset`` is the log position of its frame; the 4.x record starts 8 bytes later, and its
  own ``phys_offset`` field holds the frame position (checked by validation). The record's first field
  (total size) equals ``frame_size - 8``.
- A frame that does not fit in the rest of the segment is preceded by a blank frame that fills the segment,
  and goes at the start of the next segment. If fewer than 8 bytes (one frame header) would remain after a
  frame, the write position moves to the next segment at once and readers skip such a tail.
- A blank frame also pads the start of a replica's first segment up to the master's offset it began at.
- A hole frame is what a slave holds where its master's bytes were corrupt (hole.py): no record, but the queue
  offsets of the records it replaces stay taken.

Validation (recovery, replication): size in range, crc32c of the record, record magic, the record's total
size and phys offset fields. The valid log is the longest prefix of valid frames; ``truncate(phys_offset)``
cuts it there (the rest of the segment zeroed, later segments deleted).

Every read verifies: ``read_record`` (what consume queue reads hand out) checks the frame header's size and
CRC32C and the record's phys offset field, ``read_frames`` (what a master serves its slaves) validates each
frame, ``append_frames`` (what a slave accepts) validates all before writing. A failed check raises
``CorruptRecordError``; the store skips and reports the record (store/integrity.py), and a master sends its
slave a hole in place of it (``bad_region_end`` finds where the corrupt stretch ends).

Crash behaviour: frames reach the page cache with one ``pwrite`` per append batch and segment, so a process
crash loses nothing written; a power loss keeps what ``flush()`` covered. Recovery finds the valid prefix.

Thread safety: single writer on the event loop (append, truncate, delete). ``flush_segments()`` runs in a
worker thread on a list taken by ``take_dirty()`` on the loop; reads run on the loop. A segment's write
handle is closed (``after_flush``) only between flushes, never while a worker thread may fsync it.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from pocketmq.common.errors import StoreError
from pocketmq.common.record import MESSAGE_MAGIC_CODE, PHYS_OFFSET_POS, STORE_TIMESTAMP_POS, record_size
from pocketmq.store.hole import HOLE_MARK, QueueSlot, parse_hole_slots
from pocketmq.store.segment import Segment, open_segments, segment_at

log = logging.getLogger(__name__)

FRAME_HEADER = struct.Struct(">iI")
FRAME_HEADER_SIZE = FRAME_HEADER.size  # 8
BLANK_MARK = 0xB1A4CF11
MIN_RECORD_SIZE = record_size(0, 0, 0)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_RECORD_CHECK = struct.Struct(">ii")  # total_size, magic
_EMPTY_HEADER = bytes(FRAME_HEADER_SIZE)
_MAGIC = MESSAGE_MAGIC_CODE.to_bytes(4, "big", signed=True)
_MAGIC_IN_FRAME = FRAME_HEADER_SIZE + 4  # the record's total size field precedes its magic


@dataclass(frozen=True, slots=True)
class Frame:
    """One valid frame found by a scan: ``record`` is None for a blank or hole frame; ``hole`` is the queue
    slots of a hole frame (None for the others)."""

    phys_offset: int
    size: int
    record: bytes | None
    crc32c: int = 0  # of the record (the frame header's second field); 0 for a blank frame
    hole: tuple[QueueSlot, ...] | None = None


@dataclass(frozen=True, slots=True)
class RecordMark:
    """Names one record of a log: where its frame starts and the CRC32C its frame header carries. Two logs
    whose last records have equal marks hold the same record there (replication checks continuity with it)."""

    phys_offset: int
    crc32c: int


class CorruptRecordError(StoreError):
    """The bytes at ``phys_offset`` are not the valid frame a reader expected there (``reason`` says which
    check failed)."""

    def __init__(self, phys_offset: int, reason: str):
        super().__init__(f"corrupt record at phys offset {phys_offset}: {reason}")
        self.phys_offset = phys_offset
        self.reason = reason


class CommitLog:
    """The segments of the commit log and the write position ``max_phys_offset``."""

    def __init__(self, folder: Path, segment_bytes: int, *, writable: bool = True):
        if segment_bytes < 4096:
            raise StoreError(f"commit log segment of {segment_bytes} bytes is too small")
        self.folder = Path(folder)
        self.segment_bytes = segment_bytes
        self._dirty: dict[int, Segment] = {}
        self._last_record: RecordMark | None = None
        self._last_record_known = False  # False: find it by walking the frame headers (after open, truncate)
        if writable:
            self.folder.mkdir(parents=True, exist_ok=True)
        self.segments: list[Segment] = open_segments(self.folder, segment_bytes, "commit log", writable=writable)
        self.max_phys_offset = self.segments[0].base_offset if self.segments else 0

    # ---- positions -------------------------------------------------------------------------------------

    @property
    def min_phys_offset(self) -> int:
        return self.segments[0].base_offset if self.segments else self.max_phys_offset

    def segment_for(self, phys_offset: int) -> Segment | None:
        return segment_at(self.segments, phys_offset, self.segment_bytes)

    def next_position(self, phys_offset: int) -> int:
        """Normalise a write/read position: a segment tail shorter than a frame header is skipped."""
        rel = phys_offset % self.segment_bytes
        if rel and self.segment_bytes - rel < FRAME_HEADER_SIZE:
            return phys_offset - rel + self.segment_bytes
        return phys_offset

    # ---- writing ---------------------------------------------------------------------------------------

    @property
    def max_record_bytes(self) -> int:
        """The largest record one frame of a segment holds."""
        return self.segment_bytes - FRAME_HEADER_SIZE

    def append(self, records: list[bytes]) -> list[int]:
        """Append records (4.x layout; their phys offset field is set here, in the copy written) and return
        their phys offsets. One ``pwrite`` per segment touched. No record may be longer than ``max_record_bytes``."""
        offsets = []
        pos = self.max_phys_offset
        seg_end = pos - pos % self.segment_bytes + self.segment_bytes
        chunk_start = pos
        chunk = bytearray()
        for record in records:
            frame_len = FRAME_HEADER_SIZE + len(record)
            if pos + frame_len > seg_end:  # does not fit: a blank frame fills the segment (>= 8 bytes remain)
                blank = seg_end - pos
                chunk += FRAME_HEADER.pack(-blank, BLANK_MARK)
                chunk += bytes(blank - FRAME_HEADER_SIZE)
                self._write(chunk_start, chunk)
                pos = chunk_start = seg_end
                seg_end += self.segment_bytes
                chunk = bytearray()
            frame_at = len(chunk)
            chunk += _EMPTY_HEADER
            chunk += record
            _I64.pack_into(chunk, frame_at + FRAME_HEADER_SIZE + PHYS_OFFSET_POS, pos)
            with memoryview(chunk) as view:
                crc = crc32c(view[frame_at + FRAME_HEADER_SIZE :])
            FRAME_HEADER.pack_into(chunk, frame_at, frame_len, crc)
            offsets.append(pos)
            pos += frame_len
            if seg_end - pos < FRAME_HEADER_SIZE:  # no room for even a frame header: go on in the next segment
                self._write(chunk_start, chunk)
                pos = chunk_start = seg_end
                seg_end += self.segment_bytes
                chunk = bytearray()
        if chunk:
            self._write(chunk_start, chunk)
        self.max_phys_offset = pos
        if offsets:
            self._last_record, self._last_record_known = RecordMark(offsets[-1], crc), True
        return offsets

    def append_frames(self, phys_offset: int, data: bytes) -> list[Frame]:
        """Append frames read from another log (replication) exactly at ``phys_offset``; they are validated
        first and nothing is written unless all are valid. Returns the frames."""
        if self.segments and phys_offset != self.max_phys_offset:
            raise StoreError(f"replicated data at {phys_offset} does not continue the log at {self.max_phys_offset}")
        frames = list(self.scan_bytes(phys_offset, data))
        consumed = sum(f.size for f in frames)
        if consumed != len(data):
            raise CorruptRecordError(phys_offset + consumed, "invalid_frame_in_replicated_data")
        if not self.segments and phys_offset % self.segment_bytes:
            # A replica that starts after its master's first byte: pad its first segment with a blank frame.
            base = phys_offset - phys_offset % self.segment_bytes
            gap = phys_offset - base
            self.max_phys_offset = base
            self._write(base, FRAME_HEADER.pack(-gap, BLANK_MARK))
        self.max_phys_offset = phys_offset
        start = 0
        pos = phys_offset
        for frame in frames:  # group the frames by segment: one write per segment
            if frame.phys_offset // self.segment_bytes != pos // self.segment_bytes:
                self._write(pos, memoryview(data)[start : frame.phys_offset - phys_offset])
                start, pos = frame.phys_offset - phys_offset, frame.phys_offset
        if start < len(data):
            self._write(pos, memoryview(data)[start:])
        if frames:
            self.max_phys_offset = self.next_position(frames[-1].phys_offset + frames[-1].size)
        for frame in reversed(frames):
            if frame.record is not None:
                self._last_record, self._last_record_known = RecordMark(frame.phys_offset, frame.crc32c), True
                break
        return frames

    def _write(self, phys_offset: int, data) -> None:
        segment = self.segment_for(phys_offset)
        if segment is None:
            base = phys_offset - phys_offset % self.segment_bytes
            if self.segments and base != self.segments[-1].end_offset:
                raise StoreError(f"commit log write at {phys_offset} leaves a hole after {self.segments[-1]}")
            segment = Segment(self.folder, base, self.segment_bytes)
            self.segments.append(segment)
        segment.write(phys_offset - segment.base_offset, data)
        self._dirty[segment.base_offset] = segment

    # ---- flushing --------------------------------------------------------------------------------------

    def take_dirty(self) -> tuple[list[Segment], int]:
        """(segments written since the last call, the phys offset they cover); call on the loop."""
        dirty = list(self._dirty.values())
        self._dirty.clear()
        return dirty, self.max_phys_offset

    def after_flush(self) -> None:
        """Seal the segments behind the active one that nothing wrote since the last flush (frees their write
        handles); call on the loop once no flush runs, so no worker thread still uses a handle."""
        for segment in self.segments[:-1]:
            if segment.base_offset not in self._dirty:
                segment.seal()

    @staticmethod
    def flush_segments(segments: list[Segment]) -> None:
        """fsync (blocking: run in a worker thread)."""
        for segment in segments:
            segment.flush()

    # ---- reading ---------------------------------------------------------------------------------------

    def read_record(self, phys_offset: int, size: int) -> bytes | None:
        """The 4.x record of the frame at ``phys_offset`` whose record is ``size`` bytes (from a consume queue
        unit), or None when that part of the log is gone. Verified: CorruptRecordError when the frame header
        does not announce ``size`` bytes, the CRC32C differs or the record names another phys offset."""
        segment = self.segment_for(phys_offset)
        if segment is None or phys_offset >= self.max_phys_offset:
            return None
        rel = phys_offset - segment.base_offset
        if size < MIN_RECORD_SIZE or rel + FRAME_HEADER_SIZE + size > min(
            segment.size_bytes, self.max_phys_offset - segment.base_offset
        ):
            raise CorruptRecordError(phys_offset, f"unit_size_out_of_range({size})")
        view = segment.view
        frame_size, crc = FRAME_HEADER.unpack_from(view, rel)
        if frame_size != size + FRAME_HEADER_SIZE:
            raise CorruptRecordError(phys_offset, f"frame_size_differs_from_unit({frame_size})")
        record = view[rel + FRAME_HEADER_SIZE : rel + FRAME_HEADER_SIZE + size]
        if crc32c(record) != crc:
            raise CorruptRecordError(phys_offset, "crc32c_mismatch")
        if _I64.unpack_from(record, PHYS_OFFSET_POS)[0] != phys_offset:
            raise CorruptRecordError(phys_offset, "phys_offset_field_differs")
        return record

    def read_frame_record(self, phys_offset: int) -> bytes | None:
        """The record of the (validated) frame at ``phys_offset``, or None when there is none there."""
        segment = self.segment_for(phys_offset)
        if segment is None or phys_offset >= self.max_phys_offset:
            return None
        frame = self._frame_at(segment, phys_offset - segment.base_offset)
        return frame.record if frame is not None else None

    def store_timestamp_ms(self, phys_offset: int) -> int:
        segment = self.segment_for(phys_offset)
        if segment is None:
            return -1
        rel = phys_offset - segment.base_offset
        if _I32.unpack_from(segment.view, rel)[0] <= 0:  # a hole (what a slave holds for a lost record) has no time
            return -1
        return _I64.unpack_from(segment.view, rel + FRAME_HEADER_SIZE + STORE_TIMESTAMP_POS)[0]

    def read_frames(self, phys_offset: int, max_bytes: int, end_phys_offset: int | None = None) -> bytes:
        """Whole frames from ``phys_offset`` (a frame boundary) within one segment and before
        ``end_phys_offset`` (a frame boundary; default the log's end), at most ``max_bytes`` unless the first
        frame alone is larger (so a reader always progresses). Empty at the end."""
        end = self.max_phys_offset if end_phys_offset is None else min(end_phys_offset, self.max_phys_offset)
        phys_offset = self.next_position(phys_offset)
        if phys_offset >= end:
            return b""
        segment = self.segment_for(phys_offset)
        if segment is None:
            raise StoreError(f"phys offset {phys_offset} is below the commit log minimum {self.min_phys_offset}")
        rel = phys_offset - segment.base_offset
        limit = min(segment.size_bytes, end - segment.base_offset)
        end = rel
        while end < limit:
            frame = self._frame_at(segment, end)
            if frame is None:
                if end == rel:
                    raise CorruptRecordError(phys_offset, frame_problem(segment.view, rel, limit - rel, phys_offset))
                break
            if end > rel and end + frame.size - rel > max_bytes:
                break
            end += frame.size
            if segment.size_bytes - end < FRAME_HEADER_SIZE:
                break
        return segment.view[rel:end]

    def bad_region_end(self, phys_offset: int, end_phys_offset: int) -> int:
        """Where the stretch without a valid frame that starts at ``phys_offset`` ends: the next valid record
        frame of its segment, else the segment's end or ``end_phys_offset`` (a frame boundary), if nearer."""
        segment = self.segment_for(phys_offset)
        if segment is None:
            raise StoreError(f"phys offset {phys_offset} is outside the commit log")
        limit = min(segment.size_bytes, end_phys_offset - segment.base_offset)
        found = next_valid_frame(segment.view, phys_offset - segment.base_offset + 1, limit, segment.base_offset)
        return segment.base_offset + (found if found is not None else limit)

    def last_record(self) -> RecordMark | None:
        """The mark of the log's last record (None when it holds none). Known after every append; after an
        open or a truncation found once by walking the frame headers of the last segment(s) (validated by
        recovery, so the walk reads no record)."""
        if not self._last_record_known:
            self._last_record = self._walk_last_record()
            self._last_record_known = True
        return self._last_record

    def _walk_last_record(self) -> RecordMark | None:
        for segment in reversed(self.segments):
            pos, last = segment.base_offset, None
            end = min(segment.end_offset, self.max_phys_offset)
            while pos < end:
                size, crc = FRAME_HEADER.unpack_from(segment.view, pos - segment.base_offset)
                if size == 0:
                    break
                if size > 0:
                    last = RecordMark(pos, crc)
                pos = self.next_position(pos + abs(size))
            if last is not None:
                return last
        return None

    def last_record_crc32c(self, record_phys_offset: int, end_phys_offset: int) -> int | None:
        """The CRC32C of the record at ``record_phys_offset`` when it is this log's last record before
        ``end_phys_offset`` (only blank or hole frames, or corrupt stretches a slave got as holes, between its
        end and there), else None: then a log that ends at ``end_phys_offset`` with that record last is not a
        prefix of this one. A record of this log whose only fault is its CRC32C (the frame header, magic, size
        and phys offset fields intact) counts by its header: a slave may hold the good copy of it."""
        if not record_phys_offset < end_phys_offset <= self.max_phys_offset:
            return None
        segment = self.segment_for(record_phys_offset)
        if segment is None:
            return None
        rel = record_phys_offset - segment.base_offset
        if frame_problem(segment.view, rel, segment.size_bytes - rel, record_phys_offset) != "crc32c_mismatch":
            frame = self._frame_at(segment, rel)
            if frame is None or frame.record is None:
                return None
        frame_size, crc = FRAME_HEADER.unpack_from(segment.view, rel)
        pos = self.next_position(record_phys_offset + frame_size)
        while pos < end_phys_offset:  # a blank frame filling a segment, or holes, may follow the last record
            segment = self.segment_for(pos)
            if segment is None:
                return None
            frame = self._frame_at(segment, pos - segment.base_offset)
            if frame is None:  # corrupt bytes: the slave got them as a hole, maybe cut into pieces
                region_end = self.bad_region_end(pos, self.max_phys_offset)
                pos = end_phys_offset if region_end >= end_phys_offset else self.next_position(region_end)
                continue
            if frame.record is not None:
                return None
            pos = self.next_position(pos + frame.size)
        return crc if pos == end_phys_offset else None

    def scan(self, from_phys_offset: int, end_phys_offset: int | None = None) -> Iterator[Frame]:
        """Valid frames from ``from_phys_offset`` on that end at or before ``end_phys_offset`` (default the log's
        end; recovery passes ``readable_end()``), stopping before the first invalid byte."""
        end = self.max_phys_offset if end_phys_offset is None else end_phys_offset
        pos = self.next_position(from_phys_offset)
        while True:
            segment = self.segment_for(pos)
            if segment is None:
                return
            rel = pos - segment.base_offset
            frame = parse_frame(segment.view, rel, min(segment.size_bytes, end - segment.base_offset) - rel, pos)
            if frame is None:
                return
            yield frame
            pos = self.next_position(pos + frame.size)

    def readable_end(self) -> int:
        """Where the allocated bytes of the log end (its last segment's last allocated extent): recovery reads
        nothing past it (segment.py says why)."""
        if not self.segments:
            return self.max_phys_offset
        last = self.segments[-1]
        return last.base_offset + last.readable_end()

    def scan_bytes(self, phys_offset: int, data) -> Iterator[Frame]:
        """Valid frames of ``data`` whose first byte is at ``phys_offset`` (replication input)."""
        pos = 0
        while pos < len(data):
            rel = (phys_offset + pos) % self.segment_bytes
            frame = parse_frame(data, pos, min(len(data) - pos, self.segment_bytes - rel), phys_offset + pos)
            if frame is None:
                return
            yield frame
            pos += frame.size
            gap = self.next_position(phys_offset + pos) - (phys_offset + pos)
            if gap:  # the writer skipped a short segment tail that was never part of any frame
                return

    def _frame_at(self, segment: Segment, rel: int) -> Frame | None:
        return parse_frame(segment.view, rel, segment.size_bytes - rel, segment.base_offset + rel)

    # ---- truncation and deletion -----------------------------------------------------------------------

    def truncate(self, phys_offset: int) -> None:
        """Cut the log at ``phys_offset``: zero the rest of its segment, delete later segments."""
        self._last_record_known = False
        while self.segments and self.segments[-1].base_offset > phys_offset:
            self._dirty.pop(self.segments[-1].base_offset, None)
            self.segments.pop().delete()
        segment = self.segment_for(phys_offset)
        if segment is None:
            if self.segments and phys_offset == self.segments[-1].end_offset:
                self.max_phys_offset = phys_offset
                return
            self.max_phys_offset = phys_offset
            return
        segment.truncate_after(phys_offset - segment.base_offset)
        self._dirty[segment.base_offset] = segment
        self.max_phys_offset = phys_offset

    def start_at(self, phys_offset: int) -> None:
        """Start an empty log at ``phys_offset`` (a replica's first position)."""
        if self.segments:
            raise StoreError("start_at on a commit log that is not empty")
        self.max_phys_offset = phys_offset

    def delete_segment(self, segment: Segment) -> None:
        """Delete the oldest segment (retention); never the one being written."""
        if segment is not self.segments[0] or len(self.segments) < 2:
            raise StoreError(f"refusing to delete {segment}: only the oldest inactive segment may go")
        self._dirty.pop(segment.base_offset, None)
        self.segments.pop(0)
        segment.delete()
        self._last_record_known = False

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments = []
        self._dirty.clear()

    def __repr__(self) -> str:
        return (
            f"<CommitLog {self.folder} segments={len(self.segments)} min={self.min_phys_offset} "
            f"max={self.max_phys_offset}>"
        )


def parse_frame(buf, pos: int, room: int, phys_offset: int) -> Frame | None:
    """The valid frame at ``buf[pos:]`` with ``room`` bytes up to its segment's end, else None."""
    if room < FRAME_HEADER_SIZE:
        return None
    size, crc = FRAME_HEADER.unpack_from(buf, pos)
    if size < 0:
        size = -size
        if size < FRAME_HEADER_SIZE or size > room:
            return None
        if crc == BLANK_MARK:
            return Frame(phys_offset, size, None)
        slots = parse_hole_slots(buf, pos, size) if crc == HOLE_MARK else None
        return Frame(phys_offset, size, None, hole=slots) if slots is not None else None
    if not _record_frame_valid(buf, pos, size, crc, room, phys_offset):
        return None
    return Frame(phys_offset, size, bytes(buf[pos + FRAME_HEADER_SIZE : pos + size]), crc)


def _record_frame_valid(buf, pos: int, size: int, crc: int, room: int, phys_offset: int) -> bool:
    """Whether the record frame of ``size`` bytes with ``crc`` in its header, at ``buf[pos:]``, is valid."""
    record_len = size - FRAME_HEADER_SIZE
    if record_len < MIN_RECORD_SIZE or size > room:
        return False
    start = pos + FRAME_HEADER_SIZE
    total, magic = _RECORD_CHECK.unpack_from(buf, start)
    if total != record_len or magic != MESSAGE_MAGIC_CODE:
        return False
    if _I64.unpack_from(buf, start + PHYS_OFFSET_POS)[0] != phys_offset:
        return False
    return crc32c(buf[start : start + record_len]) == crc


def valid_frames_end(buf, rel: int, limit: int, base_offset: int) -> int:
    """Where the run of valid frames from ``buf[rel]`` ends, below ``limit`` (``buf`` a segment whose first byte
    is at phys offset ``base_offset``): the first position that does not start a valid frame, ``limit``, or a
    tail shorter than a frame header. What ``parse_frame`` checks, without building a frame or copying a record:
    recovery verifies everything written since the last start this way (a million records is common)."""
    while limit - rel >= FRAME_HEADER_SIZE:
        size, crc = FRAME_HEADER.unpack_from(buf, rel)
        if size > 0:
            if not _record_frame_valid(buf, rel, size, crc, limit - rel, base_offset + rel):
                return rel
            rel += size
            continue
        frame = parse_frame(buf, rel, limit - rel, base_offset + rel)  # a blank or a hole (or nothing valid)
        if frame is None:
            return rel
        rel += frame.size
    return rel


def frame_problem(buf, pos: int, room: int, phys_offset: int) -> str:
    """Why the bytes at ``buf[pos:]`` are not a valid frame (``room`` bytes up to its segment's end)."""
    if room < FRAME_HEADER_SIZE:
        return "short_segment_tail"
    size, mark = FRAME_HEADER.unpack_from(buf, pos)
    if size == 0:
        return "zero_frame_header_before_data(torn_write)"
    if size < 0:
        return {BLANK_MARK: "bad_blank_frame", HOLE_MARK: "bad_hole_frame"}.get(mark, "bad_frame_size")
    if size - FRAME_HEADER_SIZE < MIN_RECORD_SIZE or size > room:
        return f"frame_size_out_of_range({size})"
    total, magic = _RECORD_CHECK.unpack_from(buf, pos + FRAME_HEADER_SIZE)
    if magic != MESSAGE_MAGIC_CODE:
        return "bad_magic"
    if total != size - FRAME_HEADER_SIZE:
        return "record_size_differs_from_frame"
    if _I64.unpack_from(buf, pos + FRAME_HEADER_SIZE + PHYS_OFFSET_POS)[0] != phys_offset:
        return "phys_offset_field_differs"
    return "crc32c_mismatch"


def next_valid_frame(buf, rel: int, limit: int, base_offset: int) -> int | None:
    """The position of the first valid record frame at or after ``buf[rel]`` below ``limit`` (``buf`` a segment
    whose first byte is at phys offset ``base_offset``), else None: a search for the record magic, each
    candidate validated fully (its phys offset field must be its own position, which body bytes cannot fake
    by accident)."""
    search = rel + _MAGIC_IN_FRAME
    while True:
        found = buf.find(_MAGIC, search, limit)
        if found < 0:
            return None
        candidate = found - _MAGIC_IN_FRAME
        if parse_frame(buf, candidate, limit - candidate, base_offset + candidate) is not None:
            return candidate
        search = found + 1
