"""Slave acting master: the election's pure decision and its shell (fake name server, ManualClock), the side
file of acting progress, and the escaped writes of the timer and revive in an in-process broker (virtual time):
nothing is written to the local store, a failed escape keeps the timer pending and the CK open."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging

import pytest
from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker import acting_services as acting_services_module
from pocketmq.broker.acting_progress import ActingProgress, parse_snapshot
from pocketmq.broker.acting_services import HANDOVER_ATTEMPTS, ActingServices, take_offered, take_services_back
from pocketmq.broker.acting_writes import EscapedWritePath
from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.wiring import returning_master
from pocketmq.broker.write_path import ReadOnlyWritePath
from pocketmq.cluster.acting_master import ActingMasterElection, should_act
from pocketmq.cluster.escape import EscapeResult, EscapeTarget
from pocketmq.common.errors import (
    InvalidReceiptHandleError,
    NoPermissionError,
    RemotingTimeoutError,
    ServiceNotAvailableError,
)
from pocketmq.common.message import Message, MessageExt
from pocketmq.common.topic import pop_retry_topic
from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.fakes import FakeNameServer
from pocketmq.testing.polling import eventually


@pytest.mark.parametrize(
    "broker_id, live, expected",
    [
        (1, [0, 1], False),  # the master lives
        (1, [1, 2], True),  # master gone: the lowest live slave acts
        (2, [1, 2], False),  # ... and only it
        (2, [2], True),
        (1, [], True),  # not registered yet (restarting): it still counts itself
        (0, [1], False),  # a master never "acts": it runs its services itself
    ],
)
def test_should_act(broker_id, live, expected):
    assert should_act(broker_id, live, enabled=True, master_back_until_ms=0, now_ms=5) is expected


def test_disabled_or_master_announced_never_acts():
    assert not should_act(1, [1], enabled=False, master_back_until_ms=0, now_ms=5)
    assert not should_act(1, [1], enabled=True, master_back_until_ms=10, now_ms=5)
    assert should_act(1, [1], enabled=True, master_back_until_ms=10, now_ms=10)


def listing(names: FakeNameServer, *broker_ids: int) -> FakeNameServer:
    """The name server up, listing the brokers ``broker_ids`` of group a."""
    names.down = False
    return names.group("a", {i: f"h:{i}" for i in broker_ids}, "c")


class Services:
    def __init__(self):
        self.calls: list[str] = []
        self.handover_due = False  # set by the tests of the offer
        self.offered = asyncio.Event()
        self.offer_answered = asyncio.Event()  # the master's answer to an offer

    async def start(self):
        self.calls.append("start")

    async def stop(self):
        self.calls.append("stop")

    async def offer_progress(self, master_addr):
        self.calls.append(f"offer {master_addr}")
        self.offered.set()
        await self.offer_answered.wait()
        self.handover_due = False
        return True


def election_of(names, services, clock, *, enabled=lambda: True, **kw) -> ActingMasterElection:
    return ActingMasterElection(
        names,
        services,
        clock,
        cluster_name="c",
        broker_name="a",
        broker_id=1,
        enabled=enabled,
        check_interval_ms=100,
        **kw,
    )


async def test_election_follows_the_master_and_its_handover():
    names, services, clock = listing(FakeNameServer(), 0, 1), Services(), ManualClock()
    election = election_of(names, services, clock, handover_grace_ms=5_000)
    await election.check_once()
    assert services.calls == [] and not election.acting
    listing(names, 1)  # the master left a view that came right after one listing it: gone
    await election.check_once()
    await election.check_once()
    assert services.calls == ["start"] and election.acting
    listing(names)  # a name server that restarted, nobody registered again yet: nothing changes
    await election.check_once()
    assert election.acting
    names.down = True  # a silent name server changes nothing
    await election.check_once()
    assert election.acting
    await election.master_back()  # the master starts and announces itself before it registers
    assert services.calls == ["start", "stop"] and not election.acting
    listing(names, 1)
    clock.advance(4_999)
    await election.check_once()
    assert not election.acting  # within the grace
    clock.advance(1)
    await election.check_once()
    assert election.acting  # the master never registered: act again
    listing(names, 0, 1)
    await election.check_once()
    assert services.calls == ["start", "stop", "start", "stop"]


async def test_a_name_server_that_restarted_does_not_make_a_slave_act_beside_its_live_master():
    """A restarted name server knows no broker until each registers again: the slave may be back in it before
    its master. A master the slave did not see go counts as gone only if it has not answered the slave's
    replication for a registration interval either."""
    names, services, clock = listing(FakeNameServer(), 0, 1), Services(), ManualClock()
    answered = [None]
    election = election_of(names, services, clock, absence_confirm_ms=500, master_answered_ms=lambda: answered[0])
    await election.check_once()
    answered[0] = clock.monotonic_ms()  # replication goes on meanwhile
    names.down = True  # the name server is down
    await election.check_once()
    listing(names)  # back, nobody registered again
    await election.check_once()
    listing(names, 1)  # the slave registered first
    await election.check_once()
    clock.advance(499)
    await election.check_once()
    assert services.calls == [] and not election.acting
    listing(names, 0, 1)  # the master registers within its interval: it never was gone
    await election.check_once()
    assert services.calls == []
    names.down = True
    await election.check_once()
    listing(names, 1)  # this time the master is not back, and it has not answered for the interval
    clock.advance(1)
    await election.check_once()
    assert services.calls == ["start"] and election.acting


async def test_a_slave_that_starts_while_its_master_is_away_acts_at_once():
    names, services, clock = listing(FakeNameServer(), 1), Services(), ManualClock()
    election = election_of(names, services, clock, master_answered_ms=lambda: None)  # never heard from it
    await election.check_once()
    assert services.calls == ["start"]


def test_progress_survives_a_restart_and_a_handover_forgets_what_was_applied(tmp_path):
    path = tmp_path / "acting_master.json"
    progress = ActingProgress(path)
    ack = AckRecord("T", "G", 0, 5, 1000, "a", (5, 6))
    progress.record_ack(3, ack)
    progress.record_delivered(7, 2000)
    progress.save()
    again = ActingProgress(path)
    again.load()
    assert again.acks() == [(3, ack)] and again.acks(2) == [] and again.delivered_timers() == [(7, 2000)]
    handover = parse_snapshot(again.snapshot({"T@G": {"0": 9}}))
    assert (handover.version, handover.acks, handover.timers) == (2, [(3, ack)], [(7, 2000)])
    assert handover.consumer_offsets == {"T@G": {"0": 9}}
    again.record_delivered(8, 3000)  # after the snapshot: stays
    assert again.applied(handover.version) == 2
    assert again.delivered_timers() == [(8, 3000)] and again.acks() == []
    with pytest.raises(ValueError):
        parse_snapshot(b"{not json")


class FakeBridge:
    def __init__(self):
        self.up = False
        self.sent: list[tuple[str, Message]] = []

    async def _put(self, kind, msg):
        if not self.up:
            return EscapeResult.failed("ESCAPE_DISABLED", "off")
        self.sent.append((kind, msg))
        return EscapeResult(True, EscapeTarget("b", "b:0", 0))

    async def put_message(self, msg, routes=None):
        return await self._put("route", msg)

    async def put_to_specific_queue(self, msg, routes=None):
        return await self._put("specific", msg)

    async def put_to(self, msg, target):
        return await self._put("to", msg)


async def test_escaped_timer_keeps_pending_until_the_escape_works(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, message_delay_level="1s 2s") as broker:
        await broker.messages.send([Message.create("T", "late", properties={"DELAY": "1"})], topic="T", queue_id=0)
        bridge, progress = FakeBridge(), ActingProgress(tmp_path / "acting.json")
        broker.write_path.use(EscapedWritePath(bridge, progress, broker.pop.revive.queues[0].topic, clock))
        store_end = broker.store.max_phys_offset
        clock.advance(1000)
        broker.timer.load_new()
        assert await broker.timer.fire_due(clock.now_ms()) == 0
        assert broker.timer.pending == 1 and progress.delivered_timers() == []
        due_ms = clock.now_ms()
        bridge.up = True
        assert await broker.timer.fire_due(clock.now_ms()) == 0  # it waits its write backoff (10 s) first
        clock.advance(10_000)
        assert await broker.timer.fire_due(clock.now_ms()) == 1
        [(kind, real)] = bridge.sent
        assert (kind, real.topic, real.body, "DELAY" in real.properties) == ("route", "T", b"late", False)
        assert broker.timer.pending == 0 and progress.delivered_timers() == [(0, due_ms)]
        assert broker.store.max_phys_offset == store_end  # no tombstone, no message: the store is untouched


async def test_escaped_revive_keeps_the_ck_open_until_the_escape_works(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 3)
        popped = await pop(broker, "G", "T", invisible_ms=5_000)
        assert len(popped) == 3
        revive = broker.pop.revive
        bridge, progress = FakeBridge(), ActingProgress(tmp_path / "acting.json")
        broker.write_path.use(EscapedWritePath(bridge, progress, broker.pop.revive.queues[0].topic, clock))
        store_end = broker.store.max_phys_offset
        clock.advance(5_001)
        await revive.run_once(clock.now_ms())
        # the first copy failed, the two after it were not tried: three copies did not reach the store
        assert sum(len(q.ledger) for q in revive.queues) == 1 and revive.metrics["write_failures"] == 3
        bridge.up = True
        assert await revive.run_once(clock.now_ms()) == 0  # the CK waits its write backoff (10 s) first
        clock.advance(10_000)
        assert await revive.run_once(clock.now_ms()) == 1
        assert sum(len(q.ledger) for q in revive.queues) == 0
        assert sorted(m.body for _, m in bridge.sent) == [b"m0", b"m1", b"m2"]
        assert {m.topic for _, m in bridge.sent} == {pop_retry_topic("G", "T")}
        assert all(kind == "specific" and m.reconsume_times == 1 for kind, m in bridge.sent)
        [(queue_id, ack)] = progress.acks()
        assert sorted(ack.acked_offsets) == [0, 1, 2]
        assert broker.store.max_phys_offset == store_end


async def test_a_rewritten_ck_escapes_too_and_a_failure_keeps_it_open(tmp_path):
    from tests.unit.pop.test_typed_reads import FailingReader

    clock = ManualClock()
    async with running_broker(tmp_path, clock, pop_ck_rewrite_backoff_ms=(1_000,)) as broker:
        await send(broker, "T", 1)
        await pop(broker, "G", "T", invisible_ms=5_000)
        revive = broker.pop.revive
        revive.readers.local = FailingReader(clock)
        bridge, progress = FakeBridge(), ActingProgress(tmp_path / "acting.json")
        broker.write_path.use(EscapedWritePath(bridge, progress, broker.pop.revive.queues[0].topic, clock))
        clock.advance(5_001)
        assert await revive.run_once(clock.now_ms()) == 0  # the CK stays open, in the write backoff
        assert sum(len(q.ledger) for q in revive.queues) == 1 and progress.acks() == []
        assert revive.metrics["write_failures"] == 1 and revive.pacer.blocked
        bridge.up = True
        clock.advance(1_000)
        await revive.run_once(clock.now_ms())
        [(kind, ck_message)] = bridge.sent
        assert kind == "specific" and ck_message.topic == revive.queues[0].topic and b'"rp":"1"' in ck_message.body
        assert sum(len(q.ledger) for q in revive.queues) == 0 and len(progress.acks()) == 1


async def test_pop_on_the_acting_slave_escapes_its_ck_and_forwards_acks_and_changes(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 4)
        [(_, replica_handle)] = await pop(broker, "G", "T", max_count=1)  # popped before the master went away
        bridge, progress = FakeBridge(), ActingProgress(tmp_path / "acting.json")
        broker.write_path.use(EscapedWritePath(bridge, progress, broker.pop.revive.queues[0].topic, clock))
        store_end = broker.store.max_phys_offset
        with pytest.raises(ServiceNotAvailableError):  # no escape: no pop (the offset does not move)
            await pop(broker, "G", "T")
        bridge.up = True
        popped = await pop(broker, "G", "T")
        assert [m.body for m, _ in popped] == [b"m1", b"m2", b"m3"]
        [(kind, ck_message)] = bridge.sent
        assert kind == "specific" and b'"bn":"broker-a"' in ck_message.body
        assert all(h.revive_queue_id == 0 for _, h in popped)  # the queue the escape chose (FakeBridge: 0)
        # an ack of an escaped CK follows it; an ack of a replica CK is kept here, in the side file
        assert await broker.pop.ack("G", [popped[0][1], replica_handle]) == [None, None]
        assert [k for k, _ in bridge.sent] == ["specific", "to"] and b'"ao":1' in bridge.sent[1][1].body
        [(queue_id, replica_ack)] = progress.acks()
        assert replica_ack.acked_offsets == (0,) and sum(len(q.ledger) for q in broker.pop.revive.queues) == 0
        # a change: the new CK escapes first, then the old message's ack
        changed = await broker.pop.change_invisible("G", popped[1][1], 30_000)
        assert changed.pop_time_ms > popped[1][1].pop_time_ms
        assert [b'"ao":2' in m.body or b'"so":2' in m.body for _, m in bridge.sent[2:]] == [True, True]
        assert bridge.sent[2][1].properties["TAGS"] == "ck" and bridge.sent[3][1].properties["TAGS"] == "ack"
        assert broker.offsets.query("G", "T", 0) == 4  # consumer offsets move here
        assert broker.store.max_phys_offset == store_end


def test_switches_from_cli_flags_and_broker_conf(tmp_path):
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.cli.main import build_parser
    from pocketmq.cli.serve_cmd import broker_config_from_args
    from pocketmq.common.config import load_config

    off = broker_config_from_args(build_parser().parse_args(["serve"]))
    assert (off.enable_slave_acting_master, off.enable_remote_escape) == (False, False)
    on = broker_config_from_args(
        build_parser().parse_args(["serve", "--enable-slave-acting-master", "--enable-remote-escape"])
    )
    assert (on.enable_slave_acting_master, on.enable_remote_escape) == (True, True)
    conf = tmp_path / "broker.conf"
    conf.write_text("enableSlaveActingMaster=true\nenableRemoteEscape=true\n")
    loaded = load_config(BrokerConfig, file=conf, section="broker", env={})
    assert (loaded.enable_slave_acting_master, loaded.enable_remote_escape) == (True, True)


async def test_forward_to_the_dlq_on_the_acting_slave_escapes_the_dead_letter_and_the_ack(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 2)
        [(_, replica_handle)] = await pop(broker, "G", "T", max_count=1)
        bridge, progress = FakeBridge(), ActingProgress(tmp_path / "acting.json")
        bridge.up = True
        broker.write_path.use(EscapedWritePath(bridge, progress, broker.pop.revive.queues[0].topic, clock))
        store_end = broker.store.max_phys_offset
        [(_, escaped_handle)] = await pop(broker, "G", "T")
        await broker.pop.forward_to_dead_letter("G", replica_handle)
        await broker.pop.forward_to_dead_letter("G", escaped_handle)
        dead = [m for _, m in bridge.sent if m.topic == "%DLQ%G"]
        assert sorted(m.body for m in dead) == [b"m0", b"m1"]
        assert [a.acked_offsets for _, a in progress.acks()] == [(0,)]  # the replica CK's ack, kept here
        assert sum(b'"ao":1' in m.body for _, m in bridge.sent) == 1  # the escaped CK's ack, forwarded
        assert broker.store.max_phys_offset == store_end


async def test_a_disabled_election_asks_nothing_and_a_switch_off_stops_the_services():
    names, services, clock = listing(FakeNameServer(), 0, 1), Services(), ManualClock()
    listing(names, 1)
    enabled = [False]
    election = election_of(names, services, clock, enabled=lambda: enabled[0])
    await election.check_once()
    assert services.calls == [] and names.asked == 0
    enabled[0] = True
    await election.check_once()
    assert services.calls == ["start"]
    enabled[0] = False
    await election.check_once()
    assert services.calls == ["start", "stop"] and not election.acting


async def test_the_election_counts_into_the_metrics():
    from pocketmq.metrics import MetricsRegistry

    names, services, clock, metrics = listing(FakeNameServer(), 0, 1), Services(), ManualClock(), MetricsRegistry()
    election = election_of(names, services, clock, metrics=metrics)
    await election.check_once()
    assert metrics.value("pocketmq_acting_master") == 0  # a slave that does not act shows 0, not nothing
    listing(names, 1)
    await election.check_once()
    await election.check_once()
    assert metrics.value("pocketmq_acting_master") == 1
    assert metrics.value("pocketmq_acting_master_changes_total", to="acting", reason="master_gone") == 1
    await election.master_back()
    assert metrics.value("pocketmq_acting_master") == 0
    assert metrics.value("pocketmq_acting_master_changes_total", to="stopped", reason="master_handover") == 1


def acting_services(broker, bridge, tmp_path) -> ActingServices:
    """The acting services of an in-process broker (its write path returns to a read-only one when they stop)."""
    return ActingServices(
        bridge=bridge,
        progress=ActingProgress(tmp_path / "acting.json"),
        revive_topic=broker.pop.revive.queues[0].topic,
        write_path=broker.write_path,
        read_only=ReadOnlyWritePath("not acting"),
        timer=broker.timer,
        pop=broker.pop,
        transactions=broker.transactions,
        offsets=broker.offsets,
        persist_interval_ms=1_000,
        periodic=broker.periodic,
        master=OfferedMaster(),
    )


class OfferedMaster:
    """The master a slave offers its acting progress to (ACTING_PROGRESS_OFFER): ``taking`` says whether it takes."""

    def __init__(self):
        self.offers: list[str] = []
        self.taking = True

    async def offer(self, master_addr):
        self.offers.append(master_addr)
        if not self.taking:
            raise ServiceNotAvailableError("the acting progress of h:1 was not taken")


class StalledBridge(FakeBridge):
    """Escapes that hang until ``release`` is set (a link that stalls every byte, then heals)."""

    def __init__(self):
        super().__init__()
        self.up = True
        self.stalled = asyncio.Event()
        self.release = asyncio.Event()

    async def _put(self, kind, msg):
        self.stalled.set()
        await self.release.wait()
        return await super()._put(kind, msg)


async def test_a_handover_during_a_pop_escaping_its_ck_hands_over_that_pops_offset(tmp_path, monkeypatch, caplog):
    """The slave stops acting (its master is back) while a pop waits for its CK's escape; the escape then
    succeeds. The offsets the master takes over must include that pop, or the master hands the same messages
    out again while the escaped CK revives them too (an acked message coming back). A slow stop says which step
    took the time (every stop counts as slow here)."""
    monkeypatch.setattr(acting_services_module, "SLOW_STOP_MS", 0)
    caplog.set_level(logging.WARNING, logger="pocketmq.broker.acting_services")
    async with running_broker(tmp_path, ManualClock()) as broker:
        await send(broker, "T", 2)
        bridge = StalledBridge()
        services = acting_services(broker, bridge, tmp_path)
        broker.write_path.use(EscapedWritePath(bridge, services.progress, broker.pop.revive.queues[0].topic))
        popping = asyncio.ensure_future(pop(broker, "G", "T"))
        await bridge.stalled.wait()

        async def handover() -> bytes:  # what ACTING_MASTER_HANDOVER answers: stop, then the snapshot
            await services.stop()
            return services.handover_body()

        handing_over = asyncio.ensure_future(handover())
        for _ in range(5):
            await asyncio.sleep(0)
        bridge.release.set()
        popped, body = await popping, await handing_over
        assert [m.body for m, _ in popped] == [b"m0", b"m1"] and len(bridge.sent) == 1  # the CK escaped
        assert parse_snapshot(body).consumer_offsets["T@G"] == {"0": 2}
    [slow] = [r.getMessage() for r in caplog.records if "event=acting_services_stop_slow" in r.getMessage()]
    assert all(f"{step}_ms=" in slow for step in ("revive", "transactions", "timer", "persister", "pop_settle"))


async def test_a_full_disk_on_the_acting_slave_does_not_fail_its_handover(tmp_path, monkeypatch):
    """Its stop saves the offsets and FIFO state it popped with; failing there failed ACTING_MASTER_HANDOVER, and
    the master popped again what had been popped and acked on the slave (fault-harness seed 322)."""
    async with running_broker(tmp_path, ManualClock()) as broker:
        await send(broker, "T", 2)
        bridge = FakeBridge()
        bridge.up = True
        services = acting_services(broker, bridge, tmp_path)
        await services.start()
        assert [m.body for m, _ in await pop(broker, "G", "T")] == [b"m0", b"m1"]

        def disk_full() -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(broker.offsets, "persist", disk_full)
        await services.stop()
        handover = parse_snapshot(services.handover_body())
        assert handover.consumer_offsets["T@G"] == {"0": 2}
        # the master's confirmation (ACTING_PROGRESS_APPLIED) is answered too: what it took is forgotten
        services.progress.record_ack(0, AckRecord("T", "G", 0, 0, 1_000, "b", (0,)))  # something handed over
        monkeypatch.setattr(services.progress, "save", disk_full)
        services.applied(services.progress.version)
        assert len(services.progress) == 0


class TargetBridge(FakeBridge):
    """Each CK escapes to the next queue of broker b; ``put_to`` records where it was sent."""

    def __init__(self):
        super().__init__()
        self.up = True
        self.queue = 0
        self.sent_to: list[tuple[EscapeTarget, Message]] = []

    async def put_to_specific_queue(self, msg, routes=None):
        self.queue += 1
        self.sent.append(("specific", msg))
        return EscapeResult(True, EscapeTarget("b", "b:0", self.queue))

    async def put_to(self, msg, target):
        self.sent_to.append((target, msg))
        return EscapeResult(True, target)


async def test_the_acting_slave_forwards_only_acks_it_can_vouch_for(tmp_path):
    """An ack of a handle whose CK is not here answers OK only when the CK escaped from here, the message is not
    acked yet, and the ack can be stored where the CK went before the CK falls due there; it goes to exactly that
    queue. Any other handle is refused (before, each was escaped to the hashed queue and answered OK, also when
    nothing there would ever honour it)."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 3)
        bridge, progress = TargetBridge(), ActingProgress(tmp_path / "acting.json")
        broker.write_path.use(EscapedWritePath(bridge, progress, broker.pop.revive.queues[0].topic, clock))
        [(_, first)] = await pop(broker, "G", "T", max_count=1, invisible_ms=60_000)
        [(_, second)] = await pop(broker, "G", "T", max_count=1, invisible_ms=60_000)
        assert (first.revive_queue_id, second.revive_queue_id) == (1, 2)
        assert await broker.pop.ack("G", [second]) == [None]
        [(target, ack_msg)] = bridge.sent_to
        assert target.queue_id == 2 and ack_msg.queue_id == 2 and ack_msg.properties["TAGS"] == "ack"
        [again] = await broker.pop.ack("G", [second])  # acked already
        assert isinstance(again, InvalidReceiptHandleError)
        forged = dataclasses.replace(first, start_offset=7, queue_offset=7)  # a CK that never escaped from here
        assert isinstance((await broker.pop.ack("G", [forged]))[0], InvalidReceiptHandleError)
        clock.advance(60_000 - 2_000)  # 2 s before its revive time: an ack might land after the CK fell due
        [late] = await broker.pop.ack("G", [first])
        assert isinstance(late, InvalidReceiptHandleError) and len(bridge.sent_to) == 1


