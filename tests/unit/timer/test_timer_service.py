"""The timer service in a real in-process broker, in virtual time (ManualClock): delivery at the due time,
properties, error codes, and a restart that neither loses nor duplicates."""

import pytest
from tests.unit.virtual_time import advance_until

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.timer.service import TIMER_OUT_MS, TIMER_QUEUE_ID
from pocketmq.broker.timer.snapshot import SNAPSHOT_FILE
from pocketmq.common.errors import IllegalMessageError
from pocketmq.common.message import Message, MessageExt
from pocketmq.common.topic import TIMER_TOPIC, MessageType, TopicConfig
from pocketmq.protocol.error_codes import v2_code_of
from pocketmq.runtime.clock import ManualClock


def make_broker(tmp_path, clock):
    return Broker(BrokerConfig(data_dir=tmp_path, remoting_port=0, message_delay_level="1s 2s 3s 4s 5s"), clock=clock)


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
async def broker(tmp_path, clock):
    b = make_broker(tmp_path, clock)
    await b.start(remoting_port=10911)
    yield b
    await b.shutdown()


def visible(broker, topic="t", queue_id=0):
    got = broker.store.get_messages(topic, queue_id, 0, 1000, max_bytes=1 << 24, tag_filter=None)
    return got.messages()


async def tick(broker, clock, advance_ms):
    clock.advance(advance_ms)
    broker.timer.load_new()
    await broker.timer.fire_due(clock.now_ms())


async def test_delay_level_message_is_invisible_until_due(broker, clock):
    msg = Message.create("t", "hello", tags="a", properties={"DELAY": "2", "k": "v"})
    result = (await broker.messages.send([msg], topic="t", queue_id=0))[0]
    assert (result.topic, result.queue_id) == ("t", 0)
    await tick(broker, clock, 1999)
    assert visible(broker) == []
    await tick(broker, clock, 1)
    [delivered] = visible(broker)
    assert delivered.body == b"hello" and delivered.tags == "a" and delivered.properties["k"] == "v"
    for gone in ("DELAY", "REAL_TOPIC", "REAL_QID", "TIMER_OUT_MS"):
        assert gone not in delivered.properties
    assert broker.timer.pending == 0


async def test_exact_delivery_time_and_delay_properties(broker, clock):
    now = clock.now_ms()
    await broker.messages.send(
        [
            Message.create("t", "a", properties={"TIMER_DELIVER_MS": str(now + 1500)}),
            Message.create("t", "b", properties={"TIMER_DELAY_MS": "700"}),
            Message.create("t", "c", properties={"TIMER_DELAY_SEC": "3"}),
        ],
        topic="t",
        queue_id=0,
    )
    await tick(broker, clock, 700)
    assert [m.body for m in visible(broker)] == [b"b"]
    await tick(broker, clock, 800)
    assert [m.body for m in visible(broker)] == [b"b", b"a"]
    await tick(broker, clock, 1500)
    assert [m.body for m in visible(broker)] == [b"b", b"a", b"c"]


async def test_refusals(broker, clock):
    broker.topics.create_or_update(TopicConfig("plain", 1, 1, message_type=MessageType.NORMAL))
    with pytest.raises(IllegalMessageError):
        await broker.messages.send([Message.create("plain", "x", properties={"DELAY": "1"})], topic="plain")
    far = clock.now_ms() + 4 * 86_400_000
    with pytest.raises(IllegalMessageError) as err:
        await broker.messages.send([Message.create("t", "x", properties={"TIMER_DELIVER_MS": str(far)})], topic="t")
    assert v2_code_of(err.value) == 40012


async def test_restart_in_the_middle_loses_and_duplicates_none(tmp_path, clock):
    first = make_broker(tmp_path, clock)
    await first.start(remoting_port=10911)
    for i in range(50):
        level = 1 + i % 5
        await first.messages.send(
            [Message.create("t", f"m{i}", properties={"DELAY": str(level)})], topic="t", queue_id=0
        )
    await tick(first, clock, 2500)  # levels 1 and 2 delivered
    assert len(visible(first)) == 20
    await first.shutdown()
    second = make_broker(tmp_path, clock)
    await second.start(remoting_port=10911)
    try:
        assert second.timer.pending == 30
        await tick(second, clock, 5000)
        bodies = sorted(m.body.decode() for m in visible(second))
        assert bodies == sorted(f"m{i}" for i in range(50))
    finally:
        await second.shutdown()


async def test_a_rebuild_skips_an_unreadable_timer_record_and_loads_the_rest(tmp_path, clock, caplog):
    first = make_broker(tmp_path, clock)
    await first.start(remoting_port=10911)
    await first.messages.send([Message.create("t", "before", properties={"DELAY": "1"})], topic="t", queue_id=0)
    broken = MessageExt(topic=TIMER_TOPIC, queue_id=TIMER_QUEUE_ID, body=b"?", properties={TIMER_OUT_MS: "soon"})
    await first.store.put_message(broken)  # as no send makes it: a delivery time that is not a number
    await first.messages.send([Message.create("t", "after", properties={"DELAY": "2"})], topic="t", queue_id=0)
    await first.shutdown()
    (first.config.metadata_dir() / SNAPSHOT_FILE).unlink()  # the records are read back, as after a crash
    caplog.clear()
    second = make_broker(tmp_path, clock)
    with caplog.at_level("ERROR", logger="pocketmq.broker.timer.service"):
        await second.start(remoting_port=10911)
    try:
        assert second.timer.pending == 2
        assert "event=timer_record_unreadable queue_offset=1" in caplog.text
        await tick(second, clock, 2000)
        assert sorted(m.body for m in visible(second)) == [b"after", b"before"]
    finally:
        await second.shutdown()


async def test_progress_file_bounds_the_rebuild(tmp_path, clock):
    first = make_broker(tmp_path, clock)
    await first.start(remoting_port=10911)
    for i in range(10):
        await first.messages.send([Message.create("t", f"m{i}", properties={"DELAY": "1"})], topic="t", queue_id=0)
    await tick(first, clock, 1000)
    await first.shutdown()
    assert first.timer.progress_offset() == 20  # 10 timer records + 10 tombstones, none pending
    second = make_broker(tmp_path, clock)
    await second.start(remoting_port=10911)
    try:
        assert second.timer.pending == 0 and len(visible(second)) == 10
    finally:
        await second.shutdown()


async def test_the_delivery_task_wakes_for_a_new_timer_and_delivers_it_when_due(broker, clock):
    sent_ms = clock.now_ms()
    await broker.messages.send([Message.create("t", "later", properties={"DELAY": "1"})], topic="t", queue_id=0)
    await advance_until(clock, lambda: broker.timer.pending == 1, step_ms=0)  # the arrival woke the task
    await advance_until(clock, lambda: visible(broker) != [], step_ms=100)  # virtual time, 100 ms a poll
    assert 1_000 <= clock.now_ms() - sent_ms < 1_100 and broker.timer.pending == 0
