"""Revive when its writes fail: a store that refuses (disk full) or refuses one message for good, in an
in-process broker on a ManualClock. A failed write backs off and ends, a pass that stores nothing stops and the
next waits longer, one unwritable message is dead-lettered (or, when even that is impossible, logged and
counted) while the rest goes on, and the event loop is never held for more than 100 ms."""

from __future__ import annotations

import asyncio
import json

import pytest
from tests.unit.pop.pop_support import FaultyStore, pop, running_broker, send

from pocketmq.broker.pop import copies
from pocketmq.broker.pop.revive import REVIVE_BATCH_CKS
from pocketmq.common import properties as props
from pocketmq.common.dead_letter_reference import REFERENCE_PROPERTY, REFERENCE_TOPIC, STATE_REFUSED, fold
from pocketmq.common.message import Message
from pocketmq.common.topic import TopicConfig, dlq_topic, pop_retry_topic
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import PutStatus
from pocketmq.testing.loop_lag import MAX_LOOP_BLOCK_MS, measure_loop_lag
from pocketmq.testing.polling import eventually

INVISIBLE_MS = 10_000
pytestmark = pytest.mark.timeout(60)


def install(broker) -> FaultyStore:
    """Revive's copies and its revive queue appends go through a ``FaultyStore``."""
    faulty = FaultyStore(broker.store)
    faulty.refuse = lambda msgs: (
        PutStatus.SERVICE_NOT_AVAILABLE
        if faulty.full
        else PutStatus.MESSAGE_ILLEGAL
        if any(faulty.illegal(m) for m in msgs)
        else None
    )
    revive = broker.pop.revive
    revive.writes._store = faulty
    for queue in revive.queues:
        queue._store = faulty
    return faulty


def messages_of(broker, topic: str):
    got = broker.store.get_messages(topic, 0, 0, 1000)
    return got.messages() if got.messages else []


async def one_due_ck_on_a_full_disk(broker, clock) -> FaultyStore:
    """One CK of one message of topic T, due now, with revive's writes refused as a full disk refuses them."""
    await send(broker, "T", 1)
    await pop(broker, "G", "T", invisible_ms=INVISIBLE_MS)
    store = install(broker)
    store.full = True
    clock.advance(INVISIBLE_MS)
    return store


async def pop_one_by_one(broker, group: str, topic: str, count: int) -> None:
    """``count`` pops of one message each: one CK each, spread round robin over the 8 revive queues."""
    for _ in range(count):
        assert len(await pop(broker, group, topic, max_count=1, invisible_ms=INVISIBLE_MS)) == 1


async def more_than_a_batch_of_cks_everywhere(broker) -> int:
    """Pops that leave more than a batch of CKs in every revive queue; returns how many CKs."""
    cks = (REVIVE_BATCH_CKS + 2) * len(broker.pop.revive.queues)
    await send(broker, "T", cks)
    await pop_one_by_one(broker, "G", "T", cks)
    return cks


