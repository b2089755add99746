"""The transaction service of one broker: half messages in, their endings out, and the check loop between.

- **Send path** (``divert``, called by ``MessageService`` for every message it is about to store): a message whose
  ``TRAN_MSG`` property is "true" becomes a half message (``records.make_half``); its topic must accept
  TRANSACTION messages, and ``reject_transaction_message`` refuses it (NO_PERMISSION, as RocketMQ).
- **END_TRANSACTION** (``end``; both front ends): the half record at the commit log offset the request names
  (the send path's own object for the last 1,024 half messages stored, else read back) is checked
  (``decision.end_refusal``); COMMIT writes the real message and the op record in one store
  batch, ROLLBACK the op record, UNKNOWN nothing. Each half message ends once: a second ending (a late client
  answer after a check answer, a duplicate) is ignored and logged, where RocketMQ would store the message again.
  On a slave: SLAVE_NOT_AVAILABLE.
- **Check loop** (a periodic task; ``run_round`` is one round): reads what is new in the half queue (and, at
  the rebuild, the op queue: after it every op record is this service's own, in the table already) into the
  ``PendingTable``, then for each message whose time has come (``decision.decide``): a *check* (one check-mark
  record per batch, then CHECK_TRANSACTION_STATE / a recovery command to a live producer of its group through
  ``ProducerChannels``), or a *discard* to ``TRANS_CHECK_MAX_TIME_TOPIC`` with the reason. Progress is the
  consumer offsets of ``CID_RMQ_SYS_TRANS`` (persisted with the others, and copied to slaves by the metadata
  sync). The loop wakes for the next due check, at least every ``min(transactionCheckInterval,
  transactionTimeOut)``, and reads the settings each round (dynamic).
- **Slave acting as master** (its write path escapes: ``broker.write_path``, ``TransactionWrites.escapes``;
  ``broker.acting_services`` starts and stops the service then): the same loop, but every pending message is
  escaped, still a
  half message, to another group's master (``EscapedTransactionWrites``), which checks it itself; the slave only
  moves its progress past it (a returning master takes those offsets over, so it does not check them again).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pocketmq.broker.transaction.channels import HalfCheck, ProducerChannels
from pocketmq.broker.transaction.decision import (
    NOT_FOUND,
    CheckSettings,
    Commit,
    EndRequest,
    Verdict,
    end_refusal,
)
from pocketmq.broker.transaction.records import (
    CHECK_MARK_TAG,
    DISCARD_QUEUE_ID,
    DISCARD_TOPIC,
    HALF_QUEUE_ID,
    OP_QUEUE_ID,
    PROGRESS_GROUP,
    RESOLUTION_TAG,
    RESUMED_FROM,
    DiscardReason,
    Resolution,
    Source,
    checks_carried,
    immunity_ms,
    is_half_record,
    is_half_request,
    make_half,
    op_from,
    op_kind,
    parse_check_mark,
    parse_resolution,
    producer_group,
    real_queue_id,
    real_topic,
    resumed_half,
    transaction_id,
)
from pocketmq.broker.transaction.state import PendingHalf, PendingTable, Status
from pocketmq.broker.transaction.writes import TransactionWrites
from pocketmq.broker.write_backoff import PassPacer
from pocketmq.common import properties as props
from pocketmq.common.errors import BadRequestError, MessageTypeConflictError, NoPermissionError
from pocketmq.common.message import MessageExt
from pocketmq.common.record import decode_record, record_queue_offset
from pocketmq.common.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, MessageType, TopicConfig
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.codes import ResponseCode
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.periodic import PeriodicTask
from pocketmq.runtime.rate_limited_log import RateLimitedLog
from pocketmq.store.api import GetStatus
from pocketmq.store.write_result import WriteResult

log = logging.getLogger(__name__)
_refusals_log = RateLimitedLog(log, 10.0)  # per reason: a client that keeps sending bad endings
_no_producer_log = RateLimitedLog(log, 10.0)  # per producer group

CHECK_BATCH = 256
_RECENT_HALVES = 1024  # due messages taken (and marks written) at a time; the loop yields between batches
_READ_BATCH = 256
_READ_MAX_BYTES = 16 * 1024 * 1024
_MIN_WAIT_MS = 100
_MAX_BLOCKED_WAIT_MS = 30_000
_ROUND_BUCKETS_S = (0.001, 0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_RESOLUTION_OF = {Commit.COMMIT: Resolution.COMMIT, Commit.ROLLBACK: Resolution.ROLLBACK}


@dataclass(frozen=True, slots=True)
class EndOutcome:
    """What an END_TRANSACTION did: ``code``/``remark`` answer it (when it is not oneway), ``result`` names it."""

    code: int
    remark: str
    result: str  # COMMIT, ROLLBACK, UNKNOWN (nothing to do), ALREADY_RESOLVED, or the refusal's reason


class TransactionService:
    def __init__(
        self,
        store,
        topics,
        offsets,
        clock: Clock,
        *,
        broker_name: str,
        settings: Callable[[], CheckSettings],
        reject_half_messages: Callable[[], bool] = lambda: False,
        channels: ProducerChannels | None = None,
        writes: Callable[[], TransactionWrites],
        read_only_reason: str | None = None,
        metrics: MetricsRegistry | None = None,
    ):
        """``writes``: where it writes now, asked on every write (the transaction part of the broker's write path:
        a master's store, an acting slave's escape bridge); ``read_only_reason``: a slave's (END_TRANSACTION
        answers SLAVE_NOT_AVAILABLE with it)."""
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._clock = clock
        self._broker_name = broker_name
        self._settings = settings
        self._reject = reject_half_messages
        self.channels = channels if channels is not None else ProducerChannels()
        self._writes = writes
        self.read_only_reason = read_only_reason
        self.table: PendingTable | None = None  # built at start
        self.pacer = PassPacer(_MIN_WAIT_MS, _MAX_BLOCKED_WAIT_MS)
        self._round = asyncio.Lock()
        # jitter 0: the wait is computed to the next due check (``_wait_ms``)
        self._loop = PeriodicTask(
            "broker-transactions",
            self.run_round,
            self._wait_ms,
            clock=clock,
            metrics=metrics,
            immediately=True,
            jitter=0,
        )
        self._metrics = _Metrics(metrics if metrics is not None else MetricsRegistry(), self)
        # phys offset -> the half message just stored, as the send path holds it: the END_TRANSACTION that usually
        # follows at once needs no read of the record (bounded: older ones are read back)
        self._recent: dict[int, MessageExt] = {}

    # -- the send path ----------------------------------------------------------------------------------------------
    def divert(self, msg: MessageExt, topic: TopicConfig) -> bool:
        """Make ``msg`` (about to be stored in ``topic``) its half message when it asks to be one; True when it
        was. NoPermissionError while ``reject_transaction_message`` is on; IllegalMessageError when ``topic``
        does not accept TRANSACTION messages."""
        if not is_half_request(msg):
            return False
        if self._reject():
            raise NoPermissionError("this broker refuses transactional messages (reject_transaction_message)")
        if not topic.message_type.accepts(MessageType.TRANSACTION):
            raise MessageTypeConflictError(
                f"topic {topic.name!r} accepts {topic.message_type.value} messages, not transactional ones"
            )
        make_half(msg, self._store.max_queue_offset(TRANS_OP_HALF_TOPIC, OP_QUEUE_ID))
        self._metrics.half_stored.inc()
        return True

    def stored(self, half: MessageExt) -> None:
        """The send path stored ``half``: the object the store encoded, its offsets and store fields set, so it is
        the record as stored. Kept for the END_TRANSACTION that usually follows within milliseconds, which then
        reads nothing back (a read and a decode are a fifth of an ending's work); the oldest go first."""
        recent = self._recent
        recent[half.phys_offset] = half
        if len(recent) > _RECENT_HALVES:
            del recent[next(iter(recent))]

    # -- lifecycle --------------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Rebuild the pending half messages from the check progress and run the check loop."""
        half_from = self._progress_of(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        op_from_offset = self._progress_of(TRANS_OP_HALF_TOPIC, OP_QUEUE_ID)
        async with self._round:  # an operator's status request waits for the rebuild
            self.table = PendingTable(half_from, op_from_offset, self._settings())
            read = await self._catch_up(self.table, rebuilding=True)
            self._commit_progress(self.table)
        log.info(
            "event=transactions_rebuilt half_from=%d op_from=%d records_read=%d pending=%d escaping=%s",
            half_from,
            op_from_offset,
            read,
            len(self.table),
            self.writes.escapes,
        )
        self._loop.start()

    async def stop(self) -> None:
        """Stop the loop (the round in progress ends first) and save the progress."""
        await self._loop.stop()
        async with self._round:
            if self.table is not None:
                self._commit_progress(self.table)
        self._recent.clear()
        self.table = None

    def _progress_of(self, topic: str, queue_id: int) -> int:
        saved = self._offsets.query(PROGRESS_GROUP, topic, queue_id)
        low = self._store.min_queue_offset(topic, queue_id)
        return low if saved is None else max(saved, low)

    # -- the loop (a periodic task: a round that raises is logged and counted, and the next starts from the same
    # table, so nothing is lost) ------------------------------------------------------------------------------------
    def _wait_ms(self) -> int:
        if self.pacer.blocked:
            return self.pacer.wait_ms
        settings = self._settings()
        longest = min(settings.interval_ms, settings.timeout_ms)
        next_ms = self.table.next_due_ms() if self.table is not None else None
        if next_ms is None or self.writes.escapes:
            return longest
        return max(_MIN_WAIT_MS, min(longest, next_ms - self._clock.now_ms()))

    @property
    def writes(self) -> TransactionWrites:
        """Where this service writes now (the broker's write path, read on every write)."""
        return self._writes()

    def wake(self) -> None:
        """Run a round soon (a setting changed, a message was put back)."""
        self._loop.wake()

    async def run_round(self, now_ms: int | None = None) -> None:
        """One round: read what is new, then check, discard or escape what is due at ``now_ms``, then save the
        progress. One round at a time (a test or an admin request waits for the loop's)."""
        async with self._round:
            table = self.table
            if table is None:
                return
            started_s = self._clock.monotonic_ms() / 1000
            table.configure(self._settings())
            await self._catch_up(table)
            now_ms = self._clock.now_ms() if now_ms is None else now_ms
            writes = self.writes
            if writes.escapes:
                stored, failed = await self._escape_pending(table, writes)
            else:
                stored, failed = await self._check_due(table, writes, now_ms)
            self.pacer.after_pass(stored=stored, failed=failed)
            self._commit_progress(table)
            self._metrics.round_seconds.observe(self._clock.monotonic_ms() / 1000 - started_s)

    async def _catch_up(self, table: PendingTable, *, rebuilding: bool = False) -> int:
        """Read the half queue, then the op queue, to their ends into the table; returns the records read.

        Once rebuilt, the op queue is not read again: only this service writes it (on a master; an acting slave's
        replica does not grow), and each of its writes is in the table already (an ending, a discard, a check).
        Skipping it spares decoding an op record per transaction."""
        op_end = self._store.max_queue_offset(TRANS_OP_HALF_TOPIC, OP_QUEUE_ID)
        table.begin_half_read(op_end)
        read = await self._tail(table, TRANS_HALF_TOPIC, HALF_QUEUE_ID, "half_until", self._load_half)
        table.end_half_read()
        if not rebuilding:
            table.op_until = max(table.op_until, op_end)
            return read
        return read + await self._tail(table, TRANS_OP_HALF_TOPIC, OP_QUEUE_ID, "op_until", self._load_op)

    async def _tail(
        self,
        table: PendingTable,
        topic: str,
        queue_id: int,
        position: str,
        load: Callable[[PendingTable, bytes], None],
    ) -> int:
        read = 0
        while True:
            offset = getattr(table, position)
            got = self._store.get_messages(topic, queue_id, offset, _READ_BATCH, max_bytes=_READ_MAX_BYTES)
            if got.status is GetStatus.OFFSET_TOO_SMALL:
                log.error("event=transaction_records_removed topic=%s from=%d to=%d", topic, offset, got.min_offset)
                setattr(table, position, got.min_offset)
                continue
            for record in got.records:
                load(table, record)
            read += len(got.records)
            if got.next_begin_offset <= offset or got.status not in _READ_ON:
                return read
            setattr(table, position, got.next_begin_offset)
            await asyncio.sleep(0)  # a long rebuild lets the loop serve between batches

    @staticmethod
    def _load_half(table: PendingTable, record: bytes) -> None:
        queue_offset = record_queue_offset(record)
        if table.status(queue_offset) == Status.RESOLVED:  # ended before it was read: no need to decode it
            table.skip_half(queue_offset)
            return
        half = decode_record(record)[0]
        if not is_half_record(half):
            log.error("event=transaction_half_unreadable queue_offset=%d", queue_offset)
            table.skip_half(queue_offset)
            return
        table.add_half(
            PendingHalf(
                queue_offset,
                half.phys_offset,
                real_topic(half),
                half.born_timestamp_ms,
                half.store_timestamp_ms,
                op_from=op_from(half, table.op_until),
                immunity_ms=immunity_ms(half),
                checks=checks_carried(half),
                queue_id=real_queue_id(half),
            )
        )

    @staticmethod
    def _load_op(table: PendingTable, record: bytes) -> None:
        op = decode_record(record)[0]
        kind = op_kind(op)
        if kind == RESOLUTION_TAG:
            table.apply_resolution(parse_resolution(op))
        elif kind == CHECK_MARK_TAG:
            for offset, checks in parse_check_mark(op):
                table.apply_check_mark(offset, checks, op.store_timestamp_ms)

    def _commit_progress(self, table: PendingTable) -> None:
        half_progress, op_progress = table.progress()
        self._offsets.commit(PROGRESS_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE_ID, half_progress)
        self._offsets.commit(PROGRESS_GROUP, TRANS_OP_HALF_TOPIC, OP_QUEUE_ID, op_progress)

    # -- checks and discards ----------------------------------------------------------------------------------------
    async def _check_due(self, table: PendingTable, writes: TransactionWrites, now_ms: int) -> tuple[int, int]:
        """Checks and discards of everything due, a batch at a time; (writes stored, writes failed)."""
        stored = failed = 0
        while True:
            due = table.take_due(now_ms, CHECK_BATCH)
            if not due:
                return stored, failed
            checks: list[tuple[PendingHalf, MessageExt]] = []
            for half, decision in due:
                record = self._half_record(table, half)
                if record is None:
                    continue
                if decision.verdict is Verdict.CHECK:
                    checks.append((half, record))
                elif await self._discard(table, writes, half, record, decision.reason):
                    stored += 1
                else:
                    failed += 1
            if checks:
                if await self._check(table, writes, checks, now_ms):
                    stored += 1
                else:
                    return stored, failed + 1  # the marks could not be written: the next round tries again
            await asyncio.sleep(0)

    def _half_record(self, table: PendingTable, half: PendingHalf) -> MessageExt | None:
        """The stored half record of ``half``; None (and ``half`` forgotten) when retention removed it."""
        record = self._store.read_message(half.phys_offset)
        if record is not None and is_half_record(record) and record.queue_offset == half.queue_offset:
            return record
        log.error(
            "event=transaction_half_lost topic=%s queue_offset=%d phys_offset=%d",
            half.topic,
            half.queue_offset,
            half.phys_offset,
        )
        if table.begin_resolve(half.queue_offset):
            table.end_resolve(half.queue_offset, stored=True)
        return None

    async def _check(
        self, table: PendingTable, writes: TransactionWrites, checks: list[tuple[PendingHalf, MessageExt]], now_ms: int
    ) -> bool:
        """Record the checks (one mark record: the count survives a restart), then ask a producer of each."""
        result = await writes.marks([(half.queue_offset, half.checks + 1) for half, _ in checks])
        if not result.stored:
            log.warning("event=transaction_check_marks_not_stored count=%d reason=%s", len(checks), result)
            for half, _ in checks:
                table.postpone(half, now_ms + self._settings().interval_ms)
            return False
        outcomes: Counter[str] = Counter()
        for half, record in checks:
            table.checked(half, now_ms)
            outcomes[self._send_check(record)] += 1
        for outcome, count in outcomes.items():  # one metrics update per batch: a round may send 100,000 checks
            self._metrics.checks.inc(count, result=outcome)
        return True

    def _send_check(self, record: MessageExt) -> str:
        """Ask a live producer of ``record``'s group; how it went (the ``result`` label of the checks metric)."""
        group = producer_group(record)
        channel = self.channels.pick(group)
        if channel is None:
            _no_producer_log.warning(group, "event=transaction_check_no_producer group=%s", group)
            return "no_producer"
        sent = channel.send_check(HalfCheck(record, transaction_id(record), self._broker_name))
        return "sent" if sent else "not_sent"

    async def _discard(
        self,
        table: PendingTable,
        writes: TransactionWrites,
        half: PendingHalf,
        record: MessageExt,
        reason: DiscardReason | None,
    ) -> bool:
        offset = half.queue_offset
        if reason is None or not table.begin_resolve(offset):
            return True  # an END_TRANSACTION is ending it
        result = await writes.discard(record, reason, half.checks)
        table.end_resolve(offset, stored=result.stored)
        if not result.stored:
            log.warning("event=transaction_discard_not_stored queue_offset=%d reason=%s", offset, result)
            return False
        self._metrics.discards.inc(reason=reason.value)
        log.warning(
            "event=transaction_discarded topic=%s transaction_id=%s queue_offset=%d checks=%d reason=%s",
            half.topic,
            transaction_id(record),
            offset,
            half.checks,
            reason.value,
        )
        return True

    async def _escape_pending(self, table: PendingTable, escape: TransactionWrites) -> tuple[int, int]:
        """A slave acting as master: every pending message to another group's master (no age test, RocketMQ's
        rule: the master that could have ended it is gone). The first failure ends the round (escape is off, or
        the other masters are unreachable); the messages stay pending for the next."""
        routes: dict = {}
        stored = 0
        for half in list(table.unresolved()):
            offset = half.queue_offset
            record = self._half_record(table, half)
            if record is None or not table.begin_resolve(offset):
                continue
            result = await escape.escape(record, half.checks, routes)
            table.end_resolve(offset, stored=result.stored)
            if not result.stored:
                _refusals_log.warning(
                    f"escape:{result.reason}",
                    "event=transaction_escape_failed queue_offset=%d reason=%s",
                    offset,
                    result,
                )
                return stored, 1
            stored += 1
            self._metrics.escapes.inc()
        return stored, 0

    # -- END_TRANSACTION --------------------------------------------------------------------------------------------
    async def end(self, request: EndRequest) -> EndOutcome:
        outcome = self.end_nowait(request)
        return outcome if isinstance(outcome, EndOutcome) else await outcome

    def end_nowait(self, request: EndRequest) -> EndOutcome | Awaitable[EndOutcome]:
        """``end``'s outcome at once when nothing must wait (ASYNC_FLUSH), else an awaitable of it."""
        source = Source.CHECK if request.from_check else Source.CLIENT
        if self.read_only_reason is not None:
            return self._refused(request, ResponseCode.SLAVE_NOT_AVAILABLE, self.read_only_reason, "SLAVE")
        if self.table is None:
            return self._refused(request, ResponseCode.SERVICE_NOT_AVAILABLE, "transactions not started", "STARTING")
        if request.commit is Commit.UNKNOWN:
            self._metrics.resolutions.inc(source=source.value, result="UNKNOWN")
            log.debug("event=transaction_end_unknown queue_offset=%d", request.half_queue_offset)
            return EndOutcome(ResponseCode.SUCCESS, "state unknown: the check decides", "UNKNOWN")
        half: MessageExt | None = self._recent.pop(request.phys_offset, None)
        if half is None and request.phys_offset >= 0:
            half = self._store.read_message(request.phys_offset)
        refusal = end_refusal(half, request, self._clock.now_ms(), self._timeout_ms())
        if refusal is not None or half is None:
            refusal = refusal or NOT_FOUND
            return self._refused(request, refusal.code, refusal.remark, refusal.reason)
        offset, table = half.queue_offset, self.table
        if not table.begin_resolve(offset):
            self._metrics.resolutions.inc(source=source.value, result="ALREADY_RESOLVED")
            _refusals_log.warning(
                "ALREADY_RESOLVED",
                "event=transaction_end_ignored reason=already_resolved transaction_id=%s queue_offset=%d "
                "commit=%s source=%s",
                transaction_id(half),
                offset,
                request.commit.name,
                source.value,
            )
            return EndOutcome(
                ResponseCode.SUCCESS, "the transaction has ended already: nothing changed", "ALREADY_RESOLVED"
            )
        resolution = _RESOLUTION_OF[request.commit]
        try:
            result = self.writes.end_nowait(half, resolution, source)
        except BaseException:
            table.end_resolve(offset, stored=False)
            raise
        if isinstance(result, WriteResult):
            return self._ended(table, offset, resolution, source, result)
        return self._ended_when_durable(table, offset, resolution, source, result)

    async def _ended_when_durable(
        self, table: PendingTable, offset: int, resolution: Resolution, source: Source, result: Awaitable[WriteResult]
    ) -> EndOutcome:
        try:
            written = await result
        except BaseException:
            table.end_resolve(offset, stored=False)
            raise
        return self._ended(table, offset, resolution, source, written)

    def _ended(
        self, table: PendingTable, offset: int, resolution: Resolution, source: Source, result: WriteResult
    ) -> EndOutcome:
        table.end_resolve(offset, stored=result.stored)
        if not result.stored:
            log.warning("event=transaction_end_not_stored queue_offset=%d reason=%s", offset, result)
            return EndOutcome(ResponseCode.SYSTEM_ERROR, f"not stored: {result}", "NOT_STORED")
        self._metrics.resolutions.inc(source=source.value, result=resolution.value)
        return EndOutcome(ResponseCode.SUCCESS, "", resolution.value)

    def _timeout_ms(self) -> int:
        return self._settings().timeout_ms

    def _refused(self, request: EndRequest, code: int, remark: str, reason: str) -> EndOutcome:
        self._metrics.refusals.inc(reason=reason)
        _refusals_log.warning(
            reason,
            "event=transaction_end_refused reason=%s group=%s queue_offset=%d commit_log_offset=%d remark=%s",
            reason,
            request.producer_group,
            request.half_queue_offset,
            request.phys_offset,
            remark,
        )
        return EndOutcome(code, remark, reason)

    def find_half(self, topic: str, transaction_id_: str) -> MessageExt | None:
        """The half message of ``topic`` a v2 client names by its transaction id (its message id): the pending
        one when there are several (one put back after a discard), else the newest (its ending is ignored)."""
        found = [m for m in self._store.query_by_uniq_key(TRANS_HALF_TOPIC, transaction_id_) if real_topic(m) == topic]
        if not found:
            return None
        table = self.table
        pending = [m for m in found if table is not None and table.status(m.queue_offset) == Status.PENDING]
        return (pending or found)[-1]

    # -- operators --------------------------------------------------------------------------------------------------
    async def pending_by_topic(self) -> dict[str, dict]:
        """Pending half messages per real topic: count, oldest born time, count per queue (what is stored now:
        the half queue is read first)."""
        async with self._round:
            table = self.table
            if table is None:
                return {}
            await self._catch_up(table)
        return {
            topic: {
                "pending": entry.count,
                "oldestBornMs": entry.oldest_born_ms,
                "queues": {str(q): n for q, n in sorted(entry.queues.items())},
            }
            for topic, entry in sorted(table.by_topic().items())
        }

    def discarded(self, limit: int) -> list[MessageExt]:
        """The newest ``limit`` messages put aside (``TRANS_CHECK_MAX_TIME_TOPIC``), oldest first."""
        high = self._store.max_queue_offset(DISCARD_TOPIC, DISCARD_QUEUE_ID)
        offset = max(self._store.min_queue_offset(DISCARD_TOPIC, DISCARD_QUEUE_ID), high - limit)
        found: list[MessageExt] = []
        while offset < high:
            got = self._store.get_messages(DISCARD_TOPIC, DISCARD_QUEUE_ID, offset, _READ_BATCH)
            found += got.messages()
            if got.next_begin_offset <= offset:
                break
            offset = got.next_begin_offset
        return found

    async def resume(self, phys_offset: int, send: Callable[..., Awaitable[list]]):
        """Put a discarded message back to be checked again (RESUME_CHECK_HALF_MESSAGE): a new half message with
        its checks at 0, stored through ``send`` (``MessageService.send``: the send path makes it a half message).
        Refused when that record was put back already (a second copy could commit twice)."""
        if self.read_only_reason is not None:
            raise BadRequestError(self.read_only_reason)
        record = self._store.read_message(phys_offset) if phys_offset >= 0 else None
        if record is None or record.topic != DISCARD_TOPIC:
            raise BadRequestError(f"no discarded transactional message at commit log offset {phys_offset}")
        uniq_key = record.properties.get(props.UNIQ_KEY)
        if uniq_key and any(
            m.properties.get(RESUMED_FROM) == str(phys_offset)
            for m in self._store.query_by_uniq_key(TRANS_HALF_TOPIC, uniq_key)
        ):
            raise BadRequestError(f"the message at commit log offset {phys_offset} was put back already")
        half = resumed_half(record)
        topic = half.topic  # the send makes ``half`` its half record, in place
        results = await send(
            [half],
            topic=topic,
            queue_id=None,
            born_host=record.born_host,
            born_timestamp_ms=record.born_timestamp_ms,
            producer_group=producer_group(record),
        )
        log.warning(
            "event=transaction_resumed transaction_id=%s topic=%s from_phys_offset=%d half_queue_offset=%d",
            transaction_id(record),
            topic,
            phys_offset,
            results[0].queue_offset,
        )
        self.wake()
        return results[0]

    def __repr__(self) -> str:
        return f"<TransactionService {self.table!r} escaping={self.writes.escapes}>"


_READ_ON = frozenset({GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING})


class _Metrics:
    """The service's metrics (docs/metrics.md)."""

    def __init__(self, registry: MetricsRegistry, service: TransactionService):
        self.half_stored = registry.counter("pocketmq_transaction_half_messages_total", "Half messages stored")
        self.checks = registry.counter(
            "pocketmq_transaction_checks_total",
            "Transaction checks: sent to a producer, not_sent (its channel refused), no_producer (none online)",
            ("result",),
        )
        self.resolutions = registry.counter(
            "pocketmq_transaction_resolutions_total",
            "END_TRANSACTIONs by source (CLIENT, CHECK) and result (COMMIT, ROLLBACK, UNKNOWN, ALREADY_RESOLVED)",
            ("source", "result"),
        )
        self.refusals = registry.counter(
            "pocketmq_transaction_end_refused_total", "END_TRANSACTIONs refused, by reason", ("reason",)
        )
        self.discards = registry.counter(
            "pocketmq_transaction_discards_total",
            "Half messages put aside in TRANS_CHECK_MAX_TIME_TOPIC, by reason (MAX_CHECKS, EXPIRED)",
            ("reason",),
        )
        self.escapes = registry.counter(
            "pocketmq_transaction_escapes_total", "Half messages a slave acting as master escaped to another group"
        )
        self.round_seconds = registry.histogram(
            "pocketmq_transaction_check_round_seconds",
            "Duration of a check round (reading, checking, discarding)",
            buckets=_ROUND_BUCKETS_S,
        )
        self._pending = registry.gauge(
            "pocketmq_transaction_half_pending", "Half messages waiting for their ending, by real topic", ("topic",)
        )
        self._service = service
        registry.add_collector(self._collect)

    def _collect(self) -> None:
        table = self._service.table
        self._pending.clear()
        if table is not None:
            for topic, count in table.counts_by_topic().items():
                self._pending.set(count, topic=topic)