async def test_staged_pops_on_the_acting_slave_escape_their_cks_and_keep_the_stages(tmp_path):
    """A staged queue on the acting slave: its CKs escape like normal POP's (before, they were appended to the
    slave's read-only store and the pop failed), the gate counts the escaped CKs in flight, acks follow them, an
    expired replica CK comes back in place with its ACK kept in the side file, and the store is never written."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 6)
        broker.pop.staged.register("G", "T", [1, 2, 3])
        [(replica_msg, _)] = await pop(broker, "G", "T", invisible_ms=5_000)  # stage 0, popped on the master
        bridge, progress = TargetBridge(), ActingProgress(tmp_path / "acting.json")
        broker.write_path.use(EscapedWritePath(bridge, progress, broker.pop.revive.queues[0].topic, clock))
        store_end = broker.store.max_phys_offset
        assert await pop(broker, "G", "T") == []  # stage 0 in flight (the replica CK)
        clock.advance(5_000)
        [(again, again_handle)] = await pop(broker, "G", "T", invisible_ms=60_000)  # in place, attempt 2
        assert (again.body, again.reconsume_times) == (replica_msg.body, 1)
        assert [a.acked_offsets for _, a in progress.acks()] == [(0,)]  # the replica CK closed in the side file
        assert await pop(broker, "G", "T") == []  # its escaped CK holds stage 0 back
        assert await broker.pop.ack("G", [again_handle]) == [None]
        stage1 = await pop(broker, "G", "T", invisible_ms=60_000)
        assert [m.body for m, _ in stage1] == [b"m1", b"m2"]
        assert await pop(broker, "G", "T") == []  # stage 1 in flight on escaped CKs only
        assert await broker.pop.ack("G", [h for _, h in stage1]) == [None, None]
        assert [m.body for m, _ in await pop(broker, "G", "T")] == [b"m3", b"m4", b"m5"]
        assert [k for k, m in bridge.sent if m.properties["TAGS"] == "ck"] == ["specific"] * 3
        assert len(bridge.sent_to) == 3  # the acks, each to its CK's queue
        assert broker.store.max_phys_offset == store_end


async def test_revive_takes_a_staged_ck_escaped_here_from_another_group(tmp_path):
    """A staged CK this broker's own pops wrote comes back in place through the gate; one another group's acting
    slave escaped here names that group, which no gate here reads: revive copies it like any other CK."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 1)
        broker.pop.staged.register("G", "T", [1])
        queue = broker.pop.revive.queues[0]
        foreign = PopCheckpoint.of_offsets("T", "G", 0, [0], clock.now_ms(), 1_000, "group-other", 0)
        await queue.append([foreign])
        readers = broker.pop.revive.readers
        readers._remote["group-other"] = readers.local  # that group's message, read back (here: the same store)
        clock.advance(1_000)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 1
        # a retry copy (a CK of this group's own pops would have stayed for the gate to hand back in place)
        [copy] = broker.store.get_messages(pop_retry_topic("G", "T"), 0, 0, 10).messages()
        assert copy.reconsume_times == 1


