"""Send-back (CONSUMER_SEND_MSG_BACK) and the retry/DLQ rules in an in-process broker, in virtual time."""

import pytest

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.queue_locks import QueueLockTable
from pocketmq.broker.send_back import SendBackRequest, decide_retry, retry_send_destination
from pocketmq.common.message import Message, MessageQueue
from pocketmq.runtime.clock import ManualClock

LEVELS = "1s 2s 3s 4s 5s 6s 7s"


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
async def broker(tmp_path, clock):
    b = Broker(BrokerConfig(data_dir=tmp_path, remoting_port=0, message_delay_level=LEVELS), clock=clock)
    await b.start(remoting_port=10911)
    yield b
    await b.shutdown()


def read_all(broker, topic):
    got = broker.store.get_messages(topic, 0, 0, 1000, max_bytes=1 << 24, tag_filter=None)
    return got.messages()


async def deliver_until(broker, clock, topic, count, step_ms=100, max_ms=60_000):
    """Advance virtual time until ``topic`` holds ``count`` messages; returns the time waited."""
    waited = 0
    while len(read_all(broker, topic)) < count:
        assert waited <= max_ms, f"{topic} never reached {count} messages"
        clock.advance(step_ms)
        waited += step_ms
        broker.timer.load_new()
        await broker.timer.fire_due(clock.now_ms())
    return waited


def test_decisions():
    assert decide_retry(0, 0, 16).delay_level == 3
    assert decide_retry(5, 0, 16).delay_level == 8
    assert decide_retry(2, 7, 16).delay_level == 7
    assert decide_retry(16, 0, 16).to_dlq and decide_retry(0, -1, 16).to_dlq
    assert retry_send_destination("%RETRY%g", 16, {}, 16) == "%RETRY%g"
    assert retry_send_destination("%RETRY%g", 17, {}, 16) == "%DLQ%g"
    assert retry_send_destination("%RETRY%g", 3, {"MAX_RECONSUME_TIMES": "2"}, 16) == "%DLQ%g"


async def test_three_failures_retry_at_levels_3_4_5_then_success(broker, clock):
    [sent] = await broker.messages.send(
        [Message.create("orders", "pay", properties={"UNIQ_KEY": "U1"})], topic="orders", queue_id=0
    )
    current = broker.store.read_message(sent.phys_offset)
    seen = [(current.topic, current.reconsume_times)]
    for attempt in range(3):
        copy = await broker.send_back.send_back(SendBackRequest("g", current.phys_offset, 0, current.msg_id, "orders"))
        assert copy.properties["DELAY"] == str(3 + attempt)
        waited = await deliver_until(broker, clock, "%RETRY%g", attempt + 1)
        assert (3 + attempt) * 1000 <= waited <= (3 + attempt) * 1000 + 100  # level 3 + n with "1s 2s 3s ..."
        current = read_all(broker, "%RETRY%g")[attempt]
        seen.append((current.topic, current.reconsume_times))
        assert current.msg_id == "U1"  # UNIQ_KEY kept: the consumer sees the same id
        assert current.properties["RETRY_TOPIC"] == "orders"
        assert current.properties["ORIGIN_MESSAGE_ID"] == "U1"
        assert "DELAY" not in current.properties
    assert seen == [("orders", 0), ("%RETRY%g", 1), ("%RETRY%g", 2), ("%RETRY%g", 3)]


async def test_always_failing_goes_to_the_dlq_after_exactly_max(broker, clock):
    broker.groups.create_or_update(SubscriptionGroupConfig("g", retry_max_times=3))
    await broker.messages.send([Message.create("orders", "bad", properties={"DELAY": "1"})], topic="orders", queue_id=0)
    await deliver_until(broker, clock, "orders", 1)
    current = read_all(broker, "orders")[0]
    for n in range(3):
        await broker.send_back.send_back(SendBackRequest("g", current.phys_offset))
        await deliver_until(broker, clock, "%RETRY%g", n + 1)
        current = read_all(broker, "%RETRY%g")[n]
    assert read_all(broker, "%DLQ%g") == []
    await broker.send_back.send_back(SendBackRequest("g", current.phys_offset))
    [dead] = read_all(broker, "%DLQ%g")  # at once: no leftover DELAY (#2724)
    assert dead.reconsume_times == 4 and "DELAY" not in dead.properties
    assert dead.body == b"bad" and dead.properties["RETRY_TOPIC"] == "orders"
    assert broker.topics.get("%DLQ%g").read_queue_nums == 1 and broker.topics.get("%DLQ%g").readable


