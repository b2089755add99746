"""Revive in the simulation: the shell of ``ReviveService`` around the real decisions, on one broker.

Every pass (``revive_interval_ms``, on the broker that acts for its group) catches the real ``ReviveQueue`` up,
takes the real ledger's due CKs (oldest first) and, for each, reads every un-acked message (the real
``LocalMessageReader`` for its own group's messages; the real ``RemoteMessageReader`` behind the real
``BreakerBoard`` for a CK of another group), asks ``revive.decide`` with the ``CkRewritePolicy``, writes the
copies, then one append of the ACK closing the CK and the rewritten CKs, as ``ReviveService`` orders them. A
slave acting master cannot write: its copies and rewritten CKs escape to the other group's master and the CK
is closed in memory only. Every outcome and every remote read (with its breaker's state) goes into the trace.
"""

from __future__ import annotations

from pocketmq.broker.pop import copies
from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.pop.reader import LocalMessageReader
from pocketmq.broker.pop.revive import Copy, Dropped, Gone, decide
from pocketmq.broker.pop.revive_queue import ReviveQueue, ack_message, checkpoint_message
from pocketmq.broker.pop.rewrite import Rewrite
from pocketmq.cluster.breaker import BreakerBoard, BreakerState
from pocketmq.cluster.remote_reader import RemoteMessageReader
from pocketmq.common import properties as props
from pocketmq.common.read_result import ReadResult
from pocketmq.errors import RemotingError
from pocketmq.protocol.command import RemotingCommand
from pocketmq.testing.sim import bugs as injected
from pocketmq.testing.sim.config import REVIVE_QUEUE_ID, REVIVE_TOPIC
from pocketmq.testing.sim.nodes import NAMESRV_ADDR
from pocketmq.testing.sim.wire import GetClusterInfo

REVIVE_BATCH_CKS = 64


