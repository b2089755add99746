"""The escape bridge (RocketMQ RIP-32 ``EscapeBridge``): writes of a slave acting as master go to another group.

A slave's store is a byte-exact replica of its master's, so the special services it runs while acting
(delay delivery, POP revive, POP) cannot write to it. With ``enable_remote_escape`` their writes go over remoting
(ESCAPE_PUT_MESSAGE, 30112: a SEND_MESSAGE_V2 that may also write the revive topic, for escaped CKs and ACKs)
to the master of another broker group of the same name servers:

- ``put_message`` (a due delay/timer message): a writable queue of the topic's route on another broker, in
  turn (RocketMQ: the producer's queue choice over the route, without this broker);
- ``put_to_specific_queue`` (retry copies, dead letters, CKs): the queue ``floorMod(hash(topic + storeHost),
  #queues)`` of those queues (RocketMQ ``putMessageToSpecificQueue``), so one broker's escaped writes of one
  topic keep landing in one queue. A topic with no route on another broker (a pop retry topic or a DLQ that
  was never created there) goes to queue 0 of a master of another group of this cluster, picked by the same
  hash; the receiving broker creates it on demand (retry and DLQ topics have one queue). PocketMQ's choice:
  RocketMQ would fail such a write.

Without ``enable_remote_escape`` every write fails with SERVICE_NOT_AVAILABLE and ``need_retry``: the service
keeps its state (the CK stays open, the timer pending) and tries again on its next round: nothing is lost.

Results are values (``EscapeResult``): stored, or failed with a reason and ``need_retry`` (connection refused,
timeout, no other master, a refusal that may pass); only a refusal of the message itself (MESSAGE_ILLEGAL)
does not need a retry.

A write whose answer does not come back in time counts as failed, so the service does it again; had it been
stored anyway (a stalled link delivers the request once it heals), it would be there twice: a CK nobody
handed out revives its messages beside the pop that hands them out again, a retry copy comes beside the one
of the revive done again. So each request carries the sender's deadline (``escapeDeadlineMs``, its wall
clock) and the receiving broker refuses one that arrives when no answer could reach the sender in time
(``arrived_too_late``): a write the sender gives up on is, but for a margin, one the receiver did not store. The choices are pure functions (``escape_targets``, ``specific_queue``, ``escape_kind``);
the bridge is the async shell. Every write counts into the broker's metrics (docs/metrics.md):
``pocketmq_escapes_total{kind,result}`` and ``pocketmq_escape_failures_total{reason}``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.common import properties as props
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import (
    ACK_TAG,
    CK_TAG,
    DEFAULT_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    REVIVE_TOPIC_PREFIX,
)
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.codes import ESCAPE_PUT_MESSAGE, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.request_headers import EscapePutMessageRequestHeader
from pocketmq.protocol.route import ClusterInfo, TopicRouteData
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.store.write_result import STORED, WriteResult

ESCAPE_PRODUCER_GROUP = "PMQ_SYS_ESCAPE_BRIDGE"
DEFAULT_ESCAPE_TIMEOUT_MS = 3_000  # RocketMQ's EscapeBridge send timeout
# How long before the sender's deadline the receiver stops storing: the answer's way back (and the brokers'
# clock difference, as POP's invisible times already assume close clocks).
ESCAPE_REPLY_MARGIN_MS = 1_000
_STORED = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)


@dataclass(frozen=True, slots=True)
class EscapeTarget:
    broker_name: str
    master_addr: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class EscapeResult:
    stored: bool
    target: EscapeTarget | None = None
    reason: str = ""  # why it failed: ESCAPE_DISABLED, NO_TARGET, CONNECTION, REFUSED_<code>
    description: str = ""
    need_retry: bool = True
    # CONNECTION: the request's deadline (the sender's wall clock, ms). No answer came, so the receiver may have
    # stored it all the same, but not after this (``arrived_too_late``).
    deadline_ms: int | None = None

    @classmethod
    def failed(
        cls,
        reason: str,
        description: str,
        *,
        target: EscapeTarget | None = None,
        need_retry: bool = True,
        deadline_ms: int | None = None,
    ) -> EscapeResult:
        return cls(False, target, reason, description, need_retry, deadline_ms)

    def write_result(self) -> WriteResult:
        """The typed write result of this escape: a refusal without ``need_retry`` is permanent."""
        if self.stored:
            return STORED
        make = WriteResult.transient if self.need_retry else WriteResult.permanent
        return make(self.reason, self.description)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (a signed 32-bit int), so queue choices match RocketMQ's for ASCII names."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def escape_targets(route: TopicRouteData | None, own_broker_name: str) -> list[EscapeTarget]:
    """Writable queues of ``route`` on groups other than ``own_broker_name`` that have a master, in order."""
    if route is None:
        return []
    masters = {b.broker_name: b.master_addr for b in route.broker_datas if b.master_addr}
    return [
        EscapeTarget(q.broker_name, masters[q.broker_name], queue_id)
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if q.broker_name != own_broker_name and q.broker_name in masters and q.perm & PERM_WRITE
        for queue_id in range(q.write_queue_nums)
    ]


def fallback_targets(info: ClusterInfo, cluster_name: str, own_broker_name: str) -> list[EscapeTarget]:
    """Queue 0 of every other group of ``cluster_name`` that has a master (for topics without a route there)."""
    names = sorted(n for n in info.cluster_addr_table.get(cluster_name, ()) if n != own_broker_name)
    return [
        EscapeTarget(n, master_addr, 0)
        for n in names
        if (broker := info.broker_addr_table.get(n)) is not None and (master_addr := broker.master_addr)
    ]


def specific_queue(targets: list[EscapeTarget], topic: str, store_host: str) -> EscapeTarget:
    """RocketMQ's ``floorMod(hash(topic + storeHost), #queues)`` choice (Python's % is a floor mod)."""
    return targets[java_string_hash(topic + store_host) % len(targets)]


def escape_kind(msg: MessageExt) -> str:
    """What an escaped write to a specific queue carries (the ``kind`` label of the escape metrics)."""
    if msg.topic.startswith(REVIVE_TOPIC_PREFIX):
        tag = msg.properties.get(props.TAGS)
        return "checkpoint" if tag == CK_TAG else "ack" if tag == ACK_TAG else "other"
    if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if msg.topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "dead_letter"
    return "other"


def arrived_too_late(deadline_ms: int | None, now_ms: int) -> bool:
    """An escaped write that arrives now would be stored too late for its answer to reach the sender before
    ``deadline_ms`` (None: a sender that sets no deadline)."""
    return deadline_ms is not None and now_ms > deadline_ms - ESCAPE_REPLY_MARGIN_MS


# (topic, fallback allowed) -> the targets found for it, kept by a caller for the writes of one batch
Routes = dict[tuple[str, bool], list[EscapeTarget]]


class EscapeBridge:
    """Sends an acting slave's writes to other groups' masters. ``enabled`` is read on every write, so a
    dynamic config change takes effect at once."""

    def __init__(
        self,
        namesrv,
        remoting,
        *,
        cluster_name: str,
        broker_name: str,
        store_host: str,
        enabled: Callable[[], bool],
        timeout_ms: int = DEFAULT_ESCAPE_TIMEOUT_MS,
        metrics: MetricsRegistry | None = None,
        clock: Clock | None = None,
    ):
        self._namesrv = namesrv
        self._remoting = remoting
        self._cluster_name = cluster_name
        self._broker_name = broker_name
        self._store_host = store_host
        self._enabled = enabled
        self._timeout_ms = timeout_ms
        self._clock = clock if clock is not None else SystemClock()
        self._turn = itertools.count()
        self.escaped = 0
        self.failures = 0
        metrics = metrics if metrics is not None else MetricsRegistry()
        self._escapes = metrics.counter(
            "pocketmq_escapes_total",
            "Writes of a slave acting as master escaped to another group, by kind and result",
            ("kind", "result"),
        )
        self._failure_reasons = metrics.counter(
            "pocketmq_escape_failures_total", "Escaped writes that failed, by reason", ("reason",)
        )

    async def put_message(self, msg: MessageExt, routes: Routes | None = None, *, kind: str = "timer") -> EscapeResult:
        """A due delay message (or a pending half message: ``kind`` "transaction"): a route queue of its topic on
        another broker, in turn. ``routes``: a dict a caller escaping many messages passes to each call, so each
        topic's targets are looked up once."""
        targets = await self._targets(msg.topic, fallback=False, routes=routes)
        result = (
            targets
            if isinstance(targets, EscapeResult)
            else await self._send(msg, targets[next(self._turn) % len(targets)])
        )
        return self._count(kind, result)

    async def put_to_specific_queue(self, msg: MessageExt, routes: Routes | None = None) -> EscapeResult:
        """A retry copy, dead letter, CK or ACK: the hashed queue of its topic on another broker (``routes``: as
        for ``put_message``)."""
        targets = await self._targets(msg.topic, fallback=True, routes=routes)
        result = (
            targets
            if isinstance(targets, EscapeResult)
            else await self._send(msg, specific_queue(targets, msg.topic, self._store_host))
        )
        return self._count(escape_kind(msg), result)

    async def put_to(self, msg: MessageExt, target: EscapeTarget) -> EscapeResult:
        """``msg`` to ``target`` (an earlier write's), e.g. the ACK withdrawing a CK whose answer never came."""
        if not self._enabled():
            return self._count(escape_kind(msg), EscapeResult.failed("ESCAPE_DISABLED", "enable_remote_escape is off"))
        return self._count(escape_kind(msg), await self._send(msg, target))

    async def _targets(self, topic: str, *, fallback: bool, routes: Routes | None) -> list[EscapeTarget] | EscapeResult:
        if not self._enabled():
            return EscapeResult.failed("ESCAPE_DISABLED", "enable_remote_escape is off: the write waits for the master")
        known = routes.get((topic, fallback)) if routes is not None else None
        if known is not None:
            return known
        targets = await self._look_up(topic, fallback=fallback)
        if routes is not None and not isinstance(targets, EscapeResult):
            routes[(topic, fallback)] = targets
        return targets

    async def _look_up(self, topic: str, *, fallback: bool) -> list[EscapeTarget] | EscapeResult:
        try:
            try:
                targets = escape_targets(await self._namesrv.route(topic), self._broker_name)
            except PocketMQError:  # no route at all (TopicNotExistError) or no name server answer
                targets = []
            if not targets and fallback:
                targets = fallback_targets(await self._namesrv.cluster_info(), self._cluster_name, self._broker_name)
        except PocketMQError as exc:
            return EscapeResult.failed("NO_ROUTE", str(exc))
        if not targets:
            return EscapeResult.failed("NO_TARGET", f"no master of another group has {topic!r}")
        return targets

    async def _send(self, msg: MessageExt, target: EscapeTarget) -> EscapeResult:
        deadline_ms = self._clock.now_ms() + self._timeout_ms
        fields = EscapePutMessageRequestHeader.ext_fields(
            producer_group=ESCAPE_PRODUCER_GROUP,
            topic=msg.topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=1,
            queue_id=target.queue_id,
            sys_flag=msg.sys_flag,
            born_timestamp_ms=msg.born_timestamp_ms,
            flag=msg.flag,
            properties=props.encode_properties(msg.properties),
            reconsume_times=msg.reconsume_times,
            unit_mode=False,
            batch=False,
            deadline_ms=deadline_ms,
        )
        request = RemotingCommand.request(ESCAPE_PUT_MESSAGE, fields, msg.body)
        try:
            response = await self._remoting.invoke(target.master_addr, request, self._timeout_ms / 1000)
        except PocketMQError as exc:
            self._remoting.drop(target.master_addr)
            return EscapeResult.failed(
                "CONNECTION", f"{type(exc).__name__}: {exc}", target=target, deadline_ms=deadline_ms
            )
        if response.code in _STORED:
            return EscapeResult(True, target)
        return EscapeResult.failed(
            f"REFUSED_{response.code}",
            response.remark or "",
            target=target,
            need_retry=response.code != ResponseCode.MESSAGE_ILLEGAL,
        )

    def _count(self, kind: str, result: EscapeResult) -> EscapeResult:
        if result.stored:
            self.escaped += 1
        else:
            self.failures += 1
            self._failure_reasons.inc(reason=result.reason)
        self._escapes.inc(kind=kind, result="stored" if result.stored else "failed")
        return result

    def __repr__(self) -> str:
        return f"<EscapeBridge {self._broker_name} escaped={self.escaped} failures={self.failures}>"
