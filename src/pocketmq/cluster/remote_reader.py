"""Typed reads of messages stored on another broker group: ``RemoteMessageReader`` implements the
``MessageReader`` seam of POP revive (broker/pop/reader.py) over the remoting protocol.

A read is a PULL_MESSAGE (consumer group ``InnerConsumerGroup_<group broker name>``, no offset commit, no
suspension) to the group's master, or, when the master is not in the name server's routes or does not
answer, to its slaves in id order. ``read_many`` reads several offsets of one queue in one RPC (per 256
offsets; a reply the broker cut short at its byte limit is continued from its last record).

What each answer means (``classify_pull_reply`` and ``classify_error``, pure; ``ReadResult`` is the type
local reads return too):

============================================  ====================================================
answer                                        result
============================================  ====================================================
SUCCESS with the record at the offset         FOUND
SUCCESS with another record                   FAILED OFFSET_MISMATCH (need_retry)
PULL_NOT_FOUND / PULL_OFFSET_MOVED, offset    NOT_FOUND BELOW_MIN_OFFSET
below the reply's ``minOffset``
the same, offset at or past ``maxOffset``     NOT_FOUND BEYOND_MAX_OFFSET from a master; FAILED
                                              GROUP_UNREACHABLE (need_retry) from a slave, which may lag
TOPIC_NOT_EXIST from a master                 NOT_FOUND TOPIC_GONE (RocketMQ retries it: PocketMQ
                                              masters answer it only once the topic is deleted)
TOPIC_NOT_EXIST from a slave                  FAILED GROUP_UNREACHABLE (need_retry): "not yet", its
                                              metadata may trail the master's, which is down
NO_PERMISSION                                 FAILED NO_PERMISSION (need_retry, long delay)
SYSTEM_BUSY, FLOW_CONTROL, POLLING_FULL,      FAILED BROKER_BUSY (need_retry)
SERVICE_NOT_AVAILABLE
any other code                                FAILED EXCEPTION (need_retry), ``code`` set
connect failure / connection lost             FAILED CONNECTION_REFUSED (need_retry)
no answer in time                             FAILED TIMEOUT (need_retry)
group not in the routes / name server down    FAILED BROKER_ADDR_UNKNOWN (need_retry)
master and every slave failed                 FAILED GROUP_UNREACHABLE (need_retry)
breaker open                                  FAILED BREAKER_OPEN, retry delay = remaining cool-down
============================================  ====================================================

A circuit breaker per remote broker group (``cluster.breaker``) counts reads that got no answer (connection,
timeout, busy, the group missing from the routes); any answer closes it again. ``_record`` is the one place
every read that went out ends with a verdict; a read cancelled on its way (its pass stopped) ends without one
and only lets go of the breaker's half-open probe, so the next read may probe again.

Metrics (the broker's registry: ``metrics``, by default the breaker board's): every offset's result in
``pocketmq_remote_reads_total{broker,result,reason}`` (BREAKER_OPEN included), and each RPC span's time in
``pocketmq_remote_read_latency_seconds{broker}`` (docs/metrics.md).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.cluster.breaker import BreakerBoard, BreakerState
from pocketmq.common.errors import PocketMQError, RemotingError, RemotingTimeoutError
from pocketmq.common.read_result import (
    FailureReason,
    NotFoundCause,
    ReadResult,
    ReadStatus,
)
from pocketmq.common.record import RecordFormatError, decode_records
from pocketmq.common.tag_expression import SUBSCRIBE_ALL
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.request_headers import PullMessageRequestHeader, PullSysFlag
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

MAX_SPAN = 256  # offsets one RPC covers (the broker's PULL_MAX_COUNT)
_BUSY_CODES = frozenset(
    {ResponseCode.SYSTEM_BUSY, ResponseCode.FLOW_CONTROL, ResponseCode.POLLING_FULL, ResponseCode.SERVICE_NOT_AVAILABLE}
)
_NO_RECORD_CODES = frozenset(
    {ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_RETRY_IMMEDIATELY}
)
# Failures that say nothing about the broker's liveness do not count for its breaker. A group the name server
# does not know (its master and slaves are gone from the routes, as after a kill -9) counts: reads of it fail
# fast too instead of asking the name server again for every batch.
_BROKER_FAILURES = frozenset(
    {
        FailureReason.CONNECTION_REFUSED,
        FailureReason.TIMEOUT,
        FailureReason.BROKER_BUSY,
        FailureReason.GROUP_UNREACHABLE,
        FailureReason.BROKER_ADDR_UNKNOWN,
    }
)


@dataclass(frozen=True, slots=True)
class RetryDelays:
    """Suggested ``retry_delay_ms`` per kind of failure."""

    unreachable_ms: int = 5_000  # connection refused, timeout, whole group down, address unknown
    busy_ms: int = 1_000
    no_permission_ms: int = 30_000
    other_ms: int = 1_000


@dataclass(frozen=True, slots=True)
class RemoteReadSettings:
    """A reader's settings; a reader given a ``settings`` callable reads them at each RPC (run-time changes)."""

    timeout_ms: int = 3_000
    delays: RetryDelays = RetryDelays()