class BridgeThatStops(FakeBridge):
    """Escapes the first ``good`` messages, then fails every one (its target went down mid-pass)."""

    def __init__(self, good: int):
        super().__init__()
        self.up = True
        self.good = good

    async def _put(self, kind, msg):
        self.up = len(self.sent) < self.good
        return await super()._put(kind, msg)


async def test_a_close_that_escaped_its_first_cks_counts_their_rewrites_only(tmp_path):
    from tests.unit.pop.test_typed_reads import FailingReader

    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        revive = broker.pop.revive
        cks = 2 * len(revive.queues)  # two CKs in every revive queue
        await send(broker, "T", cks)
        for _ in range(cks):
            assert len(await pop(broker, "G", "T", max_count=1, invisible_ms=5_000)) == 1
        revive.readers.local = FailingReader(clock)
        bridge, progress = BridgeThatStops(good=1), ActingProgress(tmp_path / "acting.json")
        broker.write_path.use(EscapedWritePath(bridge, progress, revive.queues[0].topic, clock))
        clock.advance(5_001)
        # the first revive queue's first CK is rewritten and closed; its second CK's rewrite fails, and every
        # other queue's first
        assert await revive.run_once(clock.now_ms()) == 1
        assert len(bridge.sent) == 1 and len(progress.acks()) == 1
        assert (revive.metrics["rewrites"], revive.metrics["cks_revived"]) == (1, 1)
        assert sum(len(q.ledger) for q in revive.queues) == cks - 1
        per_queue = revive.per_queue
        assert sum(n for (_, _, _, what), n in per_queue.items() if what == "rewrites") == 1


