"""Commit log recovery: verify what was written since the last verified point, find the valid end of the log
from the checkpoint and cut everything after it.

``recover_commit_log(commit_log, verify_from, replay_from, on_frames, on_bad_region)`` runs two passes:

1. **Verify** ``[verify_from, replay_from)``: the records below the checkpoint, already in the consume queues
   and the index, that no start has checked since they were written (``verify_from`` is where the last
   recovery ended, kept in the checkpoint file). Each frame's size, CRC32C, magic and fields are checked; a
   stretch without a valid frame (``integrity.bad_regions`` resynchronises after it) is handed to
   ``on_bad_region`` and logged, and stays where it is: its queue offsets stay taken (a later record must
   never reuse a queue offset a consumer may have passed), and every read skips it, since reads verify.
2. **Replay** from ``replay_from`` (the checkpoint, or the log's first byte): validate frames, hand each batch
   of valid ones to ``on_frames`` (the store re-dispatches them into consume queues and the index), stop at the
   first invalid byte (bad size, magic, CRC32C, record fields, or the zero header that ends the data), measure
   what lies beyond (the bytes up to the last non-zero byte of the log: a torn or corrupt tail), truncate the
   log there and log at WARNING::

       store.recovery dropped_bytes=N from_phys_offset=X reason=...

Sparse files: nothing past the last allocated extent of the last segment is read (segment.py says why), so a
store starts on a filesystem with little room left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pocketmq.store.api import RecoveryReport
from pocketmq.store.commit_log import CommitLog, Frame, frame_problem
from pocketmq.store.integrity import BadRegion, bad_regions

log = logging.getLogger(__name__)

_REPLAY_BATCH_FRAMES = 4096
_ZERO_CHUNK = bytes(1 << 20)


def recover_commit_log(
    commit_log: CommitLog,
    verify_from: int,
    replay_from: int,
    on_frames: Callable[[list[Frame]], None],
    on_bad_region: Callable[[BadRegion], None],
) -> RecoveryReport:
    corrupt_regions, corrupt_bytes = _verify(commit_log, min(verify_from, replay_from), replay_from, on_bad_region)
    readable_end = commit_log.readable_end()
    valid_end = replay_from
    replayed = 0
    batch: list[Frame] = []
    for frame in commit_log.scan(replay_from, readable_end):
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
    dropped = max(0, data_end(commit_log, valid_end) - valid_end)
    reason = _why_invalid(commit_log, valid_end, readable_end) if dropped else ""
    commit_log.truncate(valid_end)
    if dropped:
        log.warning("store.recovery dropped_bytes=%d from_phys_offset=%d reason=%s", dropped, valid_end, reason)
    log.info(
        "store.recovered max_phys_offset=%d verified_from=%d replayed_from=%d records_replayed=%d",
        commit_log.max_phys_offset,
        verify_from,
        replay_from,
        replayed,
    )
    return RecoveryReport(
        max_phys_offset=commit_log.max_phys_offset,
        dropped_bytes=dropped,
        dropped_from_phys_offset=valid_end if dropped else None,
        records_replayed=replayed,
        reason=reason,
        corrupt_regions=corrupt_regions,
        corrupt_bytes=corrupt_bytes,
    )


def _verify(commit_log: CommitLog, start: int, end: int, on_bad_region: Callable[[BadRegion], None]) -> tuple[int, int]:
    """Pass 1: (bad regions, their bytes) in ``[start, end)``."""
    regions = total = 0
    for region in bad_regions(commit_log, max(start, commit_log.min_phys_offset), end):
        regions += 1
        total += region.length
        on_bad_region(region)
    if regions:
        log.warning(
            "store.recovery corrupt_regions=%d corrupt_bytes=%d verified_from=%d verified_to=%d "
            "(kept in place; reads skip them; `pocketmq store verify` lists them)",
            regions,
            total,
            start,
            end,
        )
    return regions, total


def data_end(commit_log: CommitLog, phys_offset: int) -> int:
    """The position after the last non-zero byte of the log at or past ``phys_offset`` (else ``phys_offset``),
    reading only allocated extents."""
    for segment in reversed(commit_log.segments):
        if segment.end_offset <= phys_offset:
            break
        floor = max(0, phys_offset - segment.base_offset)
        end = segment.readable_end()
        while end > floor:
            start = max(floor, end - len(_ZERO_CHUNK))
            chunk = segment.view[start:end]
            if chunk != _ZERO_CHUNK[: end - start]:
                return segment.base_offset + start + len(chunk.rstrip(b"\0"))
            end = start
    return phys_offset


def _why_invalid(commit_log: CommitLog, phys_offset: int, readable_end: int) -> str:
    segment = commit_log.segment_for(phys_offset)
    if segment is None:
        return "segment_files_past_the_valid_end"
    rel = phys_offset - segment.base_offset
    room = min(segment.size_bytes, readable_end - segment.base_offset) - rel
    return frame_problem(segment.view, rel, room, phys_offset)
