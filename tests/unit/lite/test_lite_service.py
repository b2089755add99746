"""Lite topics on an in-process broker (ManualClock): send under a LITE parent, subscriptions and their quota,
ordered delivery with receipts, redelivery, expiry of idle lite topics, progress across a restart."""

from __future__ import annotations

import asyncio

import pytest
from tests.unit.pop.pop_support import running_broker

from pocketmq.broker.lite.delivery import LiteReceipt
from pocketmq.broker.lite.index import lite_queue_id
from pocketmq.broker.lite.subscriptions import SyncAction
from pocketmq.common.errors import (
    IllegalLiteTopicError,
    InvalidReceiptHandleError,
    LiteSubscriptionQuotaExceededError,
    LiteTopicQuotaExceededError,
    MessageTypeConflictError,
)
from pocketmq.common.message import Message
from pocketmq.common.topic import MessageType, TopicConfig
from pocketmq.runtime.clock import ManualClock

PARENT = "agents"


async def lite_broker(broker, queues: int = 4):
    broker.topics.create_or_update(TopicConfig(PARENT, queues, queues, message_type=MessageType.LITE))
    return broker


async def send(broker, lite: str, *bodies: str):
    return await broker.messages.send([Message.create(PARENT, b, lite_topic=lite) for b in bodies], topic=PARENT)


async def receive(broker, client="c1", group="g", max_count=32, invisible_ms=10_000):
    got = await broker.lite.receive(group, PARENT, client, max_count, invisible_ms, 0)
    return [(m.message.lite_topic, m.message.body.decode(), m.attempt, m.handle) for m in got]


async def test_a_lite_topic_is_created_on_first_send_and_keeps_to_one_parent_queue(tmp_path):
    async with running_broker(tmp_path) as broker:
        await lite_broker(broker)
        results = await send(broker, "s1", "a", "b", "c")
        assert {r.queue_id for r in results} == {lite_queue_id("s1", 4)}
        assert [r.queue_offset for r in results] == [0, 1, 2]
        assert broker.lite.index.count(PARENT) == 1
        assert list(broker.lite.index.get(PARENT, "s1").offsets) == [0, 1, 2]
        assert broker.store.queues() == {PARENT: [lite_queue_id("s1", 4)]}  # no files of its own


async def test_sends_that_do_not_fit_a_lite_parent_are_refused(tmp_path):
    async with running_broker(tmp_path, lite_topic_max_per_parent=2) as broker:
        await lite_broker(broker)
        with pytest.raises(IllegalLiteTopicError):
            await broker.messages.send([Message.create(PARENT, "no lite topic")], topic=PARENT)
        with pytest.raises(IllegalLiteTopicError):
            await send(broker, "x" * 65, "too long a name")
        broker.topics.create_or_update(TopicConfig("plain", 1, 1))
        with pytest.raises(MessageTypeConflictError):  # a lite message needs its LITE parent
            await broker.messages.send([Message.create("plain", "m", lite_topic="s1")], topic="plain")
        await send(broker, "s1", "a")
        await send(broker, "s2", "b")
        with pytest.raises(LiteTopicQuotaExceededError):
            await send(broker, "s3", "c")
        await send(broker, "s2", "more")  # an existing one still takes messages


async def test_a_consumer_gets_only_its_lite_topics_in_order_and_acks(tmp_path):
    async with running_broker(tmp_path) as broker:
        await lite_broker(broker)
        await send(broker, "s1", "1a", "1b")
        await send(broker, "s2", "2a")
        assert await receive(broker) == []  # nothing subscribed yet
        broker.lite.sync("g", PARENT, "c1", SyncAction.PARTIAL_ADD, {"s1"})
        got = await receive(broker)
        assert [(lite, body, attempt) for lite, body, attempt, _ in got] == [("s1", "1a", 1), ("s1", "1b", 1)]
        await send(broker, "s1", "1c")
        assert await receive(broker) == []  # s1 has messages in flight: the next waits (order)
        for *_, handle in got:
            broker.lite.ack("g", handle)
        assert [body for _, body, _, _ in await receive(broker)] == ["1c"]
        with pytest.raises(InvalidReceiptHandleError):
            broker.lite.ack("g", got[0][3])  # acked already


async def test_an_unacked_message_comes_back_after_its_invisible_time_and_a_stale_handle_fails(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock=clock) as broker:
        await lite_broker(broker)
        broker.lite.sync("g", PARENT, "c1", SyncAction.COMPLETE_ADD, {"s1"})
        await send(broker, "s1", "a")
        [(_, _, _, first)] = await receive(broker, invisible_ms=5_000)
        clock.advance(4_000)
        assert await receive(broker) == []
        clock.advance(1_000)
        [(_, body, attempt, again)] = await receive(broker)
        assert (body, attempt) == ("a", 2)
        with pytest.raises(InvalidReceiptHandleError):
            broker.lite.ack("g", first)
        later = broker.lite.change_invisible("g", again, 60_000)
        with pytest.raises(InvalidReceiptHandleError):
            broker.lite.ack("g", again)  # replaced by the changed handle
        broker.lite.ack("g", later)
        forged = LiteReceipt("0" * 12, 0, PARENT, "s1").encode()
        with pytest.raises(InvalidReceiptHandleError):
            broker.lite.ack("g", forged)


