"""The master's view of its slaves, pure: who follows, how far each has acknowledged, who is in sync.

A slave acknowledges by the phys offset it asks for next (HA_PULL_COMMIT_LOG ``physOffset``): everything
before it is in the slave's commit log. A record that starts at phys offset P is replicated once some slave
acknowledged an offset > P (slaves hold whole records only).

A slave counts for SYNC_MASTER sends while it is *in sync*: heard from within ``expire_ms`` and trailing the
master's log end by at most ``max_gap_bytes`` (RocketMQ's ``haMaxGapNotInSync``). With none in sync a send
answers SLAVE_NOT_AVAILABLE at once; otherwise it waits for an ack (FLUSH_SLAVE_TIMEOUT when none comes).

Durability: a master hands slaves only records that are durable on its own disk (``pull_step``), so an ack
never covers a record the master could lose in a power loss and then write differently at the same phys
offset. Continuity: a slave names the end of its log by its last record (phys offset and CRC32C,
``RecordMark``), and ``replication_start`` refuses a slave whose last record is not the master's record
there: lengths alone cannot tell a prefix of the master's log from another log of the same size.

Metadata: a slave also names the metadata version it applied last (``MetadataVersion``); a FIFO ack on a
SYNC master waits until an in-sync slave's version reaches the one the ack made (``metadata_verdict``), with
the same verdicts as a record.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass

from pocketmq.cluster.metadata_version import MetadataVersion
from pocketmq.store.commit_log import RecordMark


class PullStep(enum.Enum):
    """What the master does with a slave's pull from ``start`` now."""

    SERVE = "serve"  # durable records follow start: answer with them
    AWAIT_FLUSH = "await_flush"  # records are written there but not durable yet: ask for a flush, then serve
    AWAIT_ARRIVAL = "await_arrival"  # nothing written after start: hold the pull until a put


def pull_step(start_phys_offset: int, durable_phys_offset: int, max_phys_offset: int) -> PullStep:
    """Serve only what is on the master's disk; never make a slave wait for the periodic flush."""
    if durable_phys_offset > start_phys_offset:
        return PullStep.SERVE
    return PullStep.AWAIT_FLUSH if max_phys_offset > start_phys_offset else PullStep.AWAIT_ARRIVAL


class SyncVerdict(enum.Enum):
    REPLICATED = "replicated"  # some slave has the record
    WAIT = "wait"  # an in-sync slave exists but has not acknowledged it yet
    NO_SLAVE = "no_slave"  # no slave in sync: the record cannot be replicated now


@dataclass(slots=True)
class SlaveProgress:
    slave_addr: str  # the slave's advertised remoting address (for logs and runtime info)
    acked_phys_offset: int
    last_heard_ms: int
    applied_metadata: MetadataVersion | None = None  # the version of the last snapshot it applied (None: unsaid)