class Reviver:
    """The revive loop and remote readers of one broker process (a restart builds a new one)."""

    def __init__(self, broker):
        self.broker = broker
        self.incarnation = broker.incarnation  # reads still in flight when the process died must not act
        board = injected.IgnoredBreakerBoard if "breaker_ignored" in broker.bugs else BreakerBoard
        self.breakers = board(broker.config.breaker)
        self._breaker_states: dict[str, BreakerState] = {}
        self._readers: dict[str, RemoteMessageReader] = {}

    def remote_reader(self, group: str) -> RemoteMessageReader:
        reader = self._readers.get(group)
        if reader is None:
            reader = self._readers[group] = RemoteMessageReader(
                group,
                _NamesrvClient(self.broker),
                _Remoting(self, group),
                breakers=self.breakers,
                clock=self.broker.kernel.clock,
                timeout_ms=self.broker.config.remote_read_timeout_ms,
                delays=self.broker.config.remote_read_delays,
            )
        return reader

    def __repr__(self) -> str:
        return f"<Reviver {self.broker.addr} inc={self.incarnation} breakers={self.breakers.states()}>"

    def note_breaker(self, group: str) -> BreakerState:
        """Record a change of the breaker of ``group`` in the trace; returns its state."""
        state = self.breakers.get(group).state
        if self.broker.alive(self.incarnation) and self._breaker_states.get(group, BreakerState.CLOSED) is not state:
            self._breaker_states[group] = state
            self.broker.history.record("breaker", reader=self.broker.addr, target=group, state=state.value)
        return state

    # -- revive --------------------------------------------------------------------------------------------------
    async def loop(self, inc: int) -> None:
        while self.broker.alive(inc):
            await self.broker.kernel.sleep(self.broker.config.revive_interval_ms)
            if self.broker.alive(inc) and self.broker.acting():
                await self._pass(inc)

    async def _pass(self, inc: int) -> None:
        queue = self.broker.revive_queue()
        try:
            queue.catch_up()
        except OSError:
            return  # as ReviveService: a failed pass changes nothing, the next one tries again
        for ck in queue.ledger.due(self.broker.kernel.now_ms(), REVIVE_BATCH_CKS):
            if not queue.ledger.is_open(ck.key):
                continue
            if not await self._revive_one(inc, queue, ck) or not self.broker.alive(inc):
                return
            try:
                queue.catch_up()
            except OSError:
                return
        if self.broker.is_master and self.broker.alive(inc):
            self.broker.disk.meta["revive_offset"] = queue.ledger.commit_offset()

    async def _revive_one(self, inc: int, queue: ReviveQueue, ck: PopCheckpoint) -> bool:
        """Revive one due CK as ``ReviveService`` does: decide per un-acked message, write the copies, then one
        append of the ACK closing the CK and the rewritten CKs. False when this broker died meanwhile."""
        outgoing: list[Copy] = []
        rewrites: list[PopCheckpoint] = []
        outcomes: list[tuple[str, dict]] = []
        offsets = ck.unacked_offsets()
        for queue_offset in offsets:
            read = await self._read(ck, queue_offset)
            if not self.broker.alive(inc):
                return False
            decision = decide(
                ck,
                queue_offset,
                read,
                retry_max_times=self.broker.config.retry_max_times,
                policy=self.broker.policy,
                now_ms=self.broker.kernel.now_ms(),
            )
            where = {"location": (ck.broker_name, ck.topic, ck.queue_id, queue_offset)}
            if isinstance(decision, Copy):
                outgoing.append(decision)
                outcomes.append(_copy_outcome(decision, where))
            elif isinstance(decision, Rewrite):
                rewrites.append(decision.checkpoint)
                outcomes.append(
                    (
                        "ck_rewritten",
                        {**where, "rewrite_count": decision.checkpoint.rewrite_count, "reason": read.reason},
                    )
                )
            elif isinstance(decision, Gone):
                outcomes.append(("gone", {**where, "cause": decision.cause}))
            elif isinstance(decision, Dropped):
                outcomes.append(("dropped", {**where, "reason": decision.reason}))
        ack = ck.ack_of(offsets)
        closing = [ack_message(REVIVE_TOPIC, REVIVE_QUEUE_ID, ack)]
        rewritten = [checkpoint_message(REVIVE_TOPIC, c) for c in rewrites]
        if self.broker.is_master:
            if outgoing:
                await self.broker.append_flushed([c.message for c in outgoing])
            if not self.broker.alive(inc):
                return False
            closed = self.broker.append_flushed(closing + rewritten)
            # Recorded in the event that makes the ACK durable: a crash right after it must not hide the outcome.
            closed.add_done(lambda: self._record(inc, outcomes))
            await closed
            return self.broker.alive(inc)
        else:
            # Acting slave: copies and rewritten CKs escape; the closing ACK cannot be written, so the CK is closed
            # in memory only (a restart, or the master coming back, revives it again: at least once).
            if outgoing and await self.broker.escape(inc, [c.message for c in outgoing]) is None:
                return self.broker.alive(inc)  # not written: the CK stays open, the next pass tries again
            if rewritten and await self.broker.escape(inc, rewritten) is None:
                return self.broker.alive(inc)
            if not self.broker.alive(inc):
                return False
            queue.ledger.close(ck.key)
            self._record(inc, outcomes)
            return True

    def _record(self, inc: int, outcomes: list[tuple[str, dict]]) -> None:
        if self.broker.alive(inc):
            for kind, fields in outcomes:
                self.broker.history.record(kind, broker=self.broker.addr, **fields)

    async def _read(self, ck: PopCheckpoint, queue_offset: int) -> ReadResult:
        if ck.broker_name == self.broker.group:
            return await LocalMessageReader(self.broker.store).read(ck.topic, ck.queue_id, queue_offset)
        result = await self.remote_reader(ck.broker_name).read(ck.topic, ck.queue_id, queue_offset)
        self.note_breaker(ck.broker_name)
        return result


def _copy_outcome(copy: Copy, where: dict) -> tuple[str, dict]:
    msg = copy.message
    if not copy.dead_letter:
        return "retry_copy", {**where, "origin": msg.uniq_key, "reconsume_times": msg.reconsume_times}
    reason = msg.properties.get(copies.DLQ_REASON, "")
    origin = msg.properties.get(props.DLQ_ORIGIN_MESSAGE_ID) or None  # empty for a reference
    return "dead_letter", {**where, "origin": origin, "reason": reason, "reconsume_times": msg.reconsume_times}


class _NamesrvClient:
    """What ``RemoteMessageReader`` asks of the name server, over the simulated network."""

    def __init__(self, broker):
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
