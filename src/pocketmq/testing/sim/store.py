"""A broker's message store in the simulation: the commit log on a ``SimDisk`` plus consume queues rebuilt
from it (as the real store dispatches and recovers them).

Records are ``MessageExt`` objects with their phys offset and queue offset, so a slave holds byte-for-byte the
same positions as its master. A record's CRC32C (what the real store's frame header carries) is that of its
encoded record, so the real ``replication_start`` checks a slave's last record as against the real store.
``get_messages`` answers with the real store API types (``GetResult`` of encoded records), which is what
``LocalMessageReader`` and the PULL_MESSAGE path read. ``ProcessStore`` is the store as PocketMQ's own services
(``ReviveQueue``, revive's ``LocalReviveWrites``) call it: the same reads, and ``put_messages`` that returns once
the records are durable.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from crc32c import crc32c

from pocketmq.common.message import MessageExt
from pocketmq.common.record import encode_record
from pocketmq.store.api import GetResult, GetStatus, PutResult, PutStatus
from pocketmq.store.commit_log import RecordMark
from pocketmq.testing.sim.disk import SimDisk
from pocketmq.testing.sim.kernel import SimFuture

_RECORD_OVERHEAD_BYTES = 96


def record_size(msg: MessageExt) -> int:
    return _RECORD_OVERHEAD_BYTES + len(msg.body) + len(msg.topic) + 24 * len(msg.properties)


def record_mark(msg: MessageExt) -> RecordMark:
    return RecordMark(msg.phys_offset, crc32c(encode_record(msg)))


class SimStore:
    def __init__(self, disk: SimDisk):
        self.disk = disk
        self._phys: list[int] = []
        self._queues: dict[tuple[str, int], list[int]] = {}  # (topic, queue id) -> record indexes
        self.recover()

    def recover(self) -> None:
        """Rebuild the consume queues from what is on disk (after a restart)."""
        self._phys = [m.phys_offset for m in self.disk.records]
        self._queues = {}
        for index, msg in enumerate(self.disk.records):
            self._queues.setdefault((msg.topic, msg.queue_id), []).append(index)

    @property
    def max_phys_offset(self) -> int:
        # Sizes come from the content, not ``store_size``: encoding a record for a read rewrites that field.
        records = self.disk.records
        return records[-1].phys_offset + record_size(records[-1]) if records else 0

    @property
    def durable_phys_offset(self) -> int:
        """The end of the flushed records: what survives a power loss."""
        flushed = self.disk.flushed_count
        return (
            self.disk.records[flushed - 1].phys_offset + record_size(self.disk.records[flushed - 1]) if flushed else 0
        )

    def last_record(self) -> RecordMark | None:
        return record_mark(self.disk.records[-1]) if self.disk.records else None

    def last_record_crc32c(self, record_phys_offset: int, end_phys_offset: int) -> int | None:
        """The CRC32C of the record at ``record_phys_offset`` if it is the last one before ``end_phys_offset``."""
        index = bisect.bisect_left(self._phys, record_phys_offset)
        if index == len(self._phys) or self._phys[index] != record_phys_offset:
            return None
        msg = self.disk.records[index]
        return record_mark(msg).crc32c if msg.phys_offset + record_size(msg) == end_phys_offset else None

    def append(self, msg: MessageExt, now_ms: int) -> MessageExt:
        """Store ``msg`` as the next record: its queue offset and phys offset are assigned here."""
        queue = self._queues.setdefault((msg.topic, msg.queue_id), [])
        msg.queue_offset = len(queue)
        msg.phys_offset = self.max_phys_offset
        msg.store_timestamp_ms = now_ms
        self._add(msg)
        return msg

    def append_replicated(self, msg: MessageExt) -> bool:
        """A record copied from the master; False (nothing stored) unless it continues this log exactly."""
        if msg.phys_offset != self.max_phys_offset or msg.queue_offset != len(
            self._queues.get((msg.topic, msg.queue_id), ())
        ):
            return False
        self._add(msg)
        return True

    def _add(self, msg: MessageExt) -> None:
        self._queues.setdefault((msg.topic, msg.queue_id), []).append(len(self.disk.records))
        self._phys.append(msg.phys_offset)
        self.disk.append([msg])

    def durable_records_from(self, phys_offset: int, limit: int) -> list[MessageExt]:
        """Flushed records from ``phys_offset`` (what a master hands its slaves, as ``read_commit_log``)."""
        start = bisect.bisect_left(self._phys, phys_offset)
        return self.disk.records[start : min(start + limit, self.disk.flushed_count)]

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        return 0  # the simulation keeps every record (no retention)

    def queue_max(self, topic: str, queue_id: int) -> int:
        return len(self._queues.get((topic, queue_id), ()))

    def read(self, topic: str, queue_id: int, queue_offset: int, count: int) -> list[MessageExt]:
        """Up to ``count`` records from ``queue_offset``; ``OSError`` on an injected read failure."""
        indexes = self._queues.get((topic, queue_id), [])[queue_offset : queue_offset + count]
        return [self.disk.read(i) for i in indexes]

    def get_messages(
        self, topic: str, queue_id: int, queue_offset: int, max_count: int, max_bytes: int | None = None
    ) -> GetResult:
        max_offset = self.queue_max(topic, queue_id)
        if max_offset == 0:
            status = GetStatus.NO_MESSAGE_IN_QUEUE
        elif queue_offset == max_offset:
            status = GetStatus.OFFSET_OVERFLOW_ONE
        elif queue_offset > max_offset:
            status = GetStatus.OFFSET_OVERFLOW_BADLY
        else:
            records = [encode_record(m) for m in self.read(topic, queue_id, queue_offset, max_count)]
            return GetResult(GetStatus.FOUND, records, queue_offset + len(records), 0, max_offset)
        return GetResult(status, [], queue_offset, 0, max_offset)

    def __repr__(self) -> str:
        return f"<SimStore records={len(self._phys)} max_phys_offset={self.max_phys_offset}>"


class ProcessStore:
    """One broker process's ``SimStore`` behind the store API its real services call. ``append`` is the broker's
    SYNC_FLUSH append (its future resolves once the records are durable); a process that died stores nothing."""

    def __init__(self, store: SimStore, append: Callable[[list[MessageExt]], SimFuture], alive: Callable[[], bool]):
        self._store = store
        self._append = append
        self._alive = alive

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        return self._store.min_queue_offset(topic, queue_id)

    def get_messages(
        self, topic: str, queue_id: int, queue_offset: int, max_count: int, max_bytes: int | None = None
    ) -> GetResult:
        return self._store.get_messages(topic, queue_id, queue_offset, max_count, max_bytes)

    async def put_messages(self, messages: list[MessageExt]) -> list[PutResult]:
        if not self._alive():
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason="the process is gone")] * len(messages)
        await self._append(messages)
        return [PutResult(PutStatus.PUT_OK)] * len(messages)

    def __repr__(self) -> str:
        return f"<ProcessStore {self._store!r}>"
