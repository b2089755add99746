"""The acks of one loop turn: checked together, one ACK record per CK in one append per revive queue, and each
request answered with its own outcome (its invalid handles, or the write failure that held one of its records)."""

from __future__ import annotations

import asyncio
import json

import pytest
from tests.unit.pop.pop_support import FaultyStore, pop, running_broker, send

from pocketmq.common import properties as props
from pocketmq.common.errors import InvalidReceiptHandleError, StoreError
from pocketmq.common.topic import BATCH_ACK_TAG
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import PutStatus

INVISIBLE_MS = 10_000
pytestmark = pytest.mark.timeout(60)


def records_after(broker, queue, start: int) -> list:
    """The revive records of ``queue`` from revive offset ``start`` on."""
    got = broker.store.get_messages(queue.topic, queue.queue_id, start, 1000)
    return got.messages() if got.messages else []


def revive_queue_of(broker, handle):
    return broker.pop.revive.queues[handle.revive_queue_id]


async def redelivered(broker, clock) -> list[str]:
    clock.advance(INVISIBLE_MS + 1)
    await broker.pop.revive.run_once(clock.now_ms())
    return sorted(m.body.decode() for m, _ in await pop(broker, "G", "T", 32, INVISIBLE_MS))


async def test_the_acks_of_one_turn_are_one_record_and_nothing_acked_comes_back(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 8)
        got = await pop(broker, "G", "T", 32, INVISIBLE_MS)
        queue = revive_queue_of(broker, got[0][1])
        start = broker.store.max_queue_offset(queue.topic, queue.queue_id)
        acked = got[:6]
        outcomes = await asyncio.gather(*(broker.pop.ack("G", [h]) for _, h in acked))
        assert outcomes == [[None]] * 6
        [record] = records_after(broker, queue, start)  # six requests, one append of one record
        assert record.properties[props.TAGS] == BATCH_ACK_TAG
        assert json.loads(record.body)["aol"] == [h.queue_offset for _, h in acked]  # in the order they came
        assert await redelivered(broker, clock) == ["m6", "m7"]


async def test_an_invalid_handle_fails_only_its_own_request_and_keeps_its_place(tmp_path):
    async with running_broker(tmp_path) as broker:
        await send(broker, "T", 4)
        (_, h0), (_, h1), (_, h2), (_, h3) = await pop(broker, "G", "T", 32, INVISIBLE_MS)
        assert await broker.pop.ack("G", [h0]) == [None]
        first, second, third = await asyncio.gather(
            broker.pop.ack("G", [h1]),
            broker.pop.ack("G", [h2, h0, h3]),  # h0 was acked in an earlier turn: stale
            broker.pop.ack("G", [h0]),
        )
        assert first == [None]
        assert second[0] is None and isinstance(second[1], InvalidReceiptHandleError) and second[2] is None
        assert len(third) == 1 and isinstance(third[0], InvalidReceiptHandleError)
        queue = revive_queue_of(broker, h0)
        queue.catch_up()
        assert len(queue.ledger) == 0  # every message of the CK acked: it is closed


async def test_a_failed_append_fails_the_requests_it_held_and_their_messages_come_back(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 4)
        first_pop = await pop(broker, "G", "T", 2, INVISIBLE_MS)
        second_pop = await pop(broker, "G", "T", 2, INVISIBLE_MS)  # the next pass writes to the next revive queue
        refused_queue = first_pop[0][1].revive_queue_id
        assert second_pop[0][1].revive_queue_id != refused_queue
        faulty = FaultyStore(broker.store)
        faulty.refuse = lambda msgs: (
            PutStatus.SERVICE_NOT_AVAILABLE if any(m.queue_id == refused_queue for m in msgs) else None
        )
        for queue in broker.pop.revive.queues:
            queue._store = faulty
        outcomes = await asyncio.gather(
            broker.pop.ack("G", [first_pop[0][1]]),
            broker.pop.ack("G", [second_pop[0][1], second_pop[1][1]]),
            broker.pop.ack("G", [first_pop[1][1], second_pop[1][1]]),  # one record in each revive queue
            return_exceptions=True,
        )
        assert isinstance(outcomes[0], StoreError) and isinstance(outcomes[2], StoreError)
        assert outcomes[1] == [None, None]
        assert faulty.refused_puts == 1  # one append for the turn's acks of that revive queue
        for queue in broker.pop.revive.queues:
            queue._store = broker.store
        # the refused acks left their messages in flight: they come back; the acked ones do not
        assert await redelivered(broker, clock) == sorted(m.body.decode() for m, _ in first_pop)
