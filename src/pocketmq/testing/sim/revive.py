"""Revive in the simulation: PocketMQ's own ``ReviveService`` on one broker, on the simulated store and network.

The service is the real one (``broker/pop/revive.py``: its passes, batches, reads, ``decide``, the
``CkRewritePolicy``, the write backoff and its write order: every copy first, then one append of the ACKs that
close the CKs and the rewritten CKs); this module only gives it what a broker process gives it:

- its revive queue (the real ``ReviveQueue`` on the broker's ``ProcessStore``) and readers (the real
  ``ReaderRouter``: the real ``LocalMessageReader`` for its own group's messages, the real
  ``RemoteMessageReader`` behind the real ``BreakerBoard`` for a CK of another group, over the network);
- where it writes: a master's real ``LocalWritePath`` (its ``LocalReviveWrites``) into its ``ProcessStore``
  (SYNC_FLUSH); an acting slave's real ``EscapedWritePath`` (its ``EscapedReviveWrites``) through a model of the
  escape bridge (every message to the other group's
  master) without the side file of its progress (a CK it closed is closed in memory only: a restart, or the
  master coming back, revives it again: at least once);
- the virtual clock, the group's ``retryMaxTimes``, topics of one queue, and its commit offset (durable
  metadata on a master, nothing on a slave);
- the pass loop: a pass every ``revive_interval_ms`` while the broker acts for its group (the longer waits of
  the service's pacer after blocked passes are not modelled).

Every outcome of a closed CK (``on_closed``, once the writes closing it are done) and every remote read (with its
breaker's state) goes into the trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from pocketmq.broker.acting_progress import ActingProgress
from pocketmq.broker.acting_writes import EscapedWritePath
from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.pop import copies
from pocketmq.broker.pop.read_routing import ReaderRouter
from pocketmq.broker.pop.reader import LocalMessageReader
from pocketmq.broker.pop.revive import CkPlan, Copy, ReviveService
from pocketmq.broker.write_path import LocalWritePath, WritePath, WritePathSwitch
from pocketmq.cluster.breaker import BreakerBoard, BreakerState
from pocketmq.cluster.escape import EscapeBridge, EscapeResult, EscapeTarget
from pocketmq.cluster.remote_reader import RemoteMessageReader
from pocketmq.common import properties as props
from pocketmq.common.errors import RemotingError
from pocketmq.common.message import MessageExt
from pocketmq.common.read_result import ReadResult
from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.command import RemotingCommand
from pocketmq.testing.sim import bugs as injected
from pocketmq.testing.sim.config import REVIVE_TOPIC
from pocketmq.testing.sim.nodes import NAMESRV_ADDR
from pocketmq.testing.sim.wire import GetClusterInfo

if TYPE_CHECKING:
    from pocketmq.testing.sim.broker import SimBroker


class Reviver:
    """The revive service and remote readers of one broker process (a restart builds a new one)."""

    def __init__(self, broker: SimBroker):
        self.broker = broker
        self.incarnation = broker.incarnation  # a process killed meanwhile writes and records nothing more
        config = broker.config
        board = injected.IgnoredBreakerBoard if "breaker_ignored" in broker.bugs else BreakerBoard
        self.breakers = board(config.breaker)
        self._breaker_states: dict[str, BreakerState] = {}
        topics = _Topics()
        path: WritePath
        if broker.is_master:
            path = LocalWritePath(broker.store_api, topics)
        else:
            # The simulation's models of the bridge and the side file, with the methods the escaped writes call.
            bridge = cast(EscapeBridge, _EscapeBridge(broker, self.incarnation))
            path = EscapedWritePath(bridge, cast(ActingProgress, _UnrecordedProgress()), REVIVE_TOPIC)
        self.service = ReviveService(
            [broker.revive_queue()],
            ReaderRouter(broker.group, LocalMessageReader(broker.store), self._remote_reader),
            broker.store_api,
            _Groups(config.retry_max_times),
            _CommitOffsets(broker, self.incarnation),
            topics,
            broker.kernel.clock,
            policy=broker.policy,
            interval_ms=config.revive_interval_ms,
            write_path=WritePathSwitch(path),
            on_closed=self._record,
        )

    def _remote_reader(self, group: str) -> _TracedReader:
        reader = RemoteMessageReader(
            group,
            _NamesrvClient(self.broker),
            _Remoting(self, group),
            breakers=self.breakers,
            clock=self.broker.kernel.clock,
            timeout_ms=self.broker.config.remote_read_timeout_ms,
            delays=self.broker.config.remote_read_delays,
        )
        return _TracedReader(reader, self, group)

    def note_breaker(self, group: str) -> BreakerState:
        """Record a change of the breaker of ``group`` in the trace; returns its state."""
        state = self.breakers.get(group).state
        if self.broker.alive(self.incarnation) and self._breaker_states.get(group, BreakerState.CLOSED) is not state:
            self._breaker_states[group] = state
            self.broker.history.record("breaker", reader=self.broker.addr, target=group, state=state.value)
        return state

    async def loop(self, inc: int) -> None:
        broker = self.broker
        while broker.alive(inc):
            await broker.kernel.sleep(broker.config.revive_interval_ms)
            if broker.alive(inc) and broker.acting():
                await self.service.run_once(broker.kernel.now_ms())

    def _record(self, plan: CkPlan) -> None:
        """The outcomes of a CK the service closed. Its closing writes are done (on a master the ACK is durable),
        so they are recorded even when the process died since: the trace must not hide them."""
        ck, record = plan.ck, self.broker.history.record

        def at(queue_offset: int) -> dict:
            return {"broker": self.broker.addr, "location": (ck.broker_name, ck.topic, ck.queue_id, queue_offset)}

        for copy in plan.copies:
            kind, fields = _copy_outcome(copy, at(copy.queue_offset))
            record(kind, **fields)
        for rewrite, reason in plan.rewrites:
            written = rewrite.checkpoint
            record("ck_rewritten", **at(written.start_offset), rewrite_count=written.rewrite_count, reason=reason)
        for queue_offset, cause in plan.gone:
            record("gone", **at(queue_offset), cause=cause)
        for queue_offset, reason in plan.drops:
            record("dropped", **at(queue_offset), reason=reason)

    def __repr__(self) -> str:
        return f"<Reviver {self.broker.addr} inc={self.incarnation} breakers={self.breakers.states()}>"


def _copy_outcome(copy: Copy, where: dict) -> tuple[str, dict]:
    msg = copy.message
    if not copy.dead_letter:
        return "retry_copy", {**where, "origin": msg.uniq_key, "reconsume_times": msg.reconsume_times}
    reason = msg.properties.get(copies.DLQ_REASON, "")
    origin = msg.properties.get(props.DLQ_ORIGIN_MESSAGE_ID) or None  # empty for a reference
    return "dead_letter", {**where, "origin": origin, "reason": reason, "reconsume_times": msg.reconsume_times}


class _Groups:
    """Subscription groups as revive asks for them: each has the run's ``retry_max_times``."""

    def __init__(self, retry_max_times: int):
        self._retry_max_times = retry_max_times

    def get(self, group: str) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig(group, retry_max_times=self._retry_max_times)


