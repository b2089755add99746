"""The special services of a slave acting as master, and the master taking them back (docs/ha.md).

``ActingServices`` (a slave): ``start()`` points the broker's timer and revive at the escape bridge
(``broker.acting_writes``), re-applies the side file (``broker.acting_progress``: acks already kept, timers
already delivered, so a restart of the acting slave does not repeat them) and runs the timer loop, revive and
an offsets persister; ``stop()`` stops them. While acting, POP on the slave works too (``ActingPopWrites``).
``ActingMasterElection`` calls them.

Handover (``take_services_back``, run by a master with ``enable_slave_acting_master`` at start, before its own
timer and revive run): it asks each slave of its group in the name server for its acting progress
(ACTING_MASTER_HANDOVER, 30110; the slave stops acting first), appends an ACK record for every CK the slave
closed or a consumer acked there and a tombstone for every timer it delivered to its own store, moves its
consumer offsets forward to the slave's (pops and commits made on the slave), merges the slave's FIFO POP
state into its own (``FifoPopState.merge``: what the slave delivered stays in flight with its attempt and
deadline, what was acked there stays done, so a message group continues in order) and adds staged-POP
registrations and queue origins it lacks, saves both, then confirms (ACTING_PROGRESS_APPLIED,
30111) so the slave forgets them. Its revive and timer then read those records like any others: what the
slave did is not done twice. A slave that cannot be reached is skipped (logged): if it acted, its CKs are
revived and its timers delivered again by the master, at least once, never lost.
"""

from __future__ import annotations

import logging

from pocketmq.broker.acting_progress import ActingProgress, parse_snapshot
from pocketmq.broker.acting_writes import ActingPopWrites, EscapedReviveWrites, EscapedTimerWrites
from pocketmq.broker.ha_metadata import apply_offsets
from pocketmq.broker.pop.revive_queue import LocalPopWrites, ack_message
from pocketmq.broker.timer.service import tombstone
from pocketmq.cluster.acting_master import ActingMasterElection
from pocketmq.cluster.escape import EscapeBridge
from pocketmq.common.errors import PocketMQError, StoreError
from pocketmq.common.topic import revive_topic
from pocketmq.protocol.codes import ACTING_MASTER_HANDOVER, ACTING_PROGRESS_APPLIED, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.route import MASTER_ID

log = logging.getLogger(__name__)

_HANDOVER_TIMEOUT_S = 5.0


class ActingServices:
    def __init__(self, broker):
        self._broker = broker
        config = broker.config
        self.progress = ActingProgress(config.metadata_dir() / "acting_master.json")
        self.progress.load()
        self.bridge = EscapeBridge(
            broker.namesrv_client(),
            broker.remoting_client,
            cluster_name=config.cluster_name,
            broker_name=broker.broker_name,
            store_host=broker.broker_addr,
            enabled=lambda: broker.config.enable_remote_escape,
            metrics=broker.metrics,
            clock=broker.clock,
        )
        # Pops on the acting slave move consumer offsets and the FIFO pop state (as on a master: PopService's
        # persist task); saving them as often bounds what a kill -9 of the slave hands out again.
        self._persister = broker.periodic(
            "acting-persist-pop-state", lambda: broker.config.pop_state_persist_interval_ms, self._persist_pop_state
        )

    def election(self) -> ActingMasterElection:
        broker, config = self._broker, self._broker.config
        return ActingMasterElection(
            broker.namesrv_client(),
            self,
            broker.clock,
            cluster_name=config.cluster_name,
            broker_name=broker.broker_name,
            broker_id=config.broker_id,
            enabled=lambda: broker.config.enable_slave_acting_master,
            check_interval_ms=config.ha_master_lookup_interval_ms,
            metrics=broker.metrics,
        )

    async def start(self) -> None:
        timer, revive = self._broker.timer, self._broker.pop.revive
        timer.writes = EscapedTimerWrites(self.bridge, self.progress)
        timer.load_new()
        delivered = self.progress.delivered_timers()
        for queue_offset, deliver_ms in delivered:
            timer.forget_delivered(deliver_ms, queue_offset)
        revive.writes = EscapedReviveWrites(self.bridge, self.progress)
        acks = self.progress.acks()  # the side file parsed once, not once per revive queue
        acks_by_queue: dict[int, list] = {}
        for queue_id, ack in acks:
            acks_by_queue.setdefault(queue_id, []).append(ack)
        offsets_moved = 0
        for queue in revive.queues:
            queue.catch_up()
            for ack in acks_by_queue.get(queue.queue_id, ()):
                queue.ledger.apply_ack(ack)
            # The master's pops since the last metadata sync: their CKs are here, their offsets may not be.
            offsets_moved += queue.raise_pop_offsets(self._broker.offsets)
        self._broker.pop.writes = ActingPopWrites(
            self.bridge, self.progress, revive_topic(self._broker.config.cluster_name)
        )
        timer.start_delivery()
        self._persister.start()
        revive.start()
        log.info(
            "event=acting_services_started open_cks=%d pending_timers=%d acks_kept=%d timers_delivered=%d "
            "pop_offsets_moved=%d",
            sum(len(q.ledger) for q in revive.queues),
            timer.pending,
            len(acks),
            len(delivered),
            offsets_moved,
        )

    async def stop(self) -> None:
        # pops on a slave that does not act fail again (its store is read-only)
        self._broker.pop.writes = LocalPopWrites(self._broker.store, self._broker.topics)
        # A pop still escaping its CK moves its offset when the escape returns: that offset must be in what the
        # master takes over (handover_body), or the master hands those messages out again beside the CK.
        await self._broker.pop.settle()
        await self._broker.pop.revive.stop()
        await self._broker.timer.stop_delivery()
        await self._persister.stop()
        self._persist_pop_state()

    def _persist_pop_state(self) -> None:
        self._broker.offsets.persist()
        self._broker.pop.fifo.persist()

    def handover_body(self) -> bytes:
        """What a returning master takes over (ACTING_MASTER_HANDOVER): the side file, the consumer offsets, the
        FIFO POP state and the staged-POP registrations (the last two are the slave's own while it acts)."""
        pop = self._broker.pop
        return self.progress.snapshot(
            self._broker.offsets.snapshot(), pop.fifo.to_json(), pop.staged.registry.to_json()
        )

    def runtime_info(self, acting: bool) -> dict[str, str]:
        return {
            "actingMaster": str(acting).lower(),
            "escapedTotal": str(self.bridge.escaped),
            "escapeFailures": str(self.bridge.failures),
            "actingProgressEntries": str(len(self.progress)),
        }

    def applied(self, version: int) -> int:
        removed = self.progress.applied(version)
        log.info(
            "event=acting_progress_handed_over version=%d entries=%d left=%d", version, removed, len(self.progress)
        )
        return removed