def classify_error(exc: Exception, delays: RetryDelays = RetryDelays()) -> ReadResult:
    """A remote call that raised instead of answering."""
    if isinstance(exc, RemotingTimeoutError):
        return ReadResult.failed(FailureReason.TIMEOUT, str(exc), retry_delay_ms=delays.unreachable_ms)
    if isinstance(exc, RemotingError):
        return ReadResult.failed(FailureReason.CONNECTION_REFUSED, str(exc), retry_delay_ms=delays.unreachable_ms)
    return ReadResult.failed(FailureReason.EXCEPTION, f"{type(exc).__name__}: {exc}", retry_delay_ms=delays.other_ms)


def classify_pull_reply(
    reply: RemotingCommand, queue_offsets: list[int], *, from_slave: bool, delays: RetryDelays = RetryDelays()
) -> dict[int, ReadResult]:
    """The typed result of each of ``queue_offsets`` (one queue) from one PULL_MESSAGE reply."""
    code = reply.code
    if code == ResponseCode.SUCCESS:
        try:
            by_offset = {m.queue_offset: m for m in decode_records(reply.body)}
        except RecordFormatError as exc:
            failed = ReadResult.failed(
                FailureReason.EXCEPTION, f"pull reply does not decode: {exc}", retry_delay_ms=delays.other_ms, code=code
            )
            return dict.fromkeys(queue_offsets, failed)
        results = {}
        for offset in queue_offsets:
            msg = by_offset.get(offset)
            results[offset] = ReadResult.found(msg) if msg is not None else _missing(reply, offset, from_slave, delays)
        return results
    if code in _NO_RECORD_CODES:
        return {offset: _missing(reply, offset, from_slave, delays) for offset in queue_offsets}
    return dict.fromkeys(queue_offsets, _refusal(reply, from_slave, delays))


def _missing(reply: RemotingCommand, offset: int, from_slave: bool, delays: RetryDelays) -> ReadResult:
    """No record at ``offset`` in an answer that carries the queue's min and max offsets."""
    fields = reply.ext_fields
    try:
        min_offset, max_offset = int(fields["minOffset"]), int(fields["maxOffset"])
    except (KeyError, ValueError):
        return ReadResult.failed(
            FailureReason.EXCEPTION,
            f"reply code {reply.code} without min/max offsets",
            retry_delay_ms=delays.other_ms,
            code=reply.code,
        )
    if offset < min_offset:
        return ReadResult.not_found(NotFoundCause.BELOW_MIN_OFFSET, f"offset {offset} < queue min {min_offset}")
    if offset >= max_offset:
        if from_slave:  # a slave may simply not have it yet
            return ReadResult.failed(
                FailureReason.GROUP_UNREACHABLE,
                f"offset {offset} >= slave's queue max {max_offset} and the master is down",
                retry_delay_ms=delays.unreachable_ms,
                code=reply.code,
            )
        return ReadResult.not_found(NotFoundCause.BEYOND_MAX_OFFSET, f"offset {offset} >= queue max {max_offset}")
    # Inside [min, max) but not returned: a tag filter or a hole; reading again may succeed.
    return ReadResult.failed(
        FailureReason.OFFSET_MISMATCH,
        f"offset {offset} in [{min_offset}, {max_offset}) was not returned",
        retry_delay_ms=delays.other_ms,
        code=reply.code,
    )