async def test_groups_consume_apart_and_the_quota_counts_distinct_lite_topics_per_group(tmp_path):
    async with running_broker(tmp_path, lite_subscription_quota=2) as broker:
        await lite_broker(broker)
        lite = broker.lite
        lite.sync("g", PARENT, "c1", SyncAction.PARTIAL_ADD, {"s1"})
        lite.sync("g", PARENT, "c2", SyncAction.PARTIAL_ADD, {"s1", "s2"})  # s1 counts once
        with pytest.raises(LiteSubscriptionQuotaExceededError):
            lite.sync("g", PARENT, "c1", SyncAction.PARTIAL_ADD, {"s3"})
        assert lite.subscriptions.of("g", PARENT, "c1") == {"s1"}  # a refused sync changes nothing
        lite.sync("g", PARENT, "c2", SyncAction.PARTIAL_REMOVE, {"s2"})
        lite.sync("g", PARENT, "c1", SyncAction.PARTIAL_ADD, {"s3"})
        lite.sync("other", PARENT, "c9", SyncAction.COMPLETE_ADD, {"s1", "s3"})  # another group's own quota
        await send(broker, "s1", "a")
        assert [b for _, b, _, _ in await receive(broker, "c1", "g")] == ["a"]
        assert [b for _, b, _, _ in await receive(broker, "c9", "other")] == ["a"]
        lite.sync("g", PARENT, "c1", SyncAction.COMPLETE_REMOVE, set())
        assert lite.subscriptions.group_count("g") == 1  # c2's s1


async def test_idle_lite_topics_expire_with_their_subscriptions_and_silent_clients_lose_theirs(tmp_path):
    clock = ManualClock()
    async with running_broker(
        tmp_path, clock=clock, lite_topic_expire_ms=60_000, client_channel_expire_ms=30_000
    ) as broker:
        await lite_broker(broker)
        lite = broker.lite
        await send(broker, "old", "a")
        clock.advance(40_000)
        await send(broker, "young", "b")
        lite.sync("g", PARENT, "c1", SyncAction.COMPLETE_ADD, {"old", "young"})
        lite.sync("g", PARENT, "c2", SyncAction.COMPLETE_ADD, {"young"})
        clock.advance(25_000)
        lite.subscriptions.touch("g", PARENT, "c1", clock.now_ms())
        assert lite.expire() == 1
        assert lite.index.get(PARENT, "old") is None and lite.index.get(PARENT, "young") is not None
        assert lite.subscriptions.of("g", PARENT, "c1") == {"young"}
        clock.advance(10_000)  # c2 silent for 35 s
        lite.expire()
        assert lite.subscriptions.of("g", PARENT, "c2") == set()
        await send(broker, "old", "again")  # an expired lite topic is created anew by its next message
        assert list(lite.index.get(PARENT, "old").offsets) == [1]


async def test_the_index_and_the_groups_progress_survive_a_restart(tmp_path):
    async with running_broker(tmp_path) as broker:
        await lite_broker(broker, queues=2)
        for i in range(3):
            await send(broker, f"s{i}", f"{i}a", f"{i}b")
        broker.lite.sync("g", PARENT, "c1", SyncAction.COMPLETE_ADD, {"s0"})
        first = await receive(broker, max_count=1)
        broker.lite.ack("g", first[0][3])
        before = {f"s{i}": list(broker.lite.index.get(PARENT, f"s{i}").offsets) for i in range(3)}
    async with running_broker(tmp_path) as broker:
        assert {f"s{i}": list(broker.lite.index.get(PARENT, f"s{i}").offsets) for i in range(3)} == before
        broker.lite.sync("g", PARENT, "c1", SyncAction.COMPLETE_ADD, {"s0"})
        assert [b for _, b, _, _ in await receive(broker)] == ["0b"]  # 0a was acked before the restart


async def test_a_waiting_receive_gets_a_message_that_arrives_and_ends_at_its_poll_time(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock=clock) as broker:
        await lite_broker(broker)
        broker.lite.sync("g", PARENT, "c1", SyncAction.COMPLETE_ADD, {"s1"})
        waiting = asyncio.ensure_future(broker.lite.receive("g", PARENT, "c1", 8, 10_000, 5_000))
        await asyncio.sleep(0)
        await send(broker, "s2", "not subscribed")
        await asyncio.sleep(0)
        assert not waiting.done()
        await send(broker, "s1", "a")
        got = await asyncio.wait_for(waiting, 5)
        assert [m.message.body for m in got] == [b"a"]
        waiting = asyncio.ensure_future(broker.lite.receive("g", PARENT, "c1", 8, 10_000, 5_000))
        await asyncio.sleep(0)
        clock.advance(5_000)
        assert await asyncio.wait_for(waiting, 5) == []


async def test_the_lite_topics_of_a_deleted_parent_go_at_the_next_round(tmp_path):
    async with running_broker(tmp_path) as broker:
        await lite_broker(broker)
        await send(broker, "s1", "a")
        broker.topics.delete(PARENT)
        assert broker.lite.expire() == 1 and broker.lite.index.count() == 0


def test_the_lite_topic_is_found_in_encoded_properties():
    from pocketmq.broker.lite.service import _lite_topic_of
    from pocketmq.common.properties import encode_properties

    assert _lite_topic_of(encode_properties({"UNIQ_KEY": "x", "__LITE_TOPIC": "s1", "TAGS": "t"}).encode()) == "s1"
    assert _lite_topic_of(encode_properties({"__LITE_TOPIC": "s-2"}).encode()) == "s-2"
    assert _lite_topic_of(encode_properties({"k": "v__LITE_TOPIC\x01no"}).encode()) is None
    assert _lite_topic_of(encode_properties({"UNIQ_KEY": "x"}).encode()) is None
