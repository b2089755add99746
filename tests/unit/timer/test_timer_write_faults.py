"""The timer when its deliveries fail, in an in-process broker on a ManualClock: one message that can never be
delivered becomes a dead letter and the rest of its batch goes on; a full disk makes the timer back off (a
round whose deliveries all failed stops), loses nothing, and ends a delivery that keeps failing as a dead
letter; the event loop is never held for more than 100 ms."""

from __future__ import annotations

import pytest
from tests.unit.pop.pop_support import FaultyStore, running_broker

from pocketmq.broker.pop.copies import DLQ_REASON, REASON_WRITE_FAILED, REASON_WRITE_REFUSED
from pocketmq.broker.timer.dead_letter import TIMER_DLQ_GROUP, dead_letter
from pocketmq.common import properties as props
from pocketmq.common.message import Message, MessageExt
from pocketmq.common.topic import TopicConfig, dlq_topic
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import PutStatus
from pocketmq.testing.loop_lag import MAX_LOOP_BLOCK_MS, measure_loop_lag

pytestmark = pytest.mark.timeout(60)


def test_dead_letter_of_a_consumer_retry_goes_to_its_group_others_to_the_timer_dlq():
    retry = MessageExt(topic="%RETRY%G", body=b"x", properties={props.UNIQ_KEY: "ID1", props.DELAY_TIME_LEVEL: "3"})
    dead = dead_letter(retry, REASON_WRITE_FAILED)
    assert dead.topic == "%DLQ%G" and dead.properties[DLQ_REASON] == REASON_WRITE_FAILED
    assert dead.properties[props.DLQ_ORIGIN_TOPIC] == "%RETRY%G" and props.DELAY_TIME_LEVEL not in dead.properties
    assert dead_letter(MessageExt(topic="T", body=b"x"), REASON_WRITE_REFUSED).topic == dlq_topic(TIMER_DLQ_GROUP)
    assert dead_letter(dead, REASON_WRITE_REFUSED) is None  # a dead letter has no further fallback


def visible(broker, topic: str):
    got = broker.store.get_messages(topic, 0, 0, 2000)
    return got.messages() if got.messages else []


async def send_delayed(broker, bodies, properties=None) -> None:
    if broker.topics.get("T") is None:
        broker.topics.create_or_update(TopicConfig("T", 1, 1))
    for body in bodies:
        await broker.messages.send(
            [Message.create("T", body, properties={props.DELAY_TIME_LEVEL: "1", **(properties or {})})],
            topic="T",
            queue_id=0,
        )


async def faulty_timer(broker) -> FaultyStore:
    """The timer's deliveries go through a ``FaultyStore``; the broker's own timer loop is stopped, so only the
    test's ``fire_due`` calls (in virtual time) deliver."""
    await broker.timer.stop_delivery()
    store = FaultyStore(broker.store)
    broker.timer.writes._store = store
    return store


async def test_an_undeliverable_message_becomes_a_dead_letter_and_its_batch_goes_on(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, message_delay_level="1s") as broker:
        await send_delayed(broker, [b"a", b"poison", b"c"])
        store = await faulty_timer(broker)
        store.refuse = lambda msgs: (
            PutStatus.MESSAGE_ILLEGAL if any(m.body == b"poison" and m.topic == "T" for m in msgs) else None
        )
        clock.advance(1_000)
        broker.timer.load_new()
        assert await broker.timer.fire_due(clock.now_ms()) == 3
        assert [m.body for m in visible(broker, "T")] == [b"a", b"c"]
        [dead] = visible(broker, dlq_topic(TIMER_DLQ_GROUP))
        assert dead.body == b"poison" and dead.properties[DLQ_REASON] == REASON_WRITE_REFUSED
        assert broker.timer.pending == 0 and not broker.timer.pacer.blocked


