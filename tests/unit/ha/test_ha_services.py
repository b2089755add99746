"""The service state in the metadata sync (broker/ha_services.py): a slave's copies of its master's FIFO POP
state, staged-POP registrations, stage offsets and timer progress, what it keeps while acting, and the use of
the copies: in-process brokers on a ManualClock (the "slave" is a second broker given the same messages)."""

from __future__ import annotations

import json

import pytest
from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.ha_metadata import apply_metadata, metadata_snapshot
from pocketmq.broker.ha_services import ServiceStateFollower, TimerProgressGate
from pocketmq.broker.pop.fifo import FifoPopState
from pocketmq.broker.pop.staged import PopStageRegistry
from pocketmq.common.message import Message
from pocketmq.runtime.clock import ManualClock

FIFO_TOPIC = "F"
STAGED_TOPIC = "S"


def group_of(i: int) -> str:
    return "a" if i < 2 else "b"  # offsets 0, 1: message group a; 2: b


async def fill(broker) -> None:
    await send(broker, FIFO_TOPIC, 3, group_of=group_of)
    await send(broker, STAGED_TOPIC, 4)


def snapshot_of(broker) -> bytes:
    return metadata_snapshot(broker.topics, broker.groups, broker.offsets, broker.services.tables)


def sync(slave, body: bytes, follower: ServiceStateFollower):
    return apply_metadata(body, slave.topics, slave.groups, slave.offsets, follower)


async def test_a_slave_copies_the_service_state_and_an_acting_slave_uses_it(tmp_path):
    clock = ManualClock(1_000_000)
    async with running_broker(tmp_path / "m", clock) as master, running_broker(tmp_path / "s", clock) as slave:
        await fill(master)
        await fill(slave)  # the replica: the same messages at the same offsets
        popped = await pop(master, "G", FIFO_TOPIC, invisible_ms=60_000, fifo=True)
        assert [m.body for m, _ in popped] == [b"m0", b"m2"]  # one message per message group
        assert await master.pop.ack("G", [popped[1][1]]) == [None]  # b is done; a's m0 stays in flight
        master.pop.staged.register("G", STAGED_TOPIC, [2])
        master.stage_offsets.update("G", STAGED_TOPIC, 0, {"commitOffset": 3, "stageOffsets": []})
        acting = [False]
        follower = ServiceStateFollower(slave.services.tables, lambda: acting[0])

        changes = sync(slave, snapshot_of(master), follower).services
        assert (changes.pop_fifo_replaced, changes.pop_stages_replaced, changes.stage_offsets_moved) == (True, True, 1)
        assert slave.pop.fifo.to_json() == master.pop.fifo.to_json()
        assert slave.pop.staged.registry.to_json() == master.pop.staged.registry.to_json()
        assert slave.stage_offsets.to_json() == master.stage_offsets.to_json()
        # saved on the slave at once: a restarted slave has them while its master is away
        on_disk = FifoPopState(tmp_path / "s" / "data" / "config" / "pop_fifo.json")
        on_disk.load()
        assert on_disk.to_json() == master.pop.fifo.to_json()
        stages_on_disk = PopStageRegistry(tmp_path / "s" / "data" / "config" / "pop_stages.json")
        stages_on_disk.load()
        assert stages_on_disk.to_json() == master.pop.staged.registry.to_json()
        assert not sync(slave, snapshot_of(master), follower).services.any  # nothing new

        # Acting: group a stays blocked behind m0 (in flight on the master), b's m2 is not handed out again;
        # the master's receipt handle acks on the slave, and then a's next message comes.
        acting[0] = True
        assert await pop(slave, "G", FIFO_TOPIC, fifo=True) == []
        assert await slave.pop.ack("G", [popped[0][1]]) == [None]
        assert [m.body for m, _ in await pop(slave, "G", FIFO_TOPIC, fifo=True)] == [b"m1"]
        # The staged registration holds: the first stage (2 messages), not the plain path's 4.
        assert [m.body for m, _ in await pop(slave, "G", STAGED_TOPIC)] == [b"m0", b"m1"]

        # While acting the slave's FIFO state and stages are its own; stage offsets still only move forward.
        slave.stage_offsets.update("G", STAGED_TOPIC, 0, {"commitOffset": 5, "stageOffsets": []})
        master.stage_offsets.update("G", STAGED_TOPIC, 1, {"commitOffset": 1, "stageOffsets": []})
        master.pop.staged.unregister("G", STAGED_TOPIC)
        changes = sync(slave, snapshot_of(master), follower).services
        assert changes.skipped_acting and changes.stage_offsets_moved == 1
        assert not changes.pop_fifo_replaced and slave.pop.staged.is_staged("G", STAGED_TOPIC)
        assert slave.stage_offsets.query("G", STAGED_TOPIC, 0)["commitOffset"] == 5  # committed on the slave
        assert slave.stage_offsets.query("G", STAGED_TOPIC, 1)["commitOffset"] == 1

        acting[0] = False  # the master is back: its state wins again
        changes = sync(slave, snapshot_of(master), follower).services
        assert changes.pop_fifo_replaced and changes.pop_stages_replaced
        assert slave.pop.fifo.to_json() == master.pop.fifo.to_json()
        assert not slave.pop.staged.is_staged("G", STAGED_TOPIC)


