"""The pop engine over a real store in virtual time: pop, ack, change invisible time, revive, DLQ, FIFO."""

from __future__ import annotations

import asyncio

import pytest
from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.pop.copies import DLQ_REASON, REASON_MAX_ATTEMPTS
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.common import properties as props
from pocketmq.common.errors import InvalidReceiptHandleError
from pocketmq.runtime.clock import ManualClock


def body(msg) -> str:
    return msg.body.decode()


async def test_pop_ack_and_revive_of_unacked(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 10, queues=2)
        got = await pop(broker, "G", "T", 32)
        assert sorted(body(m) for m, _ in got) == [f"m{i}" for i in range(10)]
        assert await pop(broker, "G", "T") == []  # the offset moved at pop time
        acked = [h for m, h in got if int(body(m)[1:]) % 2 == 0]
        assert await broker.pop.ack("G", acked) == [None] * 5
        clock.advance(10_001)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 1  # the even messages (queue 0) were all acked
        again = await pop(broker, "G", "T", 32)
        assert sorted(body(m) for m, _ in again) == [f"m{i}" for i in range(1, 10, 2)]
        assert {m.reconsume_times for m, _ in again} == {1}
        assert {m.topic for m, _ in again} == {"T"}
        assert all(props.FIRST_POP_TIME in m.properties for m, _ in again)
        stats = broker.pop.group_stats("G")
        assert sum(s.retried for s in stats.values()) == 5


async def test_stale_and_foreign_handles_are_invalid(tmp_path):
    async with running_broker(tmp_path) as broker:
        await send(broker, "T", 2)
        (_, h0), (_, h1) = await pop(broker, "G", "T")
        assert await broker.pop.ack("G", [h0]) == [None]
        errors = await broker.pop.ack("G", [h0, h1])
        assert isinstance(errors[0], InvalidReceiptHandleError) and errors[1] is None
        foreign = ReceiptHandle.decode(h1.encode().replace("broker-a", "broker-z"))
        assert isinstance((await broker.pop.ack("G", [foreign]))[0], InvalidReceiptHandleError)


async def test_change_invisible_postpones_and_keeps_attempt(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 1)
        [(_, handle)] = await pop(broker, "G", "T", invisible_ms=5_000)
        clock.advance(1)
        new = await broker.pop.change_invisible("G", handle, 60_000)
        with pytest.raises(InvalidReceiptHandleError):
            await broker.pop.change_invisible("G", handle, 60_000)  # the old handle is gone
        clock.advance(10_000)
        await broker.pop.revive.run_once(clock.now_ms())
        assert await pop(broker, "G", "T") == []  # postponed
        clock.advance(50_001)
        await broker.pop.revive.run_once(clock.now_ms())
        [(again, _)] = await pop(broker, "G", "T")
        assert again.reconsume_times == 1 and body(again) == "m0"
        assert (await broker.pop.ack("G", [new]))[0] is not None  # revived: the handle is stale


async def test_zero_invisible_time_is_floored(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 1)
        [(_, handle)] = await pop(broker, "G", "T")
        new = await broker.pop.change_invisible("G", handle, 0)
        assert new.invisible_time_ms == broker.config.pop_min_invisible_ms


async def test_dead_letter_after_max_retries(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        broker.groups.create_or_update(SubscriptionGroupConfig("G", retry_max_times=2))
        await send(broker, "T", 1)
        deliveries = 0
        for _ in range(5):
            got = await pop(broker, "G", "T")
            deliveries += len(got)
            clock.advance(10_001)
            await broker.pop.revive.run_once(clock.now_ms())
        assert deliveries == 3  # first delivery + 2 retries
        dlq = broker.store.get_messages("%DLQ%G", 0, 0, 10).messages()
        assert len(dlq) == 1
        dead = dlq[0]
        assert dead.properties[props.DLQ_ORIGIN_TOPIC] == "T"
        assert dead.properties[DLQ_REASON] == REASON_MAX_ATTEMPTS
        assert dead.properties["PMQ_DLQ_ORIGIN_QUEUE_OFFSET"] == "0"


async def test_concurrent_pops_never_share_a_message(tmp_path):
    async with running_broker(tmp_path) as broker:
        await send(broker, "T", 200, queues=4)
        seen = []
        for _ in range(10):
            batches = await asyncio.gather(*(pop(broker, "G", "T", 8) for _ in range(6)))
            seen += [body(m) for batch in batches for m, _ in batch]
        assert len(seen) == len(set(seen)) == 200


async def test_tag_filter(tmp_path):
    async with running_broker(tmp_path) as broker:
        await send(broker, "T", 9, tags=lambda i: "abc"[i % 3])
        got = await pop(broker, "G", "T", read_filter=broker.filters.read_filter("TAG", "a || c"))
        assert sorted(m.tags for m, _ in got) == ["a"] * 3 + ["c"] * 3


async def test_sql_filter_pops_the_matching_messages_and_moves_the_offset_past_the_rest(tmp_path):
    async with running_broker(tmp_path) as broker:
        await send(broker, "T", 9, tags=lambda i: "abc"[i % 3])
        sql = broker.filters.read_filter("SQL92", "TAGS IN ('b') OR TAGS = 'c'")
        got = await pop(broker, "G", "T", read_filter=sql)
        assert sorted(m.tags for m, _ in got) == ["b"] * 3 + ["c"] * 3
        assert broker.offsets.query("G", "T", 0) == 9
        nothing = broker.filters.read_filter("SQL92", "TAGS = 'z'")
        await send(broker, "T", 3, tags=lambda i: "a")
        assert await pop(broker, "G", "T", read_filter=nothing) == []
        assert broker.offsets.query("G", "T", 0) == 12  # all filtered: the group's progress moved past them


async def test_fifo_one_in_flight_per_message_group(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        broker.groups.create_or_update(SubscriptionGroupConfig("F", consume_message_orderly=True, retry_max_times=1))
        await send(broker, "T", 6, group_of=lambda i: "ab"[i % 2])
        first = await pop(broker, "F", "T")
        assert [body(m) for m, _ in first] == ["m0", "m1"]
        assert await pop(broker, "F", "T") == []
        await broker.pop.ack("F", [first[0][1]])
        [(m2, _)] = await pop(broker, "F", "T")
        assert body(m2) == "m2"
        clock.advance(10_001)
        again = await pop(broker, "F", "T")  # m1 and m2 expired: delivered again, attempt 2
        assert [(body(m), m.reconsume_times) for m, _ in again] == [("m1", 1), ("m2", 1)]
        clock.advance(10_001)
        after = await pop(broker, "F", "T")  # both past their max attempts: dead letters; m3, m4 next
        assert [body(m) for m, _ in after] == ["m3", "m4"]
        assert len(broker.store.get_messages("%DLQ%F", 0, 0, 10).records) == 2


@pytest.mark.parametrize("queues", [2, 4])
async def test_each_pass_starts_at_the_next_queue_and_uses_the_next_revive_queue(tmp_path, queues):
    """One turn per pass: with 2 or 4 queues every queue starts a pass in turn (two draws per pass made every
    turn even, so the odd queues never started one), and the CKs spread over every revive queue."""
    async with running_broker(tmp_path) as broker:
        await send(broker, "T", 8 * queues, queues=queues)
        firsts, revive_queues = [], set()
        for _ in range(8):
            [(msg, handle)] = await pop(broker, "G", "T", max_count=1)
            firsts.append(msg.queue_id)
            revive_queues.add(handle.revive_queue_id)
        assert firsts == [i % queues for i in range(8)]
        assert revive_queues == set(range(8))