class _Topics:
    """Topics as revive creates them on demand: one queue each (consumers pop queue 0 of the retry topic)."""

    def get_or_create(self, topic: str) -> TopicConfig:
        return TopicConfig(topic, 1, 1)


class _CommitOffsets:
    """Where revive commits how far its queue is done: a master's durable metadata; a slave keeps nothing (a
    restarted slave starts its revive queue from the beginning)."""

    def __init__(self, broker: SimBroker, inc: int):
        self._broker = broker
        self._inc = inc

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        if self._broker.is_master and self._broker.alive(self._inc):
            self._broker.disk.meta["revive_offset"] = offset


class _UnrecordedProgress:
    """The acting slave's side file of closed CKs, not modelled: what it closed is closed in memory only."""

    def record_ack(self, queue_id: int, ack) -> None:
        pass

    def save(self) -> None:
        pass


class _EscapeBridge:
    """A model of ``EscapeBridge.put_to_specific_queue``: the message to the master of the other group, stored
    once that master has it durably; a failure (no other master, a lost call, this process gone) may pass."""

    def __init__(self, broker: SimBroker, inc: int):
        self._broker = broker
        self._inc = inc

    async def put_to_specific_queue(self, msg: MessageExt, routes=None) -> EscapeResult:
        target = await self._broker.escape(self._inc, [msg])
        if target is None:
            return EscapeResult.failed("CONNECTION", "no other master took it")
        return EscapeResult(True, EscapeTarget(target, self._broker.master_addr(target) or "", 0))


class _TracedReader:
    """A remote reader whose breaker changes go into the trace after each read."""

    def __init__(self, reader: RemoteMessageReader, reviver: Reviver, group: str):
        self._reader = reader
        self._reviver = reviver
        self._group = group

    async def read(self, topic: str, queue_id: int, queue_offset: int) -> ReadResult:
        return (await self.read_many(topic, queue_id, [queue_offset]))[queue_offset]

    async def read_many(self, topic: str, queue_id: int, queue_offsets: list[int]) -> dict[int, ReadResult]:
        results = await self._reader.read_many(topic, queue_id, queue_offsets)
        self._reviver.note_breaker(self._group)
        return results


class _NamesrvClient:
    """What ``RemoteMessageReader`` asks of the name server, over the simulated network."""

    def __init__(self, broker: SimBroker):
        self._broker = broker

    async def cluster_info(self):
        broker = self._broker
        return await broker.net.call(broker.addr, NAMESRV_ADDR, GetClusterInfo(), broker.config.rpc_timeout_ms)


class _Remoting:
    """``RemotingClient.invoke`` over the simulated network; every remote read goes into the trace with the
    state of its breaker at that moment."""

    def __init__(self, reviver: Reviver, group: str):
        self._reviver = reviver
        self._group = group

    async def invoke(self, addr: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        broker = self._reviver.broker
        if not broker.alive(self._reviver.incarnation):
            raise RemotingError("the reading process is gone")  # a killed process sends nothing
        state = self._reviver.note_breaker(self._group)
        broker.history.record("remote_read", reader=broker.addr, target=self._group, addr=addr, breaker=state.value)
        return await broker.net.call(broker.addr, addr, request, int(timeout_s * 1000))