class SlowSlave:
    """A slave that answers the first ACTING_MASTER_HANDOVER too late (its rounds under way had not ended)."""

    def __init__(self, body: bytes, late_answers: int = 1):
        self.body = body
        self.late_answers = late_answers
        self.asked = 0
        self.applied: list[int] = []

    async def take_progress(self, addr):
        self.asked += 1
        if self.asked <= self.late_answers:
            raise RemotingTimeoutError(f"no reply from {addr} within 5.0s (code 30110)")
        return self.body

    async def progress_applied(self, addr, version):
        self.applied.append(version)


@pytest.mark.parametrize("late_answers, taken", [(1, True), (HANDOVER_ATTEMPTS, False)])
async def test_a_slave_that_answers_the_handover_late_is_asked_again(tmp_path, late_answers, taken):
    progress = ActingProgress(tmp_path / "acting_master.json")
    progress.record_ack(0, AckRecord("T", "G", 0, 5, 1000, "a", (5, 6)))
    slave = SlowSlave(progress.snapshot({"T@G": {"0": 7}}), late_answers)
    async with running_broker(tmp_path / "master", ManualClock()) as broker:
        names = FakeNameServer().group(broker.broker_name, {0: "h:0", 1: "h:1"})
        master = dataclasses.replace(returning_master(broker, broker.services), namesrv=names, slaves=slave)
        await take_services_back(master)
        assert slave.asked == min(late_answers + 1, HANDOVER_ATTEMPTS)
        assert slave.applied == ([progress.version] if taken else [])
        assert broker.offsets.query("G", "T", 0) == (7 if taken else None)  # the pops made on the slave


