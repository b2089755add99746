"""A broker in the simulation: a small model of the process around PocketMQ's real decision cores.

Model (the shell): request handling, the SYNC send wait, the slave's pull loop, POP (pop offsets, a CK per
pop, acks), the escape of writes by a slave acting master, and PULL_MESSAGE answers; revive (the real
``ReviveService``) is set up in ``revive.py``.

Real code making the decisions here: ``cluster.ha_state.ReplicaAcks`` (who is in sync, SYNC verdicts),
``replication_start`` (length and last-record continuity) and ``pull_step`` (a master serves slaves only
flushed records); ``cluster.acting_master.should_act`` (whether a slave acts for its group);
``PopCheckpoint`` / ``AckRecord`` and their records (``revive_queue.checkpoint_message`` / ``ack_message``),
read back by the real ``ReviveQueue`` into the real ``ReviveLedger``.

Modelled, not real: POP on a slave acting master and its escape of CKs and copies to the other group's
master (a model of RIP-32's EscapeBridge), and the metadata sync (pop offsets ride on the HA pull reply).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.pop.revive_queue import ReviveQueue, ack_message, checkpoint_message
from pocketmq.broker.pop.rewrite import CkRewritePolicy
from pocketmq.cluster.acting_master import should_act
from pocketmq.cluster.ha_state import PullStep, ReplicaAcks, SyncVerdict, pull_step, replication_start
from pocketmq.common.errors import RemotingError
from pocketmq.common.message import MessageExt
from pocketmq.common.record import encode_record
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.request_headers import PullMessageRequestHeader
from pocketmq.protocol.route import BrokerIdentity
from pocketmq.testing.sim import bugs as injected
from pocketmq.testing.sim.config import (
    CLUSTER,
    CONSUMER_GROUP,
    GROUPS,
    RETRY_TOPIC,
    REVIVE_QUEUE_ID,
    REVIVE_TOPIC,
    TOPIC,
    Bugs,
    SimConfig,
)
from pocketmq.testing.sim.disk import SimDisk
from pocketmq.testing.sim.history import History
from pocketmq.testing.sim.kernel import Kernel, SimFuture
from pocketmq.testing.sim.network import Network, Respond
from pocketmq.testing.sim.nodes import NAMESRV_ADDR, Node
from pocketmq.testing.sim.revive import Reviver
from pocketmq.testing.sim.store import ProcessStore, SimStore
from pocketmq.testing.sim.wire import (
    Ack,
    AckReply,
    Escape,
    EscapeReply,
    HaPull,
    HaPullReply,
    Pop,
    PopReply,
    Register,
    Send,
    SendReply,
)


@dataclass(slots=True)
class _SyncWaiter:
    message: MessageExt
    respond: Respond
    deadline_ms: int


@dataclass(slots=True)
class _HeldPull:
    phys_offset: int
    respond: Respond
    answered: bool = False


class SimBroker(Node):
    def __init__(
        self, group: str, broker_id: int, kernel: Kernel, net: Network, history: History, config: SimConfig, bugs: Bugs
    ):
        super().__init__(f"{group}-{broker_id}", kernel, net, history, config)
        self.group = group
        self.broker_id = broker_id
        self.is_master = broker_id == 0
        self.bugs = bugs
        self.disk = SimDisk(kernel, flush_latency_ms=config.flush_latency_ms)
        self.disk.on_flushed = self._on_flushed
        self.identity = BrokerIdentity(CLUSTER, group, broker_id, self.addr)
        self.policy = (injected.EndlessCkRewritePolicy if "endless_ck_rewrite" in bugs else CkRewritePolicy)(
            backoff_ms=config.ck_rewrite_backoff_ms, ending=injected.ending(bugs)
        )
        net.attach(self.addr, self._handle)
        net.set_up(self.addr, False)

    # -- life ----------------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.incarnation += 1
        self.up = True
        self.net.set_up(self.addr, True)
        self.store = SimStore(self.disk)
        inc = self.incarnation
        self.store_api = ProcessStore(self.store, self.append_flushed, lambda: self.alive(inc))
        self.acks = ReplicaAcks(max_gap_bytes=1 << 30, expire_ms=self.config.ha_slave_expire_ms)
        self._sync_waiters: list[_SyncWaiter] = []
        self._held_pulls: list[_HeldPull] = []
        # A master's pop offsets are its metadata (durable); a slave's come from the metadata sync (in memory).
        self.pop_offsets: dict[tuple[str, int], int] = (
            dict(self.disk.meta.get("pop_offsets", {})) if self.is_master else {}
        )
        self._revive_queue: ReviveQueue | None = None
        self._popping: set[tuple[str, int]] = set()  # queues whose pop is storing its CK
        self.reviver = Reviver(self)
        self.history.record("broker_started", broker=self.addr, records=len(self.disk.records))
        self.kernel.spawn(self._namesrv_loop(inc))
        self.kernel.spawn(self.reviver.loop(inc))
        if self.is_master:
            self.kernel.spawn(self._expire_slaves_loop(inc))
        else:
            self.kernel.spawn(self._replication_loop(inc))

    def kill(self) -> None:
        """``kill -9`` with power loss: the process stops and the unflushed tail of its log is gone."""
        self.up = False
        self.net.set_up(self.addr, False)
        lost = self.disk.crash()
        self.history.record("broker_killed", broker=self.addr, lost_records=lost)

    def _on_flushed(self, records: list[MessageExt]) -> None:
        self._wake_pulls()
        for msg in records:
            if msg.topic == TOPIC:
                self.history.record(
                    "durable",
                    broker=self.addr,
                    group=self.group,
                    origin=msg.uniq_key,
                    queue_id=msg.queue_id,
                    queue_offset=msg.queue_offset,
                )

    def acting(self) -> bool:
        """Whether this broker runs its group's revive and serves its POP: the master always; a slave as the real
        election decides (no master in the routes, the lowest live id; no handover in the model)."""
        return self.is_master or should_act(
            self.broker_id,
            self.group_addrs(self.group),
            enabled=True,
            master_back_until_ms=0,
            now_ms=self.kernel.now_ms(),
        )

    def _other_master(self) -> str | None:
        for group in GROUPS:
            if group != self.group and (addr := self.master_addr(group)) is not None:
                return addr
        return None

    async def _namesrv_loop(self, inc: int) -> None:
        while self.alive(inc):
            try:
                await self.net.call(self.addr, NAMESRV_ADDR, Register(self.identity), self.config.rpc_timeout_ms)
            except RemotingError:
                pass
            await self.refresh_view(inc)
            await self.kernel.sleep(self.config.heartbeat_ms)

    def _handle(self, src: str, request, respond: Respond) -> None:
        if isinstance(request, Send):
            self._on_send(request, respond)
        elif isinstance(request, HaPull):
            self._on_ha_pull(request, respond)
        elif isinstance(request, Pop):
            self._on_pop(request, respond)
        elif isinstance(request, Ack):
            self._on_ack(request, respond)
        elif isinstance(request, Escape):
            self._on_escape(request, respond)
        elif isinstance(request, RemotingCommand) and request.code == RequestCode.PULL_MESSAGE:
            respond(self._on_pull(request))

    def append_flushed(self, messages: list[MessageExt]) -> SimFuture:
        """Append (copies of) ``messages`` and flush them (SYNC_FLUSH); the future resolves once durable."""
        for msg in messages:
            stored = self.store.append(replace(msg, properties=dict(msg.properties)), self.kernel.now_ms())
            if stored.topic == RETRY_TOPIC:  # where the copy sits: a dead-letter reference names only that
                self.history.record(
                    "copy_stored",
                    broker=self.addr,
                    origin=stored.uniq_key,
                    location=(self.group, stored.topic, stored.queue_id, stored.queue_offset),
                )
        return self.disk.flush()

    def _when_done(self, future: SimFuture, inc: int, action) -> None:
        future.add_done(lambda: action() if self.alive(inc) else None)

    # -- SYNC sends (master) -------------------------------------------------------------------------------------
    def _on_send(self, request: Send, respond: Respond) -> None:
        if not self.is_master:
            respond(SendReply("SERVICE_NOT_AVAILABLE"))
            return
        stored = self.store.append(
            replace(request.message, properties=dict(request.message.properties)), self.kernel.now_ms()
        )
        self._when_done(self.disk.flush(), self.incarnation, lambda: self._await_replication(stored, respond))

    def _await_replication(self, msg: MessageExt, respond: Respond) -> None:
        if "sync_ack_before_replication" in self.bugs:
            respond(SendReply("SEND_OK", msg.queue_offset))
            return
        self._sync_waiters.append(_SyncWaiter(msg, respond, self.kernel.now_ms() + self.config.ha_ack_timeout_ms))
        inc = self.incarnation
        self.kernel.after(
            self.config.ha_ack_timeout_ms, lambda: self._check_sync_waiters() if self.alive(inc) else None
        )
        self._check_sync_waiters()

    def _check_sync_waiters(self) -> None:
        now_ms, max_phys = self.kernel.now_ms(), self.store.max_phys_offset
        waiting = []
        for waiter in self._sync_waiters:
            verdict = self.acks.verdict(waiter.message.phys_offset, max_phys, now_ms)
            if verdict is SyncVerdict.REPLICATED:
                waiter.respond(SendReply("SEND_OK", waiter.message.queue_offset))
            elif verdict is SyncVerdict.NO_SLAVE:
                waiter.respond(SendReply("SLAVE_NOT_AVAILABLE", waiter.message.queue_offset))
            elif now_ms >= waiter.deadline_ms:
                waiter.respond(SendReply("FLUSH_SLAVE_TIMEOUT", waiter.message.queue_offset))
            else:
                waiting.append(waiter)
        self._sync_waiters = waiting

    # -- replication ---------------------------------------------------------------------------------------------
    def _on_ha_pull(self, request: HaPull, respond: Respond) -> None:
        if not self.is_master:
            respond(HaPullReply(refused="not a master"))
            return
        store = self.store
        there = (
            store.last_record_crc32c(request.last_record.phys_offset, request.phys_offset)
            if request.last_record is not None
            else None
        )
        try:
            start = replication_start(request.phys_offset, 0, store.max_phys_offset, request.last_record, there)
        except ValueError as exc:
            self.history.record("ha_refused", master=self.addr, slave=request.link[0], reason=str(exc))
            respond(HaPullReply(refused=str(exc)))
            return
        self.acks.heard(request.link, request.link[0], request.phys_offset, self.kernel.now_ms())
        self._check_sync_waiters()
        held = _HeldPull(start, respond)
        step = pull_step(start, store.durable_phys_offset, store.max_phys_offset)
        if step is PullStep.SERVE:
            self._answer_pull(held)
            return
        if step is PullStep.AWAIT_FLUSH:
            self.disk.flush()  # the group commit, asked now; the flush wakes the pull
        self._held_pulls.append(held)  # held until records are flushed or the suspend time passes
        inc = self.incarnation
        self.kernel.after(self.config.ha_pull_suspend_ms, lambda: self._answer_pull(held) if self.alive(inc) else None)

    def _answer_pull(self, held: _HeldPull) -> None:
        if held.answered:
            return
        held.answered = True
        records = tuple(self.store.durable_records_from(held.phys_offset, self.config.ha_batch_records))
        held.respond(HaPullReply(records, pop_offsets=dict(self.pop_offsets)))

    def _wake_pulls(self) -> None:
        """Answer the held pulls that flushed records now follow."""
        durable = self.store.durable_phys_offset
        ready = [pull for pull in self._held_pulls if pull.phys_offset < durable]
        self._held_pulls = [pull for pull in self._held_pulls if pull.phys_offset >= durable and not pull.answered]
        for pull in ready:
            self._answer_pull(pull)

    async def _expire_slaves_loop(self, inc: int) -> None:
        while self.alive(inc):
            await self.kernel.sleep(self.config.heartbeat_ms)
            if self.alive(inc):
                self.acks.expire(self.kernel.now_ms())
                self._check_sync_waiters()

    async def _replication_loop(self, inc: int) -> None:
        """The slave: pull from the master the routes name, append, flush, and ask again (the ask is the ack)."""
        refused_logged = False
        while self.alive(inc):
            master = self.master_addr(self.group)
            if master is None:
                await self.kernel.sleep(self.config.ha_lookup_interval_ms)
                continue
            request = HaPull((self.addr, inc), self.store.max_phys_offset, self.store.last_record())
            try:
                reply = await self.net.call(
                    self.addr, master, request, self.config.ha_pull_suspend_ms + self.config.rpc_timeout_ms
                )
            except RemotingError:
                await self.kernel.sleep(self.config.ha_lookup_interval_ms)
                continue
            if not self.alive(inc):
                return
            if reply.refused:
                if not refused_logged:
                    self.history.record("slave_refused", slave=self.addr, reason=reply.refused)
                    refused_logged = True
                await self.kernel.sleep(self.config.ha_lookup_interval_ms)
                continue
            for key, offset in reply.pop_offsets.items():  # consumer offsets only move forward on a slave
                self.pop_offsets[key] = max(offset, self.pop_offsets.get(key, 0))
            appended = 0
            for msg in reply.records:
                if not self.store.append_replicated(msg):
                    break
                appended += 1
            if appended:
                await self.disk.flush()

    # -- POP -----------------------------------------------------------------------------------------------------
    def _on_pop(self, request: Pop, respond: Respond) -> None:
        if not self.acting():
            respond(PopReply(error="not serving POP"))
            return
        key = (request.topic, request.queue_id)
        if key in self._popping:  # the engine's per-queue lock: a busy queue is skipped
            respond(PopReply())
            return
        start = self.pop_offsets.get(key, 0)
        try:
            messages = self.store.read(request.topic, request.queue_id, start, request.max_count)
        except OSError as exc:
            respond(PopReply(error=str(exc)))
            return
        if not messages:
            respond(PopReply())
            return
        ck = PopCheckpoint.of_offsets(
            request.topic,
            CONSUMER_GROUP,
            request.queue_id,
            [m.queue_offset for m in messages],
            self.kernel.now_ms(),
            request.invisible_ms,
            self.group,
            REVIVE_QUEUE_ID,
        )
        self._popping.add(key)
        self.kernel.spawn(self._pop(self.incarnation, key, start + len(messages), messages, ck, respond))

    async def _pop(self, inc: int, key, next_offset: int, messages, ck: PopCheckpoint, respond: Respond) -> None:
        """Store the CK, then advance the pop offset (as the engine: the offset moves once the CK is stored). A
        master stores it locally; a slave acting master cannot write, so its CK goes to the other group's master."""
        record = checkpoint_message(REVIVE_TOPIC, ck)
        target: str | None  # the group that stored the CK
        if self.is_master:
            await self.append_flushed([record])
            target = self.group
        else:
            target = await self.escape(inc, [record])
        if not self.alive(inc):
            return
        self._popping.discard(key)
        if target is None:
            respond(PopReply(error="escape failed"))
            return
        self.pop_offsets[key] = max(next_offset, self.pop_offsets.get(key, 0))
        if self.is_master:
            self.disk.meta["pop_offsets"] = dict(self.pop_offsets)
        else:
            self.history.record(
                "ck_escaped", broker=self.addr, to=target, topic=ck.topic, queue_id=ck.queue_id, count=ck.count
            )
        respond(PopReply(tuple(messages), ck, target))

    async def escape(self, inc: int, messages: list[MessageExt]) -> str | None:
        """Write ``messages`` through the other group's master; its group name, or None when it failed."""
        target = self._other_master()
        if target is None or not self.alive(inc):
            return None
        try:
            reply = await self.net.call(self.addr, target, Escape(tuple(messages)), self.config.rpc_timeout_ms)
        except RemotingError:
            return None
        return target.rsplit("-", 1)[0] if reply.ok else None

    def _on_escape(self, request: Escape, respond: Respond) -> None:
        if not self.is_master:
            respond(EscapeReply(False))
            return
        self._when_done(
            self.append_flushed(list(request.messages)), self.incarnation, lambda: respond(EscapeReply(True))
        )

    def revive_queue(self) -> ReviveQueue:
        if self._revive_queue is None:
            start = self.disk.meta.get("revive_offset", 0) if self.is_master else 0
            self._revive_queue = ReviveQueue(self.store_api, REVIVE_TOPIC, REVIVE_QUEUE_ID, self.group, start)
        return self._revive_queue

    def _on_ack(self, request: Ack, respond: Respond) -> None:
        if not self.is_master:
            respond(AckReply(False, "not a master"))
            return
        queue = self.revive_queue()
        try:
            queue.catch_up()
        except OSError as exc:
            respond(AckReply(False, str(exc)))
            return
        if not queue.ledger.is_open(request.ack.ck_key):
            respond(AckReply(False, "receipt handle no longer valid"))
            return
        ack = request.ack

        def stored() -> None:
            for queue_offset in ack.acked_offsets:
                self.history.record(
                    "ack_stored", broker=self.addr, location=(ack.broker_name, ack.topic, ack.queue_id, queue_offset)
                )
            respond(AckReply(True))

        self._when_done(
            self.append_flushed([ack_message(REVIVE_TOPIC, REVIVE_QUEUE_ID, ack)]), self.incarnation, stored
        )

    # -- remote reads --------------------------------------------------------------------------------------------
    def _on_pull(self, request: RemotingCommand) -> RemotingCommand:
        h = PullMessageRequestHeader.parse(request.ext_fields)
        topic, queue_id, queue_offset, count = h.topic, h.queue_id, h.queue_offset, h.max_msg_nums
        max_offset = self.store.queue_max(topic, queue_id)
        offsets = {"minOffset": 0, "maxOffset": max_offset, "nextBeginOffset": queue_offset}
        try:
            messages = self.store.read(topic, queue_id, queue_offset, count)
        except OSError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        if not messages:
            code = ResponseCode.PULL_NOT_FOUND if queue_offset >= max_offset else ResponseCode.PULL_OFFSET_MOVED
            return request.response(code, offsets)
        offsets["nextBeginOffset"] = queue_offset + len(messages)
        return request.response(ResponseCode.SUCCESS, offsets, b"".join(encode_record(m) for m in messages))

    def __repr__(self) -> str:
        state = "up" if self.up else "down"
        return f"<SimBroker {self.addr} {state} inc={self.incarnation} {self.disk!r}>"
