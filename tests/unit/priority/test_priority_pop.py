"""Priority topics in process, in virtual time: the send picks the queue of a message's level, a pop reads the
highest level first (fresh and retried), a retry keeps its level, and bad priorities are refused."""

from __future__ import annotations

import pytest
from tests.unit.pop.pop_support import pop, running_broker

from pocketmq.broker.messages import infer_message_type
from pocketmq.broker.pop.receive import visit_order
from pocketmq.common import properties as props
from pocketmq.common.errors import BadRequestError
from pocketmq.common.message import Message
from pocketmq.common.topic import MessageType, TopicConfig, pop_retry_topic, priority_queue_id
from pocketmq.runtime.clock import ManualClock

pytestmark = pytest.mark.timeout(30)


def priority_topic(broker, topic: str = "P", queues: int = 4) -> None:
    broker.topics.create_or_update(TopicConfig(topic, queues, queues, message_type=MessageType.PRIORITY))


async def send_levels(broker, levels: list[int], topic: str = "P") -> None:
    for i, level in enumerate(levels):
        await broker.messages.send([Message.create(topic, f"m{i}-p{level}", priority=level)], topic=topic)


def bodies(got) -> list[str]:
    return [m.body.decode() for m, _ in got]


def test_a_level_maps_to_its_queue_and_the_highest_queue_takes_the_levels_above():
    assert [priority_queue_id(p, 4) for p in (0, 1, 3, 4, 99)] == [0, 1, 3, 3, 3]


def test_message_priority_reads_only_non_negative_integers():
    assert Message.create("T", "b", priority=7).priority == 7
    assert Message("T", b"b", {props.PRIORITY: "-1"}).priority is None
    assert Message("T", b"b", {props.PRIORITY: "x"}).priority is None
    with pytest.raises(ValueError):
        Message.create("T", "b", priority=-1)
    assert infer_message_type(Message.create("T", "b", priority=0)) is MessageType.PRIORITY
    assert infer_message_type(Message.create("T", "b", priority=1, message_group="g")) is MessageType.FIFO


def test_priority_visit_order_reads_the_highest_level_first_with_its_retries():
    assert visit_order("T", [0, 1, 2], "R", [0, 1, 2], 1, by_priority=True) == [
        ("T", 2), ("R", 2), ("T", 1), ("R", 1), ("T", 0), ("R", 0)
    ]  # fmt: skip
    assert visit_order("T", [0, 1, 2], "R", [0], 5, by_priority=True) == [("T", 2), ("T", 1), ("R", 0), ("T", 0)]
    assert visit_order("T", [1, 2], "R", [], 3, by_priority=True) == [("T", 2), ("T", 1)]  # a gray share


async def test_the_send_puts_each_level_in_its_queue_whatever_the_client_chose(tmp_path):
    async with running_broker(tmp_path) as broker:
        priority_topic(broker)
        results = await broker.messages.send([Message.create("P", "a", priority=2)], topic="P", queue_id=0)
        assert results[0].queue_id == 2
        results = await broker.messages.send([Message.create("P", "b", priority=9)], topic="P")
        assert results[0].queue_id == 3


@pytest.mark.parametrize(
    "properties",
    [{props.PRIORITY: "-2"}, {props.PRIORITY: "high"}, {props.PRIORITY: "1", props.SHARDING_KEY: "g"}],
)
async def test_a_bad_priority_is_refused(tmp_path, properties):
    async with running_broker(tmp_path) as broker:
        priority_topic(broker)
        with pytest.raises(BadRequestError):
            await broker.messages.send([Message("P", b"x", dict(properties))], topic="P")


async def test_a_pop_takes_the_highest_level_first_then_by_offset(tmp_path):
    async with running_broker(tmp_path) as broker:
        priority_topic(broker)
        await send_levels(broker, [0, 1, 0, 3, 1, 3])
        got = await pop(broker, "G", "P", max_count=32)
        assert bodies(got) == ["m3-p3", "m5-p3", "m1-p1", "m4-p1", "m0-p0", "m2-p0"]


async def test_a_higher_level_arriving_while_lower_ones_wait_is_delivered_next(tmp_path):
    async with running_broker(tmp_path) as broker:
        priority_topic(broker)
        await send_levels(broker, [0] * 5)
        assert bodies(await pop(broker, "G", "P", max_count=2)) == ["m0-p0", "m1-p0"]
        await broker.messages.send([Message.create("P", "urgent", priority=2)], topic="P")
        assert bodies(await pop(broker, "G", "P", max_count=2)) == ["urgent", "m2-p0"]


async def test_a_retry_keeps_its_level_and_goes_before_lower_levels(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        priority_topic(broker)
        await send_levels(broker, [3])
        ((first, _),) = await pop(broker, "G", "P", max_count=1, invisible_ms=10_000)  # never acked
        await send_levels(broker, [0, 1])
        clock.advance(10_001)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 1
        retry = broker.topics.get(pop_retry_topic("G", "P"))
        assert retry.message_type is MessageType.PRIORITY and retry.write_queue_nums == 4
        got = await pop(broker, "G", "P", max_count=32)
        assert bodies(got) == ["m0-p3", "m1-p1", "m0-p0"]
        assert got[0][0].priority == 3 and got[0][0].reconsume_times == 1 and got[0][0].topic == "P"
        assert got[0][0].properties[props.ORIGIN_MESSAGE_ID] == first.msg_id
