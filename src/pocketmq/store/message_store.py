"""``MessageStore``: the storage engine's facade (contract in ``pocketmq.store.api``).

Files under ``config.data_dir``::

    commitlog/<20-digit phys offset>                     commit log segments (commit_log.py)
    consumequeue/<topic>/<queue id>/<20-digit byte pos>  consume queue segments (consume_queue.py)
    index/<20-digit phys offset>                         index entries per commit log segment (index.py)
    checkpoint                                           phys offset covered by queues + index (checkpoint.py)
    lock                                                 the owner's PID under an exclusive flock (dir_lock.py)

Put path (event loop, single writer, no await until the flush wait): stamp store time and host, assign queue
offsets from the queues' ``max_queue_offset``, encode every record, one ``CommitLog.append`` (one ``pwrite``
per segment) for the batch, then dispatch: consume queue units packed per queue (one ``pwrite`` per queue per
batch), index keys, and the arrival listeners once per touched queue. A batch is all or nothing.

Integrity: every read verifies the record's frame (commit_log.py); a corrupt record is skipped and its queue
offset passed over, like a record a tag filter drops, and reported (integrity.py: log, metric). Recovery
verifies what was written since the last start (recovery.py). Replication ships a hole of the same length for
it (hole.py); a slave keeps the hole's queue offsets taken with hole units, which reads pass over.

Full disk: a write that fails (ENOSPC) is undone (the commit log and consume queues cut back to where they
were, freeing what it had allocated) and answered SERVICE_NOT_AVAILABLE "disk full"; reads go on.

Durability: ``GroupCommit`` runs the flush; each round fsyncs the commit log in the store's flush thread
(flush_thread.py: the loop waits for a quick round that puts wait on in place) and, when a checkpoint is due,
also the consume queues and the index, then saves the checkpoint. Recovery
(``start``) re-dispatches the commit log from the checkpoint (see recovery.py).

Retention (``clean_expired``, every ``cleanup_interval_ms``: a periodic task, ``store-cleanup``, on the store's
clock): deletes the oldest commit log segments that are
older than ``file_reserved_hours`` or while the disk is fuller than ``disk_max_used_ratio`` (retention.py),
then their index files and the consume queue segments that only point into them.

Thread safety: everything runs on one event loop except the blocking half of a flush, which touches only
segments and index entries taken from the loop before it started; retention, topic deletion and shutdown
take the flush lock so they never close a file a flush is using.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from pocketmq.common import properties as props
from pocketmq.common.errors import StoreError
from pocketmq.common.message import MessageExt, make_offset_msg_id
from pocketmq.common.properties import encode_properties
from pocketmq.common.record import (
    MAX_PROPERTIES_BYTES,
    RecordFormatError,
    decode_record,
    encode_record,
)
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.runtime.periodic import PeriodicTask
from pocketmq.store.api import (
    FlushMode,
    GetResult,
    GetStatus,
    PutResult,
    PutStatus,
    RecoveryReport,
    StoreConfig,
)
from pocketmq.store.checkpoint import Checkpoint
from pocketmq.store.commit_log import CommitLog, CorruptRecordError, Frame, RecordMark
from pocketmq.store.consume_queue import HOLE_UNIT_SIZE, UNIT, UNIT_SIZE, ConsumeQueue
from pocketmq.store.dir_lock import DataDirLock
from pocketmq.store.flush_thread import FlushThread
from pocketmq.store.group_commit import GroupCommit
from pocketmq.store.hole import HOLE_MIN_SIZE, QueueSlot, encode_hole, hole_piece_end, slots_text
from pocketmq.store.index import MessageIndex
from pocketmq.store.integrity import BadRegion, CorruptionReporter
from pocketmq.store.recovery import recover_commit_log
from pocketmq.store.retention import DiskUsage, SegmentAge, segments_to_delete
from pocketmq.store.tags import tag_hash_code
from pocketmq.store.tail_truncation import truncate_tail

log = logging.getLogger(__name__)

REMEMBERED_BAD_REGIONS = 1024

MAX_SCAN_UNITS = 16_000  # units one get may skip through a tag filter (RocketMQ's maxFilterMessageCount)
# Records one get may read and test with a record filter: each test decodes properties in Python (a few µs),
# so this bounds how long one get holds the event loop when nothing matches (the next get goes on from there).
MAX_RECORD_FILTER_READS = 2_000
FILTERED_READ_CHUNK_UNITS = 256  # consume queue units a filtered get unpacks at a time
MAX_QUERY_RESULTS = 64  # records one index query returns at most
DEFAULT_MAX_GET_BYTES = 256 * 1024

ArrivalListener = Callable[[str, int, int], None]
DiskUsageProbe = Callable[[Path], tuple[int, int, int]]  # shutil.disk_usage: (total, used, free)


def tags_code_of(properties: dict[str, str]) -> int:
    tag = properties.get(props.TAGS)
    return tag_hash_code(tag) if tag else 0


def index_keys_of(properties: dict[str, str]) -> list[str]:
    """The keys a record is indexed by: its UNIQ_KEY and each word of its KEYS."""
    keys_text = properties.get(props.KEYS)  # most messages have none: no split then
    keys = [k for k in keys_text.split(" ") if k] if keys_text else []
    uniq_key = properties.get(props.UNIQ_KEY)
    if uniq_key:
        keys.append(uniq_key)
    return keys


def _parse_host(host_port: str) -> tuple[str, int]:
    host, _, port = host_port.rpartition(":")
    return host or "127.0.0.1", int(port)


class _Refused(Exception):
    def __init__(self, status: PutStatus, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class MessageStore:
    def __init__(
        self,
        config: StoreConfig,
        clock: Clock = SYSTEM_CLOCK,
        *,
        disk_usage: DiskUsageProbe = shutil.disk_usage,
        metrics=None,
        read_only_reason: str | None = None,
    ):
        """``metrics``: the broker's ``MetricsRegistry`` (pocketmq_store_corrupt_records_total), or None.
        ``read_only_reason``: a slave's (see below)."""
        self.config = config
        self._clock = clock
        self._disk_usage = disk_usage
        self._data_dir = Path(config.data_dir)
        self._store_host = _parse_host(config.store_host)
        self._msg_id_prefix = make_offset_msg_id(self._store_host, 0)[:16]  # host + port: the same for all
        self._opened_log: CommitLog | None = None  # by start
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._dirty_queues: set[ConsumeQueue] = set()
        self._doomed_queues: list[ConsumeQueue] = []  # deleted while a flush ran; destroyed after it
        self._index = MessageIndex(self._data_dir / "index", config.commit_log_segment_bytes)
        self._checkpoint = Checkpoint(self._data_dir)
        self._verified_phys_offset = 0  # recovery checked every frame below this (saved with the checkpoint)
        self.corruption = CorruptionReporter(clock, metrics)
        # The corrupt stretches the last recovery found, in log order (the newest kept when there are many): the
        # evidence a master's replication check and a slave's tail cut go by.
        self._recovered_bad_regions: list[BadRegion] = []
        self._dir_lock = DataDirLock(self._data_dir)
        self._listeners: list[ArrivalListener] = []
        self._flush_lock = asyncio.Lock()
        self._flush_thread = FlushThread("store-flush", config.flush_block_loop_us / 1e6)
        self._group_commit = GroupCommit(
            self._flush,
            sync=config.flush_mode is FlushMode.SYNC,
            flush_interval_ms=config.flush_interval_ms,
            checkpoint_interval_ms=config.checkpoint_interval_ms,
            metrics=metrics,
        )
        self._cleanup = PeriodicTask(
            "store-cleanup", self.clean_expired, config.cleanup_interval_ms, clock=clock, metrics=metrics
        )
        self._state = "new"
        # A slave's: local puts are refused (SERVICE_NOT_AVAILABLE), only append_replicated writes, so the commit
        # log stays byte-identical to the master's.
        self.read_only_reason = read_only_reason

    # ---- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> RecoveryReport:
        """Open the files and recover (synchronous). Background flush and retention start with the first put
        or now when called on a running event loop. DataDirLockedError when another store owns the directory."""
        if self._state != "new":
            raise StoreError(f"store already {self._state}")
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self._dir_lock.acquire()  # before the first read: another owner may be writing what recovery would read
        try:
            report = self._recover()
        except BaseException:
            self._dir_lock.release()
            raise
        self._state = "running"
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return report
        self._start_background()
        return report

    def _recover(self) -> RecoveryReport:
        commit_log = self._opened_log = CommitLog(self._data_dir / "commitlog", self.config.commit_log_segment_bytes)
        self._load_queues()
        checkpoint = self._checkpoint.load()
        replay_from = commit_log.min_phys_offset
        if checkpoint is not None and commit_log.segments:
            replay_from = min(max(checkpoint, replay_from), commit_log.segments[-1].end_offset)
        for queue in self._queues.values():
            queue.truncate_from_phys(replay_from)
        self._index.load(replay_from)
        report = recover_commit_log(
            commit_log,
            self._checkpoint.verified_phys_offset,
            replay_from,
            self._dispatch_frames,
            self._report_bad_region,
        )
        self._verified_phys_offset = commit_log.max_phys_offset
        for queue in self._queues.values():
            queue.delete_below_phys(commit_log.min_phys_offset)
        self._group_commit.durable_phys_offset = commit_log.max_phys_offset  # what a restart reads back
        return report

    @property
    def _commit_log(self) -> CommitLog:
        if self._opened_log is None:
            raise StoreError("store not started")
        return self._opened_log

    def _report_bad_region(self, region: BadRegion) -> None:
        self.corruption.report("recovery", region.phys_offset, region.reason, f"bytes={region.length}")
        self._recovered_bad_regions.append(region)
        if len(self._recovered_bad_regions) > REMEMBERED_BAD_REGIONS:
            del self._recovered_bad_regions[0]

    def _load_queues(self) -> None:
        root = self._data_dir / "consumequeue"
        if not root.is_dir():
            return
        for topic_dir in sorted(root.iterdir()):
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.name.isdigit():
                    self._queue(topic_dir.name, int(queue_dir.name))

    def _start_background(self) -> None:
        self._group_commit.start()
        self._cleanup.start()

    async def shutdown(self) -> None:
        """Flush everything (commit log, queues, index, checkpoint) and close the files."""
        if self._state != "running":
            return
        self._state = "stopping"
        await self._cleanup.stop()
        await self._group_commit.stop()
        await self._group_commit.flush_now(checkpoint=True)
        async with self._flush_lock:
            self._commit_log.close()
            for queue in self._queues.values():
                queue.close()
            self._destroy_doomed()
        self._flush_thread.stop()
        self._dir_lock.release()
        self._state = "closed"
        log.info("store.closed data_dir=%s", self._data_dir)

    # ---- writing ---------------------------------------------------------------------------------------

    async def put_message(self, msg: MessageExt) -> PutResult:
        return (await self.put_messages([msg]))[0]

    async def put_messages(self, msgs: list[MessageExt]) -> list[PutResult]:
        """Append ``msgs`` as one batch (all or nothing) and dispatch them; under SYNC_FLUSH, then wait for the
        fsync that covers them. See the module docstring."""
        results = self.append_messages(msgs)
        if self.sync_flush:
            return await self.wait_puts_durable(results)
        return results

    async def wait_puts_durable(self, results: list[PutResult]) -> list[PutResult]:
        """``results`` of the latest ``append_messages`` once an fsync covers them (FLUSH_DISK_TIMEOUT when none
        does within the sync flush timeout); refused results as they are."""
        if results and results[0].status is PutStatus.PUT_OK:
            durable = await self._group_commit.wait_durable(
                self._commit_log.max_phys_offset, self.config.sync_flush_timeout_ms
            )
            if not durable:
                results = [_with_status(r, PutStatus.FLUSH_DISK_TIMEOUT) for r in results]
        return results

    @property
    def sync_flush(self) -> bool:
        """Whether ``put_messages`` waits for an fsync (SYNC_FLUSH); if not, ``append_messages`` says it all."""
        return self.config.flush_mode is FlushMode.SYNC

    def append_messages(self, msgs: list[MessageExt]) -> list[PutResult]:
        """``put_messages`` without the durability wait, so without a suspension point: an ASYNC_FLUSH put
        answered at once (the broker's send path avoids a task per request with it)."""
        if self._state != "running":
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=f"store is {self._state}")] * len(msgs)
        if self.read_only_reason is not None:
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=self.read_only_reason)] * len(msgs)
        if not msgs:
            return []
        self._start_background()
        now_ms = self._clock.now_ms()
        start = self._commit_log.max_phys_offset
        try:
            records = self._encode(msgs, now_ms)
            phys_offsets = self._commit_log.append(records)
            for msg, phys_offset in zip(msgs, phys_offsets):
                msg.phys_offset = phys_offset
            self._dispatch(msgs)
        except _Refused as refused:
            return [PutResult(refused.status, reason=refused.reason)] * len(msgs)
        except OSError as exc:
            return [self._write_failed(start, exc)] * len(msgs)
        results = []
        id_prefix = self._msg_id_prefix
        put_ok = PutStatus.PUT_OK
        for msg, phys_offset in zip(msgs, phys_offsets):
            results.append(
                PutResult(
                    put_ok, phys_offset, msg.queue_offset, msg.store_size, now_ms, f"{id_prefix}{phys_offset:016X}"
                )
            )
        return results

    def _write_failed(self, start: int, exc: OSError) -> PutResult:
        """Undo a write that failed halfway (the commit log cut back to ``start``; ``_dispatch`` undid its
        queues) and say why: SERVICE_NOT_AVAILABLE, "disk full" when it was."""
        self._commit_log.truncate(start)
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        log.error("store.append_failed disk_full=%s error=%r", full, exc)
        reason = f"disk full: {exc.strerror}" if full else f"commit log write failed: {exc}"
        return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=reason)

    def _encode(self, msgs: list[MessageExt], now_ms: int) -> list[bytes]:
        next_offsets: dict[tuple[str, int], int] = {}
        records = []
        host = self._store_host
        body_limit = self.config.max_message_bytes
        record_limit = self._commit_log.max_record_bytes
        for msg in msgs:
            # The limit is on the body (what users and both protocols call the message size, as RocketMQ 5
            # allows a record of the max plus its headers); the whole record must still fit in a segment.
            if len(msg.body) > body_limit:
                raise _Refused(
                    PutStatus.MESSAGE_ILLEGAL, f"body of {len(msg.body)} bytes is larger than the limit of {body_limit}"
                )
            key = (msg.topic, msg.queue_id)
            queue_offset = next_offsets.get(key)
            if queue_offset is None:
                queue = self._queues.get(key)
                queue_offset = queue.max_queue_offset if queue is not None else 0
            next_offsets[key] = queue_offset + 1
            msg.queue_offset = queue_offset
            msg.store_timestamp_ms = now_ms
            msg.store_host = host
            properties = encode_properties(msg.properties).encode()
            if len(properties) > MAX_PROPERTIES_BYTES:
                raise _Refused(
                    PutStatus.PROPERTIES_SIZE_EXCEEDED,
                    f"properties are {len(properties)} bytes, more than {MAX_PROPERTIES_BYTES}",
                )
            try:
                record = encode_record(msg, properties)
            except RecordFormatError as exc:
                raise _Refused(PutStatus.MESSAGE_ILLEGAL, str(exc)) from None
            if len(record) > record_limit:
                raise _Refused(
                    PutStatus.MESSAGE_ILLEGAL,
                    f"record of {len(record)} bytes does not fit in a "
                    f"commit log segment of {self.config.commit_log_segment_bytes}",
                )
            records.append(record)
        return records

    def _dispatch(self, msgs: list[MessageExt]) -> None:
        """Write consume queue units for records just appended (``phys_offset`` and ``store_size`` set; one run
        of consecutive offsets per queue and write) and their index keys, then tell the arrival listeners
        about every queue that grew. All or nothing: when a unit write fails (OSError: disk full) the queues
        are cut back to where they were and nothing is indexed."""
        runs: list[tuple[tuple[str, int], int, bytearray]] = []
        open_runs: dict[tuple[str, int], tuple[int, bytearray]] = {}
        pack_unit = UNIT.pack
        for msg in msgs:
            key = (msg.topic, msg.queue_id)
            unit = pack_unit(msg.phys_offset, msg.store_size, tags_code_of(msg.properties))
            run = open_runs.get(key)
            if run is not None and run[0] + len(run[1]) // UNIT_SIZE == msg.queue_offset:
                run[1].extend(unit)
            else:
                open_runs[key] = run = (msg.queue_offset, bytearray(unit))
                runs.append((key, *run))
        ends_before: dict[ConsumeQueue, int] = {}
        try:
            for key, first_offset, units in runs:
                queue = self._queue(*key)
                ends_before.setdefault(queue, queue.max_queue_offset)
                queue.put(first_offset, units)
        except OSError:
            for queue, end in ends_before.items():
                queue.truncate_to(end)
            raise
        index_add = self._index.add
        for msg in msgs:
            properties = msg.properties
            # most messages have a UNIQ_KEY and no KEYS: that one key is indexed without building a list
            if props.KEYS in properties:
                index_add(msg.topic, index_keys_of(properties), msg.phys_offset)
            elif uniq_key := properties.get(props.UNIQ_KEY):
                index_add(msg.topic, (uniq_key,), msg.phys_offset)
        touched = list(ends_before)
        self._dirty_queues.update(touched)
        for listener in self._listeners:
            for queue in touched:
                listener(queue.topic, queue.queue_id, queue.max_queue_offset)

    def _dispatch_frames(self, frames: list[Frame]) -> None:
        """Dispatch records read back from the commit log (recovery, replication), and the queue slots of hole
        frames, in log order (a queue's units must go in in order)."""
        msgs = []
        for frame in frames:
            if frame.record is not None:
                msg, _ = decode_record(frame.record)
                msg.phys_offset, msg.store_size = frame.phys_offset, len(frame.record)
                msgs.append(msg)
            elif frame.hole:
                self._dispatch(msgs)
                msgs = []
                self._dispatch_hole(frame.phys_offset, frame.hole)
        self._dispatch(msgs)

    def _dispatch_hole(self, phys_offset: int, slots: tuple[QueueSlot, ...]) -> None:
        """A hole unit for each queue offset the hole at ``phys_offset`` stands for (hole.py): taken, never read."""
        unit = UNIT.pack(phys_offset, HOLE_UNIT_SIZE, 0)
        for slot in slots:
            queue = self._queue(slot.topic, slot.queue_id)
            queue.put(slot.queue_offset, unit)
            self._dirty_queues.add(queue)
            for listener in self._listeners:
                listener(queue.topic, queue.queue_id, queue.max_queue_offset)

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            queue = ConsumeQueue(
                self._data_dir / "consumequeue" / topic / str(queue_id),
                topic,
                queue_id,
                self.config.consume_queue_segment_units,
            )
            self._queues[(topic, queue_id)] = queue
        return queue

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """``listener(topic, queue_id, max_queue_offset)`` runs on the loop after records reach a queue."""
        self._listeners.append(listener)

    # ---- flushing --------------------------------------------------------------------------------------

    async def _flush(self, checkpoint: bool) -> int:
        """One flush round (run by GroupCommit): returns the phys offset now durable."""
        async with self._flush_lock:
            commit_log = self._commit_log
            segments, covered = commit_log.take_dirty()
            queue_segments: list = []
            index_pending: dict[int, bytes] = {}
            save_at = None
            if checkpoint and (
                covered != self._checkpoint.phys_offset
                or self._verified_phys_offset != self._checkpoint.verified_phys_offset
            ):
                for queue in self._dirty_queues:
                    queue_segments.extend(queue.take_dirty())
                self._dirty_queues.clear()
                index_pending = self._index.take_pending()
                save_at = covered
            if segments or save_at is not None:
                flush = functools.partial(
                    self._flush_blocking,
                    segments,
                    queue_segments,
                    index_pending,
                    save_at,
                    self._verified_phys_offset,
                    self._clock.now_ms(),
                )
                await self._flush_thread.run(flush, waited=save_at is None and self._group_commit.has_waiters)
            commit_log.after_flush()
            self._destroy_doomed()
            return covered

    def _flush_blocking(
        self, segments, queue_segments, index_pending, save_at: int | None, verified: int, now_ms: int
    ) -> None:
        CommitLog.flush_segments(segments)
        if save_at is None:
            return
        self._index.write_pending(index_pending)
        for segment in queue_segments:
            segment.flush()
        self._checkpoint.save(save_at, verified, now_ms)

    @property
    def flush_rounds(self) -> int:
        """Flush rounds run so far (each is at most one fsync of the commit log)."""
        return self._group_commit.rounds

    # ---- reading ---------------------------------------------------------------------------------------

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int,
        *,
        max_bytes: int = DEFAULT_MAX_GET_BYTES,
        tag_filter: Callable[[int], bool] | None = None,
        record_filter: Callable[[bytes], bool] | None = None,
    ) -> GetResult:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE)
        low, high = queue.min_queue_offset, queue.max_queue_offset
        if high == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, min_offset=low, max_offset=high)
        if queue_offset < low:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, next_begin_offset=low, min_offset=low, max_offset=high)
        if queue_offset == high:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, next_begin_offset=high, min_offset=low, max_offset=high)
        if queue_offset > high:
            return GetResult(
                GetStatus.OFFSET_OVERFLOW_BADLY,
                next_begin_offset=low if low == 0 else high,
                min_offset=low,
                max_offset=high,
            )
        records, next_offset, status = self._read_queue(
            queue, queue_offset, max_count, max_bytes, tag_filter, record_filter
        )
        return GetResult(status, records, next_offset, low, high)

    def _read_queue(
        self, queue: ConsumeQueue, queue_offset: int, max_count: int, max_bytes: int, tag_filter, record_filter
    ) -> tuple[list[bytes], int, GetStatus]:
        commit_log = self._commit_log
        min_phys = commit_log.min_phys_offset
        records: list[bytes] = []
        total_bytes = 0
        next_offset = queue_offset
        removed = found_null = False
        scan_end = min(queue.max_queue_offset, queue_offset + MAX_SCAN_UNITS)
        filter_reads_left = MAX_RECORD_FILTER_READS
        while next_offset < scan_end and len(records) < max_count:
            want = scan_end - next_offset
            if tag_filter is None and record_filter is None:  # every unit read is kept: read no more than wanted
                want = min(want, max_count - len(records))
            else:  # in chunks: a get that fills up early must not have unpacked thousands of units for nothing
                want = min(want, FILTERED_READ_CHUNK_UNITS)
            units = queue.read_units(next_offset, want)
            if not units:
                found_null = True
                break
            for phys_offset, size, tags_code in units:
                if len(records) >= max_count or next_offset >= scan_end:
                    break
                if phys_offset < min_phys:
                    removed = True
                elif size == HOLE_UNIT_SIZE:
                    pass  # a record replication lost (hole.py): reported when the hole came, passed over here
                elif tag_filter is None or tag_filter(tags_code):
                    if records and total_bytes + size > max_bytes:
                        return records, next_offset, GetStatus.FOUND
                    try:
                        record = commit_log.read_record(phys_offset, size)
                    except CorruptRecordError as exc:  # never handed out; passed over like a filtered record
                        self.corruption.report(
                            "read",
                            phys_offset,
                            exc.reason,
                            f"topic={queue.topic} queue_id={queue.queue_id} queue_offset={next_offset}",
                        )
                    else:
                        if record is None:
                            found_null = True
                            break
                        if record_filter is None or record_filter(record):
                            records.append(record)
                            total_bytes += size
                        else:
                            filter_reads_left -= 1
                            if not filter_reads_left:  # read enough for one get: end the scan after this unit
                                scan_end = next_offset + 1
                next_offset += 1
            if found_null:
                break
        if records:
            return records, next_offset, GetStatus.FOUND
        if removed:
            return records, next_offset, GetStatus.MESSAGE_WAS_REMOVING
        if found_null:
            return records, next_offset, GetStatus.OFFSET_FOUND_NULL
        return records, next_offset, GetStatus.NO_MATCHED_MESSAGE

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return queue.min_queue_offset if queue is not None else 0

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset to be written (0 for an unknown queue)."""
        queue = self._queues.get((topic, queue_id))
        return queue.max_queue_offset if queue is not None else 0

    def queue_offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms``; the max offset when all are older."""
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return 0
        return queue.offset_by_time(timestamp_ms, self._commit_log.store_timestamp_ms)

    def earliest_store_time_ms(self, topic: str, queue_id: int) -> int:
        """Store timestamp of the queue's oldest record still readable; -1 when there is none."""
        queue = self._queues.get((topic, queue_id))
        unit = queue.unit(queue.min_queue_offset) if queue is not None else None
        if unit is None or unit[0] < self._commit_log.min_phys_offset:
            return -1
        return self._commit_log.store_timestamp_ms(unit[0])

    def first_store_timestamp_ms(self, from_phys_offset: int) -> int:
        """Store timestamp of the first record at or after ``from_phys_offset`` (a frame boundary, e.g. a
        slave's ack), skipping a segment's blank tail; -1 when there is none (end of log, or below retention)."""
        for frame in self._commit_log.scan(max(from_phys_offset, self._commit_log.min_phys_offset)):
            if frame.record is not None:
                return self._commit_log.store_timestamp_ms(frame.phys_offset)
        return -1

    def read_message(self, phys_offset: int) -> MessageExt | None:
        """The message whose frame starts at ``phys_offset`` (an offset message id), else None."""
        if phys_offset < self._commit_log.min_phys_offset:
            return None
        record = self._commit_log.read_frame_record(phys_offset)
        return decode_record(record)[0] if record is not None else None

    def query_by_key(
        self, topic: str, key: str, max_count: int = MAX_QUERY_RESULTS, begin_ms: int = 0, end_ms: int = 2**63 - 1
    ) -> list[MessageExt]:
        """The newest ``max_count`` (at most MAX_QUERY_RESULTS) messages of ``topic`` with ``key`` among their
        KEYS, stored in ``[begin_ms, end_ms]``, oldest first."""
        return self._query(topic, key, max_count, begin_ms, end_ms, lambda m: key in m.keys)

    def query_by_uniq_key(self, topic: str, uniq_key: str) -> list[MessageExt]:
        """The messages of ``topic`` whose UNIQ_KEY (producer message id) is ``uniq_key``, oldest first (the
        first is the original of any redelivered copies)."""
        return self._query(topic, uniq_key, MAX_QUERY_RESULTS, 0, 2**63 - 1, lambda m: m.uniq_key == uniq_key)

    def _query(self, topic: str, key: str, max_count: int, begin_ms: int, end_ms: int, matches) -> list[MessageExt]:
        max_count = max(0, min(max_count, MAX_QUERY_RESULTS))
        found: list[MessageExt] = []
        for phys_offset in reversed(self._index.candidates(topic, key)):
            if len(found) >= max_count:
                break
            msg = self.read_message(phys_offset)
            if msg is not None and msg.topic == topic and begin_ms <= msg.store_timestamp_ms <= end_ms and matches(msg):
                found.append(msg)
        found.reverse()
        return found

    # ---- topics ----------------------------------------------------------------------------------------

    def queues(self) -> dict[str, list[int]]:
        result: dict[str, list[int]] = {}
        for topic, queue_id in sorted(self._queues):
            result.setdefault(topic, []).append(queue_id)
        return result

    def delete_topic(self, topic: str) -> None:
        """Forget the topic's consume queues and delete their files (the records stay in the commit log
        until retention removes them)."""
        doomed = [self._queues.pop(key) for key in [k for k in self._queues if k[0] == topic]]
        for queue in doomed:
            self._dirty_queues.discard(queue)
        self._doomed_queues.extend(doomed)
        if not self._flush_lock.locked():
            self._destroy_doomed()

    def _destroy_doomed(self) -> None:
        for queue in self._doomed_queues:
            queue.destroy()
            try:
                queue.folder.parent.rmdir()  # the topic folder, once its last queue is gone
            except OSError:
                pass
        self._doomed_queues.clear()

    # ---- replication -----------------------------------------------------------------------------------

    @property
    def max_phys_offset(self) -> int:
        return self._commit_log.max_phys_offset

    @property
    def min_phys_offset(self) -> int:
        return self._commit_log.min_phys_offset

    @property
    def durable_phys_offset(self) -> int:
        """The commit log is on disk (fsynced) below this phys offset: what survives a power loss."""
        return self._group_commit.durable_phys_offset

    async def wait_durable(self, phys_offset: int, timeout_ms: int) -> bool:
        """Wait until the log is durable up to ``phys_offset``, asking the group commit for a round now (under
        ASYNC_FLUSH too, instead of its next interval; one fsync covers everyone waiting). False on timeout or
        a failed flush; False at once when the store is not running (its flush task is gone)."""
        if self._state != "running":
            return False
        return await self._group_commit.wait_durable(phys_offset, timeout_ms)

    def read_commit_log(self, phys_offset: int, max_bytes: int, *, durable_only: bool = False) -> bytes:
        """Whole frames from ``phys_offset`` (a frame boundary a reader got from ``max_phys_offset`` or a
        previous read), at most ``max_bytes`` unless one frame is larger; empty at the end of the log (with
        ``durable_only``, at ``durable_phys_offset``: what a master may hand its slaves). Where the log holds no
        valid frame, a hole frame of the same length instead (hole.py), alone in its answer."""
        end = self._group_commit.durable_phys_offset if durable_only else self._commit_log.max_phys_offset
        try:
            return bytes(self._commit_log.read_frames(phys_offset, max_bytes, end))
        except CorruptRecordError as exc:  # a slave must not get the bytes: it gets a hole of their length
            return self._hole_for(exc, max_bytes, end)

    def _hole_for(self, corrupt: CorruptRecordError, max_bytes: int, end: int) -> bytes:
        """The hole frame (hole.py) that replaces the corrupt stretch starting at ``corrupt.phys_offset`` (or its
        first ``max_bytes``), naming the queue offsets of the records in it; reported and logged."""
        start = corrupt.phys_offset
        piece_end = hole_piece_end(start, self._commit_log.bad_region_end(start, end), max_bytes)
        if piece_end - start < HOLE_MIN_SIZE:  # not a stretch one of our records left: nothing to stand for
            self.corruption.report("replication_source", start, corrupt.reason)
            raise corrupt
        slots = self._queue_slots_in(start, piece_end)
        data, kept = encode_hole(piece_end - start, slots)
        self.corruption.report(
            "replication_source",
            start,
            corrupt.reason,
            f"action=shipped_as_hole bytes={piece_end - start} records={slots_text(kept)}",
        )
        if len(kept) < len(slots):
            log.warning(
                "store.hole_slots_left_out phys_offset=%d bytes=%d left_out=%s",
                start,
                piece_end - start,
                slots_text(slots[len(kept) :]),
            )
        return data

    def _queue_slots_in(self, start: int, end: int) -> list[QueueSlot]:
        """The queue offsets whose units point into ``[start, end)`` of the commit log (a binary search per
        queue: units are in phys offset order)."""
        slots = []
        for queue in self._queues.values():
            queue_offset = queue.first_offset_with_phys_at_least(start)
            while (unit := queue.unit(queue_offset)) is not None and unit[0] < end:
                slots.append(QueueSlot(queue.topic, queue.queue_id, queue_offset))
                queue_offset += 1
        slots.sort(key=lambda slot: (slot.topic, slot.queue_id, slot.queue_offset))
        return slots

    def last_record(self) -> RecordMark | None:
        """The phys offset and CRC32C of the log's last record (None when empty): how a slave names its end."""
        return self._commit_log.last_record()

    def last_record_crc32c(self, record_phys_offset: int, end_phys_offset: int) -> int | None:
        """The CRC32C of the record at ``record_phys_offset`` if it is the last record of this log before
        ``end_phys_offset``; None when there is no such record (another log's end cannot be a prefix of this)."""
        return self._commit_log.last_record_crc32c(record_phys_offset, end_phys_offset)

    def recovered_corrupt_stretch(self, phys_offset: int, end_phys_offset: int) -> bool:
        """Whether ``[phys_offset, end_phys_offset)`` lies inside one corrupt stretch the last recovery found:
        bytes this log held as valid frames once (recovery only verifies what the log wrote) and lost, so
        nothing here tells what they were, nor where their frames began."""
        return any(
            region.phys_offset <= phys_offset < end_phys_offset <= region.phys_offset + region.length
            for region in self._recovered_bad_regions
        )

    def corrupt_tail(self) -> int | None:
        """Where the corrupt stretch that ends this log begins, when the last recovery found its last bytes
        corrupt and nothing was written since; else None. Recovery keeps such a stretch in place, since on a
        master consumers may have passed its queue offsets; a slave cuts it and copies the records again."""
        if not self._recovered_bad_regions:
            return None
        last = self._recovered_bad_regions[-1]
        return last.phys_offset if last.phys_offset + last.length == self.max_phys_offset else None

    async def append_replicated(self, phys_offset: int, data: bytes) -> int:
        """Append frames read from a master at exactly ``phys_offset`` (validated; nothing is written when
        any is invalid) and dispatch them like local puts. Returns the new ``max_phys_offset``. A write that
        fails (a full disk) is undone and raises StoreError."""
        if self._state != "running":
            raise StoreError(f"store is {self._state}")
        self._start_background()
        try:
            frames = self._commit_log.append_frames(phys_offset, data)
            self._dispatch_frames(frames)
        except CorruptRecordError as exc:  # nothing was written; the slave asks again
            self.corruption.report("replication", exc.phys_offset, exc.reason)
            raise
        except OSError as exc:  # undone, as a local put's failed write is; the slave asks again
            self._commit_log.truncate(phys_offset)
            for queue in self._queues.values():
                queue.truncate_from_phys(phys_offset)
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            log.error("store.append_replicated_failed disk_full=%s error=%r", full, exc)
            raise StoreError(f"disk full: {exc.strerror}" if full else f"commit log write failed: {exc}") from exc
        for frame in frames:
            if frame.hole is not None:  # the master's copy was corrupt: this slave holds a hole for it
                self.corruption.report(
                    "replication",
                    frame.phys_offset,
                    "hole_from_master",
                    f"bytes={frame.size} records={slots_text(frame.hole)}",
                )
        if self.config.flush_mode is FlushMode.SYNC:
            await self._group_commit.wait_durable(self._commit_log.max_phys_offset, self.config.sync_flush_timeout_ms)
        return self._commit_log.max_phys_offset

    async def truncate_tail(self, phys_offset: int) -> int:
        """Drop the records at and after ``phys_offset`` (a record boundary), their consume queue units and
        index entries, durably (a flush with a checkpoint at the cut); returns the bytes dropped. StoreError
        when the offset is not a boundary of the log or the flush failed (then the cut may not be durable)."""
        if self._state != "running":
            raise StoreError(f"store is {self._state}")
        async with self._flush_lock:
            dropped, cut_queues = truncate_tail(self._commit_log, self._queues.values(), self._index, phys_offset)
            self._recovered_bad_regions = [r for r in self._recovered_bad_regions if r.phys_offset < phys_offset]
            self._dirty_queues.update(cut_queues)
            self._group_commit.durable_phys_offset = min(self._group_commit.durable_phys_offset, phys_offset)
            self._verified_phys_offset = min(self._verified_phys_offset, phys_offset)  # what comes there is new
        if dropped and not await self._group_commit.flush_now(checkpoint=True):
            raise StoreError(f"the commit log cut at {phys_offset} was not flushed")
        return dropped

    # ---- retention -------------------------------------------------------------------------------------

    async def clean_expired(self) -> int:
        """Delete what retention says may go now; returns the number of commit log segments deleted."""
        async with self._flush_lock:
            commit_log = self._commit_log
            durable_until = self._checkpoint.phys_offset or 0
            candidates = [
                SegmentAge(s.base_offset, s.size_bytes, os.stat(s.path).st_mtime_ns // 1_000_000)
                for s in commit_log.segments[:-1]
                if s.end_offset <= durable_until
            ]
            total, used, _free = self._disk_usage(self._data_dir)
            count = segments_to_delete(
                candidates,
                self._clock.now_ms(),
                int(self.config.file_reserved_hours * 3_600_000),
                DiskUsage(total, used),
                self.config.disk_max_used_ratio,
            )
            for segment in commit_log.segments[:count]:
                commit_log.delete_segment(segment)
                self._index.delete_segment(segment.base_offset, segment.end_offset)
            queue_segments = 0
            if count:
                for queue in self._queues.values():
                    queue_segments += queue.delete_below_phys(commit_log.min_phys_offset)
                log.info(
                    "store.retention deleted_segments=%d consume_queue_segments=%d min_phys_offset=%d",
                    count,
                    queue_segments,
                    commit_log.min_phys_offset,
                )
            return count

    def __repr__(self) -> str:
        commit_log = self._commit_log
        positions = (
            f" min_phys={commit_log.min_phys_offset} max_phys={commit_log.max_phys_offset}"
            if commit_log is not None
            else ""
        )
        return (
            f"<MessageStore {self._data_dir} {self._state} flush={self.config.flush_mode.value}{positions} "
            f"durable={self._group_commit.durable_phys_offset} queues={len(self._queues)}>"
        )


def _with_status(result: PutResult, status: PutStatus) -> PutResult:
    return PutResult(
        status,
        result.phys_offset,
        result.queue_offset,
        result.store_size,
        result.store_timestamp_ms,
        result.offset_msg_id,
        reason="no fsync covered the record within the sync flush timeout",
    )
