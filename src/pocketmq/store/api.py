"""The store's public types: what a put and a get return, and the store's configuration.

Contract of ``MessageStore`` (pocketmq.store.message_store), which the broker relies on:

- ``MessageStore(config, clock=SYSTEM_CLOCK)``; ``start() -> RecoveryReport`` recovers synchronously;
  ``await shutdown()`` flushes and closes.
- ``await put_message(msg: MessageExt) -> PutResult`` and ``await put_messages(msgs) -> list[PutResult]`` (one
  append, one flush for the batch). The caller fills topic, queue_id, body, properties, flag, sys_flag,
  born timestamp/host, reconsume_times; the store assigns queue_offset, phys_offset, store_timestamp_ms and
  store_host. Under SYNC_FLUSH the call returns once the record is on disk (group commit: one fsync for
  many concurrent puts); under ASYNC_FLUSH once it is in the commit log's memory.
- ``get_messages(topic, queue_id, queue_offset, max_count, *, max_bytes, tag_filter, record_filter) ->
  GetResult``: raw records (RocketMQ 4.x layout, ready to be concatenated into a pull reply). ``tag_filter``
  takes the tag hash code of the consume queue unit and says whether to keep it; ``record_filter`` (SQL92
  property filters) takes the record read, after ``tag_filter`` kept its unit. A record either drops is
  passed over: its queue offset is behind ``next_begin_offset``. O(1) seek by queue offset.
  Every record is verified against its frame (CRC32C); a corrupt one is never returned: it is passed over
  like a filtered record (its queue offset skipped) and reported (store/integrity.py).
- ``min_queue_offset`` / ``max_queue_offset`` (max = the next offset to be written) / ``queue_offset_by_time``
  (binary search on store timestamps) / ``earliest_store_time_ms``, each per (topic, queue_id).
- ``read_message(phys_offset) -> MessageExt | None``; ``query_by_key(topic, key, max_count, begin_ms, end_ms)``
  and ``query_by_uniq_key(topic, uniq_key)`` through the index.
- ``add_arrival_listener(cb(topic, queue_id, max_queue_offset))``: called on the event loop after new records
  reach a consume queue (long polling wakes on it).
- ``delete_topic(topic)``; ``queues() -> dict[str, list[int]]``.
- Replication (a slave follows its master by phys offset): ``max_phys_offset``, ``min_phys_offset``,
  ``read_commit_log(phys_offset, max_bytes, *, durable_only) -> bytes`` (whole records only, a hole frame in place
  of corrupt bytes (hole.py); with
  ``durable_only`` only below ``durable_phys_offset``, what survives a power loss), ``await
  wait_durable(phys_offset, timeout_ms)`` (asks the group commit for a round now), and
  ``await append_replicated(phys_offset, data)`` which appends records read from a master at exactly that
  offset and dispatches them into consume queues and the index like local puts. Continuity:
  ``last_record()`` (phys offset and CRC32C of the last record) on the slave, checked on the master by
  ``last_record_crc32c(record_phys_offset, end_phys_offset)``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path


class FlushMode(enum.Enum):
    ASYNC = "async"  # group commit on an interval; a put returns once the record is in memory
    SYNC = "sync"  # a put returns once its record is fsynced (many puts share one fsync)

    @classmethod
    def parse(cls, text: str) -> FlushMode:
        value = text.lower().replace("_flush", "")
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown flush mode {text!r} (expected async|sync)") from None


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # store shut down, read-only, or disk full
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # too large, topic too long
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def stored(self) -> bool:
        """The record is in the commit log (maybe not yet on disk or on a slave)."""
        return self in (
            PutStatus.PUT_OK,
            PutStatus.FLUSH_DISK_TIMEOUT,
            PutStatus.FLUSH_SLAVE_TIMEOUT,
            PutStatus.SLAVE_NOT_AVAILABLE,
        )


# Not frozen, though treated as a value: a frozen dataclass costs ~0.6 µs more to build, once per stored message.
@dataclass(slots=True)
class PutResult:
    status: PutStatus
    phys_offset: int = -1
    queue_offset: int = -1
    store_size: int = 0
    store_timestamp_ms: int = 0
    offset_msg_id: str = ""
    reason: str = ""


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"  # records exist but the tag filter kept none
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"  # the consume queue points below the commit log's minimum
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"  # the unit could not be read (should not happen; needs retry)
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"  # offset > max
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"  # offset == max: nothing new yet
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"  # offset < min (retention removed it)
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"  # no such topic/queue in the store
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"  # the queue exists and is empty


@dataclass(slots=True)
class GetResult:
    status: GetStatus
    records: list[bytes] = field(default_factory=list)  # raw records, RocketMQ 4.x layout
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0

    def messages(self):
        from pocketmq.common.record import decode_record

        return [decode_record(r)[0] for r in self.records]


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery found: where the valid commit log ends and what it dropped beyond that."""

    max_phys_offset: int
    dropped_bytes: int
    dropped_from_phys_offset: int | None
    records_replayed: int
    reason: str = ""
    corrupt_regions: int = 0  # stretches below the checkpoint without a valid frame (kept; reads skip them)
    corrupt_bytes: int = 0


def _positive(value) -> str | None:
    return None if value > 0 else "must be positive"


def _not_negative(value) -> str | None:
    return None if value >= 0 else "must not be negative"


def _ratio(value) -> str | None:
    return None if 0.0 < value <= 1.0 else "must be in (0, 1]"


@dataclass(frozen=True)
class StoreConfig:
    data_dir: Path = Path("data")
    commit_log_segment_bytes: int = field(
        default=128 * 1024 * 1024, metadata={"check": _positive, "aliases": ("mappedFileSizeCommitLog",)}
    )
    consume_queue_segment_units: int = field(default=300_000, metadata={"check": _positive})
    flush_mode: FlushMode = field(default=FlushMode.ASYNC, metadata={"aliases": ("flushDiskType",)})
    flush_interval_ms: int = field(default=500, metadata={"check": _positive, "aliases": ("flushIntervalCommitLog",)})
    sync_flush_timeout_ms: int = field(default=5000, metadata={"check": _positive, "aliases": ("syncFlushTimeout",)})
    # How long the event loop may block on an fsync that sends wait for, instead of being woken when it is done
    # (flush_thread.py); 0: never blocks.
    flush_block_loop_us: int = field(default=1000, metadata={"check": _not_negative})
    max_message_bytes: int = field(
        default=4 * 1024 * 1024,
        metadata={
            "check": _positive,  # the largest body
            "aliases": ("maxMessageSize",),
        },
    )
    file_reserved_hours: float = field(default=72.0, metadata={"check": _positive, "aliases": ("fileReservedTime",)})
    disk_max_used_ratio: float = field(default=0.75, metadata={"check": _ratio})
    cleanup_interval_ms: int = field(default=10_000, metadata={"check": _positive})
    checkpoint_interval_ms: int = field(default=1000, metadata={"check": _positive})
    store_host: str = "127.0.0.1:10911"  # the host:port baked into offset message ids