def _refusal(reply: RemotingCommand, from_slave: bool, delays: RetryDelays) -> ReadResult:
    remark = reply.remark or ""
    if reply.code == ResponseCode.TOPIC_NOT_EXIST:
        if from_slave:  # only the master's word is final: a slave may not have copied the topic yet
            return ReadResult.failed(
                FailureReason.GROUP_UNREACHABLE,
                f"a slave does not know the topic (yet) and the master is down: {remark}",
                retry_delay_ms=delays.unreachable_ms,
                code=reply.code,
            )
        return ReadResult.not_found(NotFoundCause.TOPIC_GONE, remark)
    if reply.code == ResponseCode.NO_PERMISSION:
        return ReadResult.failed(
            FailureReason.NO_PERMISSION, remark, retry_delay_ms=delays.no_permission_ms, code=reply.code
        )
    if reply.code in _BUSY_CODES:
        return ReadResult.failed(FailureReason.BROKER_BUSY, remark, retry_delay_ms=delays.busy_ms, code=reply.code)
    return ReadResult.failed(
        FailureReason.EXCEPTION, f"code {reply.code}: {remark}", retry_delay_ms=delays.other_ms, code=reply.code
    )


def cut_short(results: dict[int, ReadResult]) -> list[int]:
    """Offsets a size-limited PULL reply left out: past the last record it returned, inside the queue. Reading
    them again from there makes progress (a reply without any record is a real failure, not cut short)."""
    found = [offset for offset, r in results.items() if r.status is ReadStatus.FOUND]
    if not found:
        return []
    last = max(found)
    return sorted(
        offset for offset, r in results.items() if offset > last and r.failure is FailureReason.OFFSET_MISMATCH
    )