async def test_a_master_that_cannot_save_what_it_takes_back_still_starts_and_leaves_it_with_the_slave(
    tmp_path, monkeypatch, caplog
):
    progress = ActingProgress(tmp_path / "acting_master.json")
    progress.record_ack(0, AckRecord("T", "G", 0, 5, 1000, "a", (5, 6)))
    slave = SlowSlave(progress.snapshot({"T@G": {"0": 7}}), late_answers=0)
    async with running_broker(tmp_path / "master", ManualClock()) as broker:
        names = FakeNameServer().group(broker.broker_name, {0: "h:0", 1: "h:1"})
        master = dataclasses.replace(returning_master(broker, broker.services), namesrv=names, slaves=slave)

        def disk_full():
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(broker.pop.fifo, "persist", disk_full)
        await take_services_back(master)  # returns: the start goes on
        assert slave.asked == 1 and slave.applied == []  # not told it was applied: the slave offers it again
        assert "event=acting_handover_failed" in caplog.text and "No space left" in caplog.text


async def test_a_starting_master_begins_its_tenure_before_the_handover_writes(tmp_path, monkeypatch):
    """A master that cut a corrupt tail at recovery writes the slave's acks first: they must be in its new epoch,
    or a slave still holding the cut record at that offset finds no common prefix (a chaos run left a slave
    diverged for good this way)."""
    written = []

    async def handover_writing_an_ack(master):
        record = MessageExt(topic=master.revive_topic, body=b"an ACK record", queue_id=0)
        [result] = await master.store.put_messages([record])
        written.append(result.phys_offset)

    monkeypatch.setattr("pocketmq.broker.broker.take_services_back", handover_writing_an_ack)
    config = BrokerConfig(
        data_dir=tmp_path, remoting_port=0, enable_slave_acting_master=True, namesrv_addr="127.0.0.1:9"
    )
    broker = Broker(config, clock=ManualClock())
    await broker.start(remoting_port=10911)
    try:
        assert broker.epochs.current.start_phys_offset <= written[0]
    finally:
        await broker.shutdown()


