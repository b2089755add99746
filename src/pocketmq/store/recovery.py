"""Commit log recovery: find the valid end of the log from a trusted position and cut everything after it.

``recover_commit_log(commit_log, from_phys_offset, on_frames)`` validates frames from ``from_phys_offset``
(the checkpoint, or the log's first byte), hands each batch of valid frames to ``on_frames`` (the store
re-dispatches them into consume queues and the index), stops at the first invalid byte (bad size, magic,
CRC32C, record fields, or the zero header that ends the data), measures what lies beyond (the bytes up to
the last non-zero byte of the log: a torn or corrupt tail), truncates the log there and logs at WARNING::

    store.recovery dropped_bytes=N from_phys_offset=X reason=...

Everything below ``from_phys_offset`` is trusted: the checkpoint is only saved after it was fsynced.
"""

from __future__ import annotations

import logging
from typing import Callable

from pocketmq.store.api import RecoveryReport
from pocketmq.store.commit_log import BLANK_MARK, FRAME_HEADER, FRAME_HEADER_SIZE, MIN_RECORD_SIZE, CommitLog, Frame

log = logging.getLogger(__name__)

_REPLAY_BATCH_FRAMES = 4096
_ZERO_CHUNK = bytes(1 << 20)


def recover_commit_log(commit_log: CommitLog, from_phys_offset: int,
                       on_frames: Callable[[list[Frame]], None]) -> RecoveryReport:
    valid_end = from_phys_offset
    replayed = 0
    batch: list[Frame] = []
    for frame in commit_log.scan(from_phys_offset):
        batch.append(frame)
        valid_end = frame.phys_offset + frame.size
        if len(batch) >= _REPLAY_BATCH_FRAMES:
            on_frames(batch)
            replayed += sum(1 for f in batch if f.record is not None)
            batch = []
    if batch:
        on_frames(batch)
        replayed += sum(1 for f in batch if f.record is not None)
    valid_end = commit_log.next_position(valid_end)
    data_end = _data_end(commit_log, valid_end)
    dropped = max(0, data_end - valid_end)
    reason = _why_invalid(commit_log, valid_end) if dropped else ""
    commit_log.truncate(valid_end)
    if dropped:
        log.warning("store.recovery dropped_bytes=%d from_phys_offset=%d reason=%s", dropped, valid_end, reason)
    log.info("store.recovered max_phys_offset=%d replayed_from=%d records_replayed=%d",
             commit_log.max_phys_offset, from_phys_offset, replayed)
    return RecoveryReport(max_phys_offset=commit_log.max_phys_offset, dropped_bytes=dropped,
                          dropped_from_phys_offset=valid_end if dropped else None, records_replayed=replayed,
                          reason=reason)


def _data_end(commit_log: CommitLog, phys_offset: int) -> int:
    """The position after the last non-zero byte of the log at or past ``phys_offset`` (else ``phys_offset``)."""
    for segment in reversed(commit_log.segments):
        if segment.end_offset <= phys_offset:
            break
        floor = max(0, phys_offset - segment.base_offset)
        end = segment.size_bytes
        while end > floor:
            start = max(floor, end - len(_ZERO_CHUNK))
            chunk = segment.view[start:end]
            if chunk != _ZERO_CHUNK[:end - start]:
                return segment.base_offset + start + len(chunk.rstrip(b"\0"))
            end = start
    return phys_offset


def _why_invalid(commit_log: CommitLog, phys_offset: int) -> str:
    segment = commit_log.segment_for(phys_offset)
    if segment is None:
        return "segment_files_past_the_valid_end"
    rel = phys_offset - segment.base_offset
    if segment.size_bytes - rel < FRAME_HEADER_SIZE:
        return "short_segment_tail"
    size, mark = FRAME_HEADER.unpack_from(segment.view, rel)
    if size == 0:
        return "zero_frame_header_before_data(torn_write)"
    if size < 0:
        return "bad_blank_frame" if mark == BLANK_MARK else "bad_frame_size"
    if size - FRAME_HEADER_SIZE < MIN_RECORD_SIZE or size > segment.size_bytes - rel:
        return f"frame_size_out_of_range({size})"
    return "record_check_failed(crc32c,magic,size_or_phys_offset)"
