"""Cutting the tail of a running store: a slave whose records past a point were never its master's
(``cluster.ha_epochs``) drops them, with the consume queue units and index entries built on them.

The same steps recovery takes for a torn tail (recovery.py and ``MessageStore.start``): ``CommitLog.truncate``,
``ConsumeQueue.truncate_from_phys`` and ``MessageIndex.load`` up to the cut, on a running store instead of at
start. The index's unwritten entries are written first, since ``load`` rebuilds it from its files.
``MessageStore.truncate_tail`` runs this under the flush lock and then flushes the cut with a checkpoint at
it, so neither a restart nor a power loss brings the dropped records back.
"""

from __future__ import annotations

from collections.abc import Iterable

from pocketmq.common.errors import StoreError
from pocketmq.store.commit_log import FRAME_HEADER, CommitLog
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.index import MessageIndex


def is_frame_boundary(commit_log: CommitLog, phys_offset: int) -> bool:
    """Whether a frame of the log starts (or the log ends) at ``phys_offset``: walks the frame headers of its
    segment from the segment's start (headers only; recovery validated the records)."""
    if phys_offset == commit_log.max_phys_offset:
        return True
    segment = commit_log.segment_for(phys_offset)
    if segment is None or phys_offset > commit_log.max_phys_offset:
        return False
    pos = segment.base_offset
    end = min(segment.end_offset, commit_log.max_phys_offset)
    while pos < phys_offset and pos < end:
        size, _crc = FRAME_HEADER.unpack_from(segment.view, pos - segment.base_offset)
        if size == 0:
            return False
        pos = commit_log.next_position(pos + abs(size))
    return pos == phys_offset


def truncate_tail(
    commit_log: CommitLog, queues: Iterable[ConsumeQueue], index: MessageIndex, phys_offset: int
) -> tuple[int, list[ConsumeQueue]]:
    """Cut everything at and after ``phys_offset`` (a frame boundary at or above the log's start); returns
    (bytes dropped, the queues that lost units). StoreError, changing nothing, for any other offset."""
    if phys_offset < commit_log.min_phys_offset or not is_frame_boundary(commit_log, phys_offset):
        raise StoreError(
            f"cannot truncate the commit log at {phys_offset}: not a record boundary of "
            f"[{commit_log.min_phys_offset}, {commit_log.max_phys_offset})"
        )
    dropped = commit_log.max_phys_offset - phys_offset
    if dropped == 0:
        return 0, []
    index.write_pending(index.take_pending())
    commit_log.truncate(phys_offset)
    cut_queues = [queue for queue in queues if queue.truncate_from_phys(phys_offset)]
    index.load(phys_offset)
    return dropped, cut_queues