async def test_an_older_master_and_a_bad_field(tmp_path):
    async with running_broker(tmp_path / "m") as master, running_broker(tmp_path / "s") as slave:
        await fill(master)
        master.pop.staged.register("G", STAGED_TOPIC, [2])
        follower = ServiceStateFollower(slave.services.tables, lambda: False)
        full = json.loads(snapshot_of(master))
        older = {key: full[key] for key in ("topics", "groups", "offsets")}  # what a master before this sends
        changes = sync(slave, json.dumps(older).encode(), follower)
        assert changes.topics_changed >= 2 and not changes.services.any
        assert slave.pop.staged.registry.to_json() == {"popStageTable": []}

        topics_before = sorted(slave.topics.names())
        for name, bad in [
            ("popFifo", {"queues": {"no-separators": {}}}),
            ("popStages", {"popStageTable": [{}]}),
            ("stageOffsets", {"stageOffsetTable": [{"group": "G"}]}),
            ("timer", {"physOffset": 1}),
        ]:
            broken = {**full, "topics": [], name: bad}
            with pytest.raises(ValueError, match="does not parse"):
                sync(slave, json.dumps(broken).encode(), follower)
        assert sorted(slave.topics.names()) == topics_before  # a snapshot that does not parse changes nothing
        assert slave.pop.staged.registry.to_json() == {"popStageTable": []}


async def send_delayed(broker, count: int) -> None:
    """``count`` messages of topic T delayed 2 s (level 2), loaded into the timer's wheel."""
    for i in range(count):
        await broker.messages.send([Message.create("T", f"late{i}", properties={"DELAY": "2"})], topic="T", queue_id=0)
    broker.timer.load_new()


def test_timer_progress_waits_until_the_replica_holds_what_it_covers():
    gate = TimerProgressGate()
    assert gate.offer(5, master_phys_offset=100, replica_phys_offset=50) is None
    assert gate.offer(7, master_phys_offset=120, replica_phys_offset=90) is None  # the first one still waits
    assert gate.waiting == (5, 100)
    assert gate.offer(9, master_phys_offset=130, replica_phys_offset=125) == 5  # reached: 9 waits now
    assert gate.waiting == (9, 130)
    assert gate.offer(10, master_phys_offset=140, replica_phys_offset=140) == 10  # both reached: the newest
    assert gate.waiting is None and repr(gate) == "<TimerProgressGate waiting=None>"


async def test_timer_advance_forgets_timers_below_and_bounds_a_restart(tmp_path):
    clock = ManualClock(1_000_000)
    async with running_broker(tmp_path, clock, message_delay_level="1s 2s") as broker:
        await send_delayed(broker, 3)
        assert broker.timer.pending == 3 and broker.timer.progress_offset() == 0
        assert broker.timer.advance_to(2)
        assert broker.timer.pending == 1 and broker.timer.progress_offset() == 2
        assert not broker.timer.advance_to(1)  # never backwards
        saved = json.loads((tmp_path / "data" / "config" / "timer_progress.json").read_text())
        assert saved["progressOffset"] == 2
        clock.advance(2_000)
        assert await broker.timer.fire_due(clock.now_ms()) == 1  # only the one the master had not delivered
    async with running_broker(tmp_path, clock, message_delay_level="1s 2s") as again:
        assert again.timer.pending == 0  # rebuilt from offset 2: the delivered one's tombstone closed it


async def test_the_follower_moves_the_timer_once_the_replica_caught_up(tmp_path):
    clock = ManualClock(1_000_000)
    async with running_broker(tmp_path, clock, message_delay_level="1s 2s") as broker:
        await send_delayed(broker, 2)
        follower = ServiceStateFollower(broker.services.tables, lambda: False)
        end = broker.store.max_phys_offset
        body = {"topics": [], "groups": [], "offsets": {}, "timer": {"progressOffset": 1, "physOffset": end + 10}}
        changes = apply_metadata(json.dumps(body).encode(), broker.topics, broker.groups, broker.offsets, follower)
        assert not changes.services.timer_progress_moved and broker.timer.pending == 2  # the replica lags
        await broker.messages.send([Message.create("T", "filler")], topic="T", queue_id=0)
        assert broker.store.max_phys_offset >= end + 10
        body["timer"] = {"progressOffset": 1, "physOffset": broker.store.max_phys_offset + 1_000}
        changes = apply_metadata(json.dumps(body).encode(), broker.topics, broker.groups, broker.offsets, follower)
        assert changes.services.timer_progress_moved and broker.timer.pending == 1  # the first one, now reached
