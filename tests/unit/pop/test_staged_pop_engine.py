"""Staged POP in the engine over a real store in virtual time (broker/pop/staged.py): stage by stage, expired
messages again in place (revive leaves them alone), dead letters past the max attempts, change invisible time,
a restart of the broker mid-stage, bad definitions, unregistering, group deletion, group describe counts."""

from __future__ import annotations

import pytest
from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.common.errors import BadRequestError
from pocketmq.common.topic import dlq_topic, pop_retry_topic
from pocketmq.runtime.clock import ManualClock


def offsets(got) -> list[int]:
    return sorted(m.queue_offset for m, _ in got)


async def test_stage_by_stage_and_in_place_redelivery(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 10)
        broker.pop.staged.register("G", "T", [3, 4])
        first = await pop(broker, "G", "T", 32)
        assert offsets(first) == [0, 1, 2]
        assert await pop(broker, "G", "T", 32) == []  # stage 1 waits for stage 0
        await broker.pop.ack("G", [h for m, h in first if m.queue_offset != 1])
        assert await pop(broker, "G", "T", 32) == []  # 1 is still in flight
        clock.advance(10_001)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0  # revive leaves staged CKs alone
        [(again, handle)] = await pop(broker, "G", "T", 32)
        assert again.queue_offset == 1 and again.reconsume_times == 1 and again.topic == "T"
        assert broker.store.max_queue_offset(pop_retry_topic("G", "T"), 0) == 0  # no retry copy
        await broker.pop.ack("G", [handle])
        second = await pop(broker, "G", "T", 2)
        second += await pop(broker, "G", "T", 32)
        assert offsets(second) == [3, 4, 5, 6]
        await broker.pop.ack("G", [h for _, h in second])
        assert offsets(await pop(broker, "G", "T", 32)) == [7, 8, 9]  # the unbounded last stage


async def test_dead_letter_past_max_attempts_ends_the_stage(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        broker.groups.create_or_update(SubscriptionGroupConfig("G", retry_max_times=1))
        await send(broker, "T", 3)
        broker.pop.staged.register("G", "T", [1, 1])
        assert offsets(await pop(broker, "G", "T", invisible_ms=1000)) == [0]
        clock.advance(1000)
        [(again, _)] = await pop(broker, "G", "T", invisible_ms=1000)
        assert (again.queue_offset, again.reconsume_times) == (0, 1)
        clock.advance(1000)
        assert offsets(await pop(broker, "G", "T")) == [1]  # 0 was dead-lettered, stage 1 goes
        assert broker.store.max_queue_offset(dlq_topic("G"), 0) == 1
        stats = broker.pop.group_stats("G")[("T", 0)]  # group describe's columns
        assert (stats.retried, stats.dead_lettered, stats.in_flight) == (1, 1, 1)
        broker.delete_group("G", clean_offsets=True)
        assert not broker.pop.staged.is_staged("G", "T")


async def test_change_invisible_keeps_the_message_in_its_stage(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 2)
        broker.pop.staged.register("G", "T", [1])
        [(_, handle)] = await pop(broker, "G", "T", invisible_ms=1000)
        clock.advance(1)
        new = await broker.pop.change_invisible("G", handle, 5000)
        clock.advance(2000)
        assert await pop(broker, "G", "T") == []  # still in flight under its new deadline
        await broker.pop.ack("G", [new])
        assert offsets(await pop(broker, "G", "T")) == [1]


async def test_restart_mid_stage_keeps_progress(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 8)
        broker.pop.staged.register("G", "T", [4])
        first = await pop(broker, "G", "T", 32)
        assert offsets(first) == [0, 1, 2, 3]
        await broker.pop.ack("G", [h for m, h in first if m.queue_offset in (0, 2)])
    async with running_broker(tmp_path, clock) as broker:
        assert await pop(broker, "G", "T") == []  # 1 and 3 still in flight: stage 1 waits
        clock.advance(10_001)
        again = await pop(broker, "G", "T", 32)
        assert offsets(again) == [1, 3] and {m.reconsume_times for m, _ in again} == {1}
        await broker.pop.ack("G", [h for _, h in again])
        assert offsets(await pop(broker, "G", "T", 32)) == [4, 5, 6, 7]


async def test_bad_definitions_and_unregister(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 4)
        for bad in ([0], [2, -1], "3", [1.5]):
            with pytest.raises(BadRequestError):
                broker.pop.staged.register("G", "T", bad)
        assert not broker.pop.staged.is_staged("G", "T")
        broker.pop.staged.register("G", "T", [1])
        assert offsets(await pop(broker, "G", "T", invisible_ms=1000)) == [0]
        assert broker.pop.staged.unregister("G", "T")
        assert offsets(await pop(broker, "G", "T", 32)) == [1, 2, 3]  # plain POP again
        clock.advance(1000)
        assert await broker.pop.revive.run_once(clock.now_ms()) >= 1  # revive takes the CKs back


async def test_restart_stages_starts_a_new_sequence_at_the_current_position(tmp_path):
    async with running_broker(tmp_path) as broker:
        await send(broker, "T", 10)
        assert broker.pop.staged.register("G", "T", [2]).origins == {0: 0}
        first = await pop(broker, "G", "T", 32)
        await broker.pop.ack("G", [h for _, h in first])
        old = await pop(broker, "G", "T", 3)
        assert offsets(old) == [2, 3, 4]  # the unbounded last stage
        assert broker.pop.staged.register("G", "T", [2]).origins == {0: 0}  # a consumer's restart keeps it
        # a new sale: the sequence starts again at the group's position, behind what is still in flight
        assert broker.pop.staged.register("G", "T", [2], restart=True).origins == {0: 5}
        assert await pop(broker, "G", "T", 32) == []  # 2, 3, 4 of the old sequence are still in flight
        await broker.pop.ack("G", [h for _, h in old])
        assert offsets(await pop(broker, "G", "T", 32)) == [5, 6]  # stage 0 of the new sequence