async def test_a_master_back_without_a_restart_is_offered_the_progress_one_offer_at_a_time():
    """A master frozen or cut off long enough for its slave to act never restarts, so it never asks for what the
    slave did: the slave offers it once it stops acting, in the background (the checks go on), one offer at a
    time, until the master took it (fault-harness seed 326)."""
    names, services, clock = listing(FakeNameServer(), 0, 1), Services(), ManualClock()
    election = election_of(names, services, clock)
    await election.check_once()
    listing(names, 1)
    await election.check_once()
    services.handover_due = True  # it acts: there is progress to take
    await election.check_once()
    assert services.calls == ["start"]  # no offer while acting: the master is gone
    listing(names, 0, 1)  # the master shows up again without having announced itself
    await election.check_once()
    await asyncio.wait_for(services.offered.wait(), 5)
    assert services.calls == ["start", "stop", "offer h:0"] and not election.acting
    await election.check_once()  # the offer is still out: no second one
    services.offer_answered.set()
    await eventually(lambda: not services.handover_due, 5, "the offer answered")
    await election.check_once()  # taken: nothing to offer
    assert services.calls == ["start", "stop", "offer h:0"]
    await election.stop()


async def test_an_offer_the_master_did_not_take_is_made_again_and_shutdown_ends_one_under_way():
    names, services, clock = listing(FakeNameServer(), 0, 1), Services(), ManualClock()
    services.handover_due = True  # a restarted slave whose side file says it acted since the last handover
    election = election_of(names, services, clock)
    await election.check_once()
    await asyncio.wait_for(services.offered.wait(), 5)
    await election.stop()  # cancels the offer waiting for its answer
    assert services.handover_due and services.calls == ["offer h:0"]