async def test_when_not_even_the_dead_letter_can_be_written_only_the_tombstone_is_and_the_rest_goes_on(
    tmp_path, caplog
):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, message_delay_level="1s") as broker:
        await send_delayed(broker, [b"a", b"poison", b"c"])
        store = await faulty_timer(broker)
        store.refuse = lambda msgs: PutStatus.MESSAGE_ILLEGAL if any(m.body == b"poison" for m in msgs) else None
        clock.advance(1_000)
        broker.timer.load_new()
        assert await broker.timer.fire_due(clock.now_ms()) == 3
        assert [m.body for m in visible(broker, "T")] == [b"a", b"c"]
        assert visible(broker, dlq_topic(TIMER_DLQ_GROUP)) == [] and broker.timer.pending == 0
        refused = [r.getMessage() for r in caplog.records if "event=timer_delivery_refused" in r.getMessage()]
        assert len(refused) == 2 and "next=tombstone_only" in refused[1] and "msg_id=" in refused[1]
        assert (
            broker.metrics.value("pocketmq_background_write_endings_total", service="timer", ending="unwritable") == 1
        )
        broker.timer.load_new()  # its tombstone was written: a restart would not deliver it
        assert broker.timer.outstanding == 0


async def test_a_full_disk_makes_the_timer_back_off_and_end_with_a_dead_letter_losing_nothing(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, message_delay_level="1s") as broker:
        timer = broker.timer
        timer._deliver_batch = 8  # several batches without thousands of messages
        timer.write_backoff.backoff_ms = (1_000, 2_000)
        bodies = [b"m%d" % i for i in range(20)]
        await send_delayed(broker, bodies)
        store = await faulty_timer(broker)
        store.full = True
        store.refuse = lambda msgs: PutStatus.SERVICE_NOT_AVAILABLE if store.full else None
        clock.advance(1_000)
        timer.load_new()
        async with measure_loop_lag() as lag:
            assert await timer.fire_due(clock.now_ms()) == 0
            assert store.refused_puts == 1 and timer.pacer.blocked  # one batch, then the round stops
            for _ in range(5):  # the timers not tried yet get one try each, then every one waits
                await timer.fire_due(clock.now_ms())
            assert store.refused_puts == 3 and timer.pending == 20
            clock.advance(999)
            await timer.fire_due(clock.now_ms())
            assert store.refused_puts == 3
        assert lag.max_busy_ms < MAX_LOOP_BLOCK_MS, lag
        assert timer.progress_offset() == 0  # a restart now would find every timer pending again
        clock.advance(1)
        for _ in range(3):
            await timer.fire_due(clock.now_ms())  # the second failure of each (3 batches)
        assert store.refused_puts == 6
        store.full = False  # room again, but the table is used up: each delivery ends as a dead letter
        clock.advance(2_000)
        assert await timer.fire_due(clock.now_ms()) == 20
        dead = visible(broker, dlq_topic(TIMER_DLQ_GROUP))
        assert sorted(m.body for m in dead) == sorted(bodies)
        assert {m.properties[DLQ_REASON] for m in dead} == {REASON_WRITE_FAILED} and visible(broker, "T") == []
        assert timer.pending == 0 and not timer.pacer.blocked


async def test_a_delivery_that_failed_once_is_delivered_after_its_backoff(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, message_delay_level="1s") as broker:
        await send_delayed(broker, [b"late"])
        store = await faulty_timer(broker)
        store.refuse = lambda msgs: PutStatus.SERVICE_NOT_AVAILABLE if store.full else None
        store.full = True
        clock.advance(1_000)
        broker.timer.load_new()
        assert await broker.timer.fire_due(clock.now_ms()) == 0
        store.full = False
        clock.advance(10_000)  # the first step of the default table
        assert await broker.timer.fire_due(clock.now_ms()) == 1
        assert [m.body for m in visible(broker, "T")] == [b"late"]
        # its tombstone carries the original due time, so a restart does not deliver it again
        broker.timer.load_new()
        assert broker.timer.pending == 0 and broker.timer.progress_offset() == 2


async def test_a_progress_file_that_cannot_be_saved_never_stops_delivery(tmp_path, monkeypatch, caplog):
    """A full disk refusing ``timer_progress.json`` once stopped the timer loop for good (SEND_OK delays lost)."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock, message_delay_level="1s") as broker:
        await send_delayed(broker, [b"a"])

        def disk_full(path, document):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr("pocketmq.broker.timer.service.atomic_write_json", disk_full)
        clock.advance(5_000)
        broker.timer._maybe_persist()  # what the loop calls after each round: logs, does not raise
        assert "timer_progress_save_failed" in caplog.text
        broker.timer.load_new()
        assert await broker.timer.fire_due(clock.now_ms()) == 1
        assert [m.body for m in visible(broker, "T")] == [b"a"]