class ReplicaAcks:
    """Progress of every connected slave, keyed by its connection (one entry per live link)."""

    def __init__(self, *, max_gap_bytes: int, expire_ms: int):
        self._max_gap_bytes = max_gap_bytes
        self._expire_ms = expire_ms
        self._slaves: dict[Hashable, SlaveProgress] = {}

    def heard(
        self,
        link: Hashable,
        slave_addr: str,
        acked_phys_offset: int,
        now_ms: int,
        applied_metadata: MetadataVersion | None = None,
    ) -> bool:
        """A pull from ``link``; returns True when the link is new."""
        progress = self._slaves.get(link)
        if progress is None:
            self._slaves[link] = SlaveProgress(slave_addr, acked_phys_offset, now_ms, applied_metadata)
            return True
        progress.acked_phys_offset = max(progress.acked_phys_offset, acked_phys_offset)
        progress.last_heard_ms = now_ms
        if applied_metadata is not None:  # the slave's latest snapshot (a restarted master's counters restart)
            progress.applied_metadata = applied_metadata
        return False

    def gone(self, link: Hashable) -> SlaveProgress | None:
        return self._slaves.pop(link, None)

    def expire(self, now_ms: int) -> list[SlaveProgress]:
        """Forget slaves silent for longer than ``expire_ms`` (a half-open connection); returns them."""
        stale = [link for link, p in self._slaves.items() if now_ms - p.last_heard_ms > self._expire_ms]
        return [self._slaves.pop(link) for link in stale]

    def in_sync(self, master_max_phys_offset: int, now_ms: int) -> list[SlaveProgress]:
        return [
            p
            for p in self._slaves.values()
            if now_ms - p.last_heard_ms <= self._expire_ms
            and master_max_phys_offset - p.acked_phys_offset <= self._max_gap_bytes
        ]

    @property
    def best_acked_phys_offset(self) -> int:
        return max((p.acked_phys_offset for p in self._slaves.values()), default=-1)

    def verdict(self, record_phys_offset: int, master_max_phys_offset: int, now_ms: int) -> SyncVerdict:
        """What a SYNC_MASTER send of the record at ``record_phys_offset`` should do now."""
        in_sync = self.in_sync(master_max_phys_offset, now_ms)
        if any(p.acked_phys_offset > record_phys_offset for p in in_sync):
            return SyncVerdict.REPLICATED
        return SyncVerdict.WAIT if in_sync else SyncVerdict.NO_SLAVE

    def metadata_verdict(self, needed: MetadataVersion, master_max_phys_offset: int, now_ms: int) -> SyncVerdict:
        """What a SYNC_MASTER's FIFO ack that made metadata version ``needed`` should do now."""
        in_sync = self.in_sync(master_max_phys_offset, now_ms)
        if any(p.applied_metadata is not None and p.applied_metadata.reaches(needed) for p in in_sync):
            return SyncVerdict.REPLICATED
        return SyncVerdict.WAIT if in_sync else SyncVerdict.NO_SLAVE

    def slaves(self) -> list[SlaveProgress]:
        return list(self._slaves.values())

    def __repr__(self) -> str:
        return f"<ReplicaAcks slaves={[(p.slave_addr, p.acked_phys_offset) for p in self._slaves.values()]}>"


def replication_start(
    slave_phys_offset: int,
    master_min_phys_offset: int,
    master_max_phys_offset: int,
    slave_last: RecordMark | None = None,
    master_crc32c_there: int | None = None,
) -> int:
    """Where a slave whose log ends at ``slave_phys_offset`` continues; ValueError when it cannot follow.

    An empty slave (offset 0) starts where the master's log begins (retention may have removed the start);
    a slave behind that, or ahead of the master's end (it followed another master), has diverged. A slave
    that names its last record (``slave_last``; an older one does not) follows only if the master's last
    record before ``slave_phys_offset`` is that one: ``master_crc32c_there`` is its CRC32C, None when the
    master has no record ending there. A last record below the master's retention cannot be checked.
    """
    start = _start_by_length(slave_phys_offset, master_min_phys_offset, master_max_phys_offset)
    if (
        slave_last is not None
        and slave_last.phys_offset >= master_min_phys_offset
        and master_crc32c_there != slave_last.crc32c
    ):
        there = (
            "no record of the master ends there"
            if master_crc32c_there is None
            else f"the master's record there has crc32c {master_crc32c_there:08x}"
        )
        raise ValueError(
            f"slave log ends with a record at {slave_last.phys_offset} (crc32c {slave_last.crc32c:08x}) "
            f"that is not the master's ({there}): it diverged (clear its data directory to copy the "
            "master again)"
        )
    return start


def _start_by_length(slave_phys_offset: int, master_min_phys_offset: int, master_max_phys_offset: int) -> int:
    if slave_phys_offset > master_max_phys_offset:
        raise ValueError(
            f"slave log ends at {slave_phys_offset}, beyond the master's end {master_max_phys_offset}: "
            "it diverged (clear its data directory to copy the master again)"
        )
    if slave_phys_offset < master_min_phys_offset:
        if slave_phys_offset == 0:
            return master_min_phys_offset
        raise ValueError(
            f"slave log ends at {slave_phys_offset}, before the master's first record at "
            f"{master_min_phys_offset}: retention removed what it misses"
        )
    return slave_phys_offset