def test_a_slave_that_starts_acting_owes_its_master_a_handover_until_one_covers_it(tmp_path):
    path = tmp_path / "acting_master.json"
    progress = ActingProgress(path)
    assert not progress.handover_due
    progress.record_acting()  # saved at once: a restart of the slave still offers it
    again = ActingProgress(path)
    again.load()
    assert again.handover_due and len(again) == 0
    taken = parse_snapshot(again.snapshot({})).version
    again.record_acting()  # acting again after the snapshot: still owed
    again.applied(taken)
    assert again.handover_due
    again.applied(again.version)
    assert not again.handover_due


async def test_the_acting_services_offer_their_progress_and_say_whether_it_was_taken(tmp_path, caplog):
    async with running_broker(tmp_path, ManualClock()) as broker:
        bridge = FakeBridge()
        bridge.up = True
        services = acting_services(broker, bridge, tmp_path)
        await services.start()
        assert services.handover_due
        await services.stop()
        master = services._master
        master.taking = False
        with caplog.at_level("INFO", logger="pocketmq.broker.acting_services"):
            assert not await services.offer_progress("h:0")
            assert not await services.offer_progress("h:0")  # refused the same way: not a second warning
        refusals = [r.levelname for r in caplog.records if "acting_progress_offer_failed" in r.getMessage()]
        assert refusals == ["WARNING", "INFO"]
        master.taking = True
        assert await services.offer_progress("h:0")
        assert master.offers == ["h:0", "h:0", "h:0"]