async def test_a_full_disk_makes_revive_back_off_not_spin_and_loses_nothing(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        revive = broker.pop.revive
        cks = await more_than_a_batch_of_cks_everywhere(broker)
        for queue in revive.queues:
            queue.catch_up()
        open_per_queue = [len(q.ledger) for q in revive.queues if len(q.ledger)]
        assert max(open_per_queue) > REVIVE_BATCH_CKS
        batches = sum(-(-n // REVIVE_BATCH_CKS) for n in open_per_queue)
        store = install(broker)
        store.full = True
        clock.advance(INVISIBLE_MS + 1)
        async with measure_loop_lag() as lag:
            assert await revive.run_once(clock.now_ms()) == 0
            # one round: one refused write per revive queue, then the pass stops (every write failed)
            assert store.refused_puts == len(open_per_queue) and revive.pacer.blocked
            for _ in range(5):  # the CKs not tried yet get one try each, then every CK waits its backoff
                await revive.run_once(clock.now_ms())
            assert store.refused_puts == batches
            clock.advance(9_999)
            assert await revive.run_once(clock.now_ms()) == 0 and store.refused_puts == batches
        assert lag.max_busy_ms < MAX_LOOP_BLOCK_MS, lag
        assert sum(len(q.ledger) for q in revive.queues) == cks  # every CK still open: nothing lost
        metrics = revive.metrics
        assert metrics["write_failures"] == cks and metrics["blocked_passes"] >= 2 and metrics["retried"] == 0

        store.full = False  # room again: after its backoff step every CK is revived, once
        clock.advance(1)
        assert await revive.run_once(clock.now_ms()) == cks
        retried = messages_of(broker, pop_retry_topic("G", "T"))
        assert sorted(m.body for m in retried) == sorted(b"m%d" % i for i in range(cks))
        assert not revive.pacer.blocked and sum(len(q.ledger) for q in revive.queues) == 0


async def test_a_write_that_keeps_failing_ends_as_a_dead_letter(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, pop_ck_rewrite_backoff_ms=(1_000, 2_000)) as broker:
        store = await one_due_ck_on_a_full_disk(broker, clock)
        revive = broker.pop.revive
        tries = []
        for _ in range(60):  # 100 ms steps of virtual time
            before = store.refused_puts
            await revive.run_once(clock.now_ms())
            if store.refused_puts > before:
                tries.append(clock.now_ms())
            if len(tries) == 2:
                # past the table: the next try writes the ending, but the retry topic alone is refused now
                store.full = False
                store.illegal = lambda msg: msg.topic.startswith("%RETRY%")
            clock.advance(100)
        assert [t - tries[0] for t in tries] == [0, 1_000]
        [dead] = messages_of(broker, dlq_topic("G"))
        assert dead.body == b"m0" and dead.properties[copies.DLQ_REASON] == copies.REASON_WRITE_FAILED
        assert dead.properties[props.DLQ_ORIGIN_TOPIC] == "T"
        assert revive.metrics["write_dead_letters"] == 1 and sum(len(q.ledger) for q in revive.queues) == 0


async def test_when_even_the_dead_letter_fails_the_ck_stays_parked_until_writes_work(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, pop_ck_rewrite_backoff_ms=(1_000, 2_000)) as broker:
        store = await one_due_ck_on_a_full_disk(broker, clock)
        revive = broker.pop.revive
        for _ in range(100):  # 10 s of virtual time: tries at 0, 1 s, 3 s (the ending), 5 s, 7 s, 9 s (parked)
            await revive.run_once(clock.now_ms())
            clock.advance(100)
        assert store.refused_puts == 6 and revive.metrics["parked"] == 4
        assert sum(len(q.ledger) for q in revive.queues) == 1  # open: nothing lost
        store.full = False
        clock.advance(2_000)
        assert await revive.run_once(clock.now_ms()) == 1
        [dead] = messages_of(broker, dlq_topic("G"))
        assert dead.body == b"m0" and dead.properties[copies.DLQ_REASON] == copies.REASON_WRITE_FAILED


async def test_a_retry_topic_name_too_long_dead_letters_that_group_and_the_others_go_on(tmp_path, caplog):
    clock = ManualClock()
    topic = "T-" + "t" * 10
    long_group = "g" * 115  # %RETRY%<group>_<topic> is 135 characters; %DLQ%<group> 120
    longer_group = "h" * 125  # and here %DLQ%<group> is 130: nothing can be written for it
    async with running_broker(tmp_path, clock) as broker:
        await broker.pop.references.stop()  # its pass is driven by hand below
        await send(broker, topic, 3)
        for group in (long_group, longer_group, "G"):
            assert len(await pop(broker, group, topic, invisible_ms=INVISIBLE_MS)) == 3
        clock.advance(INVISIBLE_MS)
        revive = broker.pop.revive
        async with measure_loop_lag() as lag:
            assert await revive.run_once(clock.now_ms()) == 3
        assert lag.max_busy_ms < MAX_LOOP_BLOCK_MS, lag
        assert sorted(m.body for m in messages_of(broker, pop_retry_topic("G", topic))) == [b"m0", b"m1", b"m2"]
        dead = messages_of(broker, dlq_topic(long_group))
        assert sorted(m.body for m in dead) == [b"m0", b"m1", b"m2"]
        assert {m.properties[copies.DLQ_REASON] for m in dead} == {copies.REASON_WRITE_REFUSED}
        metrics = revive.metrics
        assert metrics["retried"] == 3 and metrics["dead_lettered"] == 6 and metrics["unwritable"] == 0
        assert sum(len(q.ledger) for q in revive.queues) == 0
        unwritable = [
            r.getMessage()
            for r in caplog.records
            if "event=revive_copy_refused" in r.getMessage() and f"group={longer_group}" in r.getMessage()
        ]
        assert len(unwritable) == 3 * 2  # retry copy, dead letter: each refused, with the message id
        assert all("msg_id=" in line for line in unwritable)
        # the reference (its own topic) names them; its dead letter can never be written: it closes as refused
        assert {ref.group for ref in broker.pop.references.open_references()} == {longer_group}
        assert await broker.pop.references.run_once() == 3 and broker.pop.references.open_references() == []
        states = fold(messages_of(broker, REFERENCE_TOPIC))
        assert {s.state for s in states.values()} == {STATE_REFUSED} and len(states) == 3


async def test_properties_too_large_for_a_retry_copy_end_as_a_reference_and_the_batch_goes_on(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        broker.topics.create_or_update(TopicConfig("T", 1, 1))
        big = {"big": "x" * 32_700}  # fits; with the retry properties added it does not
        await broker.messages.send([Message.create("T", "ok0")], topic="T")
        await broker.messages.send([Message.create("T", "huge", properties=big)], topic="T")
        await broker.messages.send([Message.create("T", "ok2")], topic="T")
        assert len(await pop(broker, "G", "T", invisible_ms=INVISIBLE_MS)) == 3  # one CK holds all three
        clock.advance(INVISIBLE_MS)
        revive = broker.pop.revive
        assert await revive.run_once(clock.now_ms()) == 1
        assert sorted(m.body for m in messages_of(broker, pop_retry_topic("G", "T"))) == [b"ok0", b"ok2"]
        assert messages_of(broker, dlq_topic("G")) == []
        [reference] = messages_of(broker, REFERENCE_TOPIC)
        assert reference.properties[REFERENCE_PROPERTY] == "true"
        assert reference.properties[copies.DLQ_REASON] == copies.REASON_WRITE_REFUSED
        body = json.loads(reference.body)
        assert (body["topic"], body["queueOffset"], body["reason"]) == ("T", 1, copies.REASON_WRITE_REFUSED)
        assert "properties are" in body["description"]


async def test_a_message_the_store_refuses_is_found_in_its_batch_and_dead_lettered(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 3)
        await pop(broker, "G", "T", invisible_ms=INVISIBLE_MS)
        store = install(broker)
        store.illegal = lambda msg: msg.body == b"m1" and msg.topic.startswith("%RETRY%")
        clock.advance(INVISIBLE_MS)
        revive = broker.pop.revive
        assert await revive.run_once(clock.now_ms()) == 1
        assert sorted(m.body for m in messages_of(broker, pop_retry_topic("G", "T"))) == [b"m0", b"m2"]
        [dead] = messages_of(broker, dlq_topic("G"))
        assert dead.body == b"m1" and dead.properties[copies.DLQ_REASON] == copies.REASON_WRITE_REFUSED
        assert revive.metrics["write_dead_letters"] == 1 and not revive.pacer.blocked


async def test_a_retry_topic_that_cannot_be_saved_backs_off_and_loses_nothing(tmp_path, monkeypatch):
    """On a full disk the first revive of a group also fails to save its new retry topic (topics.json): that
    is a passing failure like a refused write, not an error that aborts the pass."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 1)
        await pop(broker, "G", "T", invisible_ms=INVISIBLE_MS)

        def disk_full(path, document):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr("pocketmq.broker.topics.atomic_write_bytes", disk_full)
        monkeypatch.setattr("pocketmq.broker.topic_journal.append_durably", disk_full)  # the table's journal
        clock.advance(INVISIBLE_MS)
        revive = broker.pop.revive
        assert await revive.run_once(clock.now_ms()) == 0
        assert sum(len(q.ledger) for q in revive.queues) == 1 and revive.metrics["write_failures"] == 1
        monkeypatch.undo()
        clock.advance(10_000)  # the first backoff step
        assert await revive.run_once(clock.now_ms()) == 1
        assert [m.body for m in messages_of(broker, pop_retry_topic("G", "T"))] == [b"m0"]


async def test_an_operator_s_setting_change_ends_a_blocked_revive_s_long_wait(tmp_path):
    # the passes are an hour apart here: only the change can bring the next one
    clock = ManualClock()
    async with running_broker(tmp_path, clock, pop_ck_rewrite_backoff_ms=(1_000, 2_000)) as broker:
        store = await one_due_ck_on_a_full_disk(broker, clock)
        revive = broker.pop.revive
        await revive.run_once(clock.now_ms())
        assert store.refused_puts == 1 and revive.pacer.blocked
        store.full = False
        clock.advance(1_000)  # the CK's backoff step is over; the next pass is not due for an hour
        assert messages_of(broker, pop_retry_topic("G", "T")) == []
        broker.update_config({"enable_remote_escape": "true"})
        assert not revive.pacer.blocked and revive.pacer.wait_ms == revive.pacer.interval_ms
        [retried] = await eventually(
            lambda: messages_of(broker, pop_retry_topic("G", "T")), 5, "the retry copy written at once"
        )
        assert retried.body == b"m0" and sum(len(q.ledger) for q in revive.queues) == 0


async def test_a_stop_ends_the_pass_after_the_revive_queue_it_is_writing(tmp_path):
    """A slave acting as master stops revive when its master comes back, and the master's handover waits for
    that: a long pass (many batches of slow escaped writes) must not hold it to the end."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        revive = broker.pop.revive
        cks = await more_than_a_batch_of_cks_everywhere(broker)
        store = install(broker)
        stalled, release = asyncio.Event(), asyncio.Event()
        store.refuse = lambda msgs: None
        put = store.put_messages

        async def stalling_put(msgs):
            stalled.set()
            await release.wait()
            return await put(msgs)

        store.put_messages = stalling_put
        clock.advance(INVISIBLE_MS + 1)
        passing = asyncio.ensure_future(revive.run_once(clock.now_ms()))
        await stalled.wait()  # the pass is writing the first revive queue's batch
        stopping = asyncio.ensure_future(revive.stop())
        await asyncio.sleep(0)
        release.set()
        closed = await passing
        await stopping
        assert 0 < closed <= REVIVE_BATCH_CKS  # that queue's batch, not the whole pass
        assert sum(len(q.ledger) for q in revive.queues) == cks - closed  # the rest stay open: nothing lost
