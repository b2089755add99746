"""Offline verification of a stopped broker's store (``pocketmq store verify --data-dir DIR``).

``verify_store(data_dir)`` opens the commit log read only (nothing is created, extended or cut), walks every
frame from its first to its last byte with ``integrity.walk_log`` and returns the bad regions, each with the
consume queue records that point into it (topic, queue id, queue offset: what a consumer will find skipped).
The zeros after the last frame are the end of the log, not damage; a torn tail is reported (recovery would
drop it). Holes (a slave's stand-ins for records its master could not hand on, hole.py) are valid frames, listed
apart with the queue records they stand for. The segment size is read from the files (they all have it), so no broker config is needed.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.common.errors import StoreError
from pocketmq.store.commit_log import CommitLog, Frame
from pocketmq.store.consume_queue import UNIT, UNIT_SIZE
from pocketmq.store.hole import QueueSlot
from pocketmq.store.integrity import BadRegion, walk_log
from pocketmq.store.recovery import data_end
from pocketmq.store.segment import list_segment_bases, segment_name

_UNIT_READ_BYTES = UNIT_SIZE * 65_536


@dataclass
class StoreVerification:
    segments: int = 0
    records_ok: int = 0
    bad_regions: list[BadRegion] = field(default_factory=list)
    holes: list[Frame] = field(default_factory=list)  # hole frames (their ``hole``: the queue slots lost)
    records_hit: dict[int, list[QueueSlot]] = field(default_factory=dict)  # region phys offset -> records

    @property
    def corrupt(self) -> bool:
        return bool(self.bad_regions)


def verify_store(data_dir: Path) -> StoreVerification:
    folder = Path(data_dir) / "commitlog"
    bases = list_segment_bases(folder)
    result = StoreVerification(segments=len(bases))
    if not bases:
        if not Path(data_dir).is_dir():
            raise StoreError(f"{data_dir} is not a directory")
        return result
    segment_bytes = (folder / segment_name(bases[0])).stat().st_size
    commit_log = CommitLog(folder, segment_bytes, writable=False)
    try:
        start = commit_log.min_phys_offset
        end_of_data = data_end(commit_log, start)
        for item in walk_log(commit_log, start, commit_log.readable_end()):
            if not isinstance(item, BadRegion):
                result.records_ok += item.record is not None
                if item.hole is not None:
                    result.holes.append(item)
            elif item.phys_offset < end_of_data:  # from there on only zeros: the end of the log
                result.bad_regions.append(item)
    finally:
        commit_log.close()
    if result.bad_regions:
        result.records_hit = _records_in(Path(data_dir) / "consumequeue", result.bad_regions)
    return result


def _records_in(root: Path, regions: list[BadRegion]) -> dict[int, list[QueueSlot]]:
    """The consume queue units that point into ``regions`` (ascending, disjoint), by region."""
    starts = [r.phys_offset for r in regions]
    hit: dict[int, list[QueueSlot]] = {}
    if not root.is_dir():
        return hit
    for topic_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for queue_dir in sorted(p for p in topic_dir.iterdir() if p.name.isdigit()):
            for base in list_segment_bases(queue_dir):
                with open(queue_dir / segment_name(base), "rb") as f:
                    position = base
                    while chunk := f.read(_UNIT_READ_BYTES):
                        for phys_offset, size, _tags in UNIT.iter_unpack(chunk[: len(chunk) - len(chunk) % UNIT_SIZE]):
                            if size > 0:
                                index = bisect.bisect_right(starts, phys_offset) - 1
                                if index >= 0 and phys_offset < starts[index] + regions[index].length:
                                    hit.setdefault(starts[index], []).append(
                                        QueueSlot(topic_dir.name, int(queue_dir.name), position // UNIT_SIZE)
                                    )
                            position += UNIT_SIZE
    return hit