async def test_a_running_master_takes_the_progress_a_listed_slave_offers_and_refuses_an_unknown_one(tmp_path):
    """The master checks the name server before it calls the address back; it takes the progress into its
    running services: the slave's ack closes the master's open CK, its pops move the master's offsets."""
    async with running_broker(tmp_path / "master", ManualClock()) as broker:
        await send(broker, "T", 2)
        assert len(await pop(broker, "G", "T")) == 2  # popped on the master just before it froze
        for queue in broker.pop.revive.queues:
            queue.catch_up()
        [revive_queue] = [q for q in broker.pop.revive.queues if len(q.ledger)]
        [ck] = revive_queue.ledger.open_of_queue("G", "T", 0)
        progress = ActingProgress(tmp_path / "acting_master.json")  # the slave's: it acked both while acting
        progress.record_acting()
        ack = AckRecord("T", "G", 0, ck.start_offset, ck.pop_time_ms, ck.broker_name, tuple(ck.queue_offsets))
        progress.record_ack(revive_queue.queue_id, ack)
        slave = SlowSlave(progress.snapshot({"T@G": {"0": 7}}), late_answers=0)
        names = FakeNameServer().group(broker.broker_name, {0: "h:0", 1: "h:1"})
        master = dataclasses.replace(returning_master(broker, broker.services), namesrv=names, slaves=slave)
        with pytest.raises(NoPermissionError):
            await take_offered(master, 2, "h:2")
        with pytest.raises(NoPermissionError):
            await take_offered(master, 1, "elsewhere:1")  # not the address the name server lists
        assert slave.asked == 0
        await take_offered(master, 1, "h:1")
        assert slave.applied == [progress.version]
        assert broker.offsets.query("G", "T", 0) == 7
        revive_queue.catch_up()
        assert not revive_queue.ledger.is_open(ck.key)
        slave.late_answers = slave.asked + HANDOVER_ATTEMPTS  # a slave that no longer answers in time
        with pytest.raises(ServiceNotAvailableError):
            await take_offered(master, 1, "h:1")