async def take_services_back(broker) -> None:
    """A starting master: take over the acting progress of every slave of its group (see the module doc)."""
    try:
        info = await broker.namesrv_client().cluster_info()
    except PocketMQError as exc:
        log.warning("event=acting_handover_skipped reason=no_cluster_info error=%s", exc)
        return
    group = info.broker_addr_table.get(broker.broker_name)
    slaves = sorted((bid, addr) for bid, addr in (group.broker_addrs.items() if group else ()) if bid != MASTER_ID)
    for broker_id, addr in slaves:
        try:
            await _take_from(broker, broker_id, addr)
        except (PocketMQError, ValueError) as exc:
            log.warning(
                "event=acting_handover_failed slave=%s/%d addr=%s error=%s (what it did while acting may "
                "be done again: at least once)",
                broker.broker_name,
                broker_id,
                addr,
                exc,
            )


async def _take_from(broker, broker_id: int, addr: str) -> None:
    fields = {"brokerName": broker.broker_name, "masterAddr": broker.broker_addr}
    response = await _invoke(broker, addr, RemotingCommand.request(ACTING_MASTER_HANDOVER, fields))
    handover = parse_snapshot(response.body)
    try:
        offsets_moved = apply_offsets(handover.consumer_offsets, broker.offsets)
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"consumer offsets do not parse: {exc}") from None
    fifo = broker.pop.fifo
    fifo.load()  # before the POP service starts (it loads the file then; merged here, saved below)
    fifo_merged = fifo.merge(handover.pop_fifo)
    fifo.persist()
    stages_added = broker.pop.staged.registry.merge_missing(handover.pop_stages)
    if handover.acks or handover.timers:
        topic = revive_topic(broker.config.cluster_name)
        records = [ack_message(topic, queue_id, ack) for queue_id, ack in handover.acks]
        records += [tombstone(queue_offset, deliver_ms) for queue_offset, deliver_ms in handover.timers]
        results = await broker.store.put_messages(records)
        if not all(r.status.stored for r in results):
            raise StoreError(f"acting progress not stored: {results[0].status.value}")
    await _invoke(
        broker, addr, RemotingCommand.request(ACTING_PROGRESS_APPLIED, {**fields, "version": handover.version})
    )
    log.warning(
        "event=acting_services_taken_back slave=%s/%d acks=%d timers=%d offsets_moved=%d "
        "fifo_queues_merged=%d pop_stages_added=%d version=%d",
        broker.broker_name,
        broker_id,
        len(handover.acks),
        len(handover.timers),
        offsets_moved,
        fifo_merged,
        stages_added,
        handover.version,
    )


async def _invoke(broker, addr: str, request: RemotingCommand) -> RemotingCommand:
    response = await broker.remoting_client.invoke(addr, request, _HANDOVER_TIMEOUT_S)
    if response.code != ResponseCode.SUCCESS:
        raise RemoteServerError(response.code, response.remark or "")
    return response