class RemoteMessageReader:
    """Reads of broker group ``broker_name``; ``namesrv`` is a ``cluster.namesrv_client.NamesrvClient``.
    ``settings``, when given, replaces ``timeout_ms`` and ``delays`` and is asked at each RPC."""

    def __init__(
        self,
        broker_name: str,
        namesrv,
        remoting,
        *,
        breakers: BreakerBoard,
        clock: Clock = SYSTEM_CLOCK,
        timeout_ms: int = 3_000,
        delays: RetryDelays = RetryDelays(),
        settings: Callable[[], RemoteReadSettings] | None = None,
        metrics: MetricsRegistry | None = None,
    ):
        self.broker_name = broker_name
        self._namesrv = namesrv
        self._remoting = remoting
        self._breaker = breakers.get(broker_name)
        self._clock = clock
        fixed = RemoteReadSettings(timeout_ms, delays)
        self._settings = settings or (lambda: fixed)
        self._group = f"InnerConsumerGroup_{broker_name}"
        metrics = metrics if metrics is not None else breakers.metrics
        self._reads = metrics.counter(
            "pocketmq_remote_reads_total",
            "Typed reads of messages on other brokers, per offset, by result and reason",
            ("broker", "result", "reason"),
        )
        self._latency = metrics.histogram(
            "pocketmq_remote_read_latency_seconds",
            "Time of one remote read RPC (a span of offsets of one queue)",
            ("broker",),
        )

    @property
    def _delays(self) -> RetryDelays:
        return self._settings().delays

    @property
    def _timeout_s(self) -> float:
        return self._settings().timeout_ms / 1000

    async def read(self, topic: str, queue_id: int, queue_offset: int) -> ReadResult:
        return (await self.read_many(topic, queue_id, [queue_offset]))[queue_offset]

    async def read_many(self, topic: str, queue_id: int, queue_offsets: list[int]) -> dict[int, ReadResult]:
        """A typed result for each of ``queue_offsets``: one RPC per span of up to ``MAX_SPAN`` offsets.
        Never raises."""
        results: dict[int, ReadResult] = {}
        pending = sorted(set(queue_offsets))
        while pending:
            span = [o for o in pending if o < pending[0] + MAX_SPAN]
            got = await self._read_span(topic, queue_id, span)
            results.update(got)
            pending = cut_short(got) + pending[len(span) :]
        return results

    async def _read_span(self, topic: str, queue_id: int, offsets: list[int]) -> dict[int, ReadResult]:
        now_ms = self._clock.now_ms()
        if not self._breaker.admit(now_ms):
            open_result = ReadResult.failed(
                FailureReason.BREAKER_OPEN,
                f"breaker of {self.broker_name} is {self._breaker.state.value}",
                retry_delay_ms=self._breaker.retry_delay_ms(now_ms) or self._delays.busy_ms,
            )
            self._reads.inc(
                len(offsets), broker=self.broker_name, result=open_result.status.value, reason=open_result.reason
            )
            return dict.fromkeys(offsets, open_result)
        probing = self._breaker.state is BreakerState.HALF_OPEN  # admitted in HALF_OPEN: this read is the probe
        started_ms = self._clock.monotonic_ms()
        try:
            results = await self._read_from_group(topic, queue_id, offsets)
        except Exception as exc:  # a read that raised is a failed read, never a skipped one
            log.warning("event=remote_read_raised broker=%s error=%r", self.broker_name, exc)
            results = dict.fromkeys(offsets, classify_error(exc, self._delays))
        except BaseException:  # cancelled (a pass stopped): no verdict, but a half-open probe must be let go
            if probing:
                self._breaker.release_probe()
            raise
        self._record(topic, queue_id, results, self._clock.monotonic_ms() - started_ms)
        return results

    def _count(self, results: list[ReadResult]) -> None:
        # One counter update per (result, reason), not per offset: a read covers up to MAX_SPAN offsets.
        for (status, reason), count in Counter((r.status.value, r.reason) for r in results).items():
            self._reads.inc(count, broker=self.broker_name, result=status, reason=reason)

    async def _read_from_group(self, topic: str, queue_id: int, offsets: list[int]) -> dict[int, ReadResult]:
        try:
            addrs = await self._group_addrs()
        except PocketMQError as exc:
            return dict.fromkeys(
                offsets,
                ReadResult.failed(
                    FailureReason.BROKER_ADDR_UNKNOWN, str(exc), retry_delay_ms=self._delays.unreachable_ms
                ),
            )
        failures: list[str] = []
        for broker_id, addr in addrs:
            try:
                reply = await self._remoting.invoke(addr, self._pull_request(topic, queue_id, offsets), self._timeout_s)
            except RemotingError as exc:
                result = classify_error(exc, self._delays)
                failures.append(f"{broker_id}@{addr}: {result.reason} {result.description}")
                if len(addrs) == 1:
                    return dict.fromkeys(offsets, result)
                continue
            return classify_pull_reply(reply, offsets, from_slave=broker_id != 0, delays=self._delays)
        return dict.fromkeys(
            offsets,
            ReadResult.failed(
                FailureReason.GROUP_UNREACHABLE, "; ".join(failures), retry_delay_ms=self._delays.unreachable_ms
            ),
        )

    async def _group_addrs(self) -> list[tuple[int, str]]:
        """(broker id, address) of the group, master first; PocketMQError when it has none."""
        info = await self._namesrv.cluster_info()
        group = info.broker_addr_table.get(self.broker_name)
        if group is None or not group.broker_addrs:
            raise PocketMQError(f"broker group {self.broker_name!r} is in no route of the name server")
        return sorted(group.broker_addrs.items())

    def _pull_request(self, topic: str, queue_id: int, offsets: list[int]) -> RemotingCommand:
        return RemotingCommand.request(
            RequestCode.PULL_MESSAGE,
            PullMessageRequestHeader.ext_fields(
                consumer_group=self._group,
                topic=topic,
                queue_id=queue_id,
                queue_offset=offsets[0],
                max_msg_nums=offsets[-1] - offsets[0] + 1,
                sys_flag=PullSysFlag.of(subscription=True),
                commit_offset=0,
                suspend_timeout_ms=0,
                subscription=SUBSCRIBE_ALL,
                sub_version=0,
                expression_type="TAG",
            ),
        )

    def _record(self, topic: str, queue_id: int, results: dict[int, ReadResult], latency_ms: float) -> None:
        """The one place every remote read that went out ends: the breaker, metrics, logs."""
        self._latency.observe(latency_ms / 1000, broker=self.broker_name)
        self._count(list(results.values()))
        now_ms = self._clock.now_ms()
        failed = [r for r in results.values() if r.status is ReadStatus.FAILED]
        if failed and len(failed) == len(results) and all(r.failure in _BROKER_FAILURES for r in failed):
            self._breaker.record_failure(now_ms, failed[0].reason)
        else:
            self._breaker.record_success(now_ms)
        if failed:
            log.info(
                "event=remote_read_failed broker=%s topic=%s queue=%d offsets=%d failed=%d reason=%s latency_ms=%d",
                self.broker_name,
                topic,
                queue_id,
                len(results),
                len(failed),
                failed[0].reason,
                latency_ms,
            )

    def __repr__(self) -> str:
        return f"<RemoteMessageReader {self.broker_name} {self._breaker!r}>"