async def test_level_minus_one_and_client_fallback(broker, clock):
    [sent] = await broker.messages.send([Message.create("orders", "x")], topic="orders", queue_id=0)
    await broker.send_back.send_back(SendBackRequest("g", sent.phys_offset, delay_level=-1))
    assert len(read_all(broker, "%DLQ%g")) == 1
    from pocketmq.common.message import MessageExt

    fallback = MessageExt(
        topic="%RETRY%g",
        body=b"y",
        reconsume_times=17,
        properties={"RETRY_TOPIC": "orders", "DELAY": "3", "MAX_RECONSUME_TIMES": "16"},
    )
    await broker.messages.send([fallback], topic="%RETRY%g")
    assert [m.body for m in read_all(broker, "%DLQ%g")] == [b"x", b"y"]
    early = MessageExt(topic="%RETRY%g", body=b"z", reconsume_times=1, properties={"DELAY": "1"})
    await broker.messages.send([early], topic="%RETRY%g")
    await deliver_until(broker, clock, "%RETRY%g", 1)


def test_queue_locks_expire_and_belong_to_one_client():
    locks = QueueLockTable(max_live_ms=1000)
    q0, q1 = MessageQueue("t", "b", 0), MessageQueue("t", "b", 1)
    assert locks.try_lock("g", "c1", [q0, q1], 0) == [q0, q1]
    assert locks.try_lock("g", "c2", [q0, q1], 500) == []
    assert locks.try_lock("g2", "c2", [q0], 500) == [q0]  # another group
    locks.unlock("g", "c2", [q0])  # not c2's: ignored
    assert locks.holder("g", q0, 600) == "c1"
    locks.unlock("g", "c1", [q0])
    assert locks.try_lock("g", "c2", [q0, q1], 900) == [q0]
    assert locks.try_lock("g", "c2", [q1], 1001) == [q1]  # c1's lock on q1 expired
    assert locks.expire(5000) == 3


async def test_a_retry_topic_name_too_long_sends_the_message_to_the_dlq_with_the_reason(broker, clock):
    from pocketmq.broker.pop.copies import DLQ_REASON, REASON_WRITE_REFUSED

    group = "g" * 121  # %RETRY%<group> is 128 characters, %DLQ%<group> 126
    [sent] = await broker.messages.send([Message.create("orders", "x")], topic="orders", queue_id=0)
    copy = await broker.send_back.send_back(SendBackRequest(group, sent.phys_offset))
    [dead] = read_all(broker, f"%DLQ%{group}")
    assert copy.topic == dead.topic and dead.body == b"x" and dead.properties[DLQ_REASON] == REASON_WRITE_REFUSED
    assert broker.send_back.dead_lettered_total == 1 and broker.send_back.retried_total == 0


async def test_when_not_even_the_dead_letter_can_be_written_the_request_fails_clearly(broker, clock, caplog):
    from pocketmq.common.errors import IllegalMessageError

    group = "g" * 125  # %DLQ%<group> is 130 characters too
    [sent] = await broker.messages.send(
        [Message.create("orders", "x", properties={"UNIQ_KEY": "U9"})], topic="orders", queue_id=0
    )
    end = broker.store.max_phys_offset
    with pytest.raises(IllegalMessageError, match="can ever be written"):
        await broker.send_back.send_back(SendBackRequest(group, sent.phys_offset))
    assert broker.send_back.refused_total == 1 and broker.store.max_phys_offset == end
    assert any("event=send_back_refused" in r.getMessage() and "msg_id=U9" in r.getMessage() for r in caplog.records)
