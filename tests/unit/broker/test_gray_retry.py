"""Retries that stay gray on the broker: the retry topic split and the queue a retry copy goes to."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.pop.pop_support import running_broker

from pocketmq.broker.consumers import ConsumerRegistry
from pocketmq.broker.gray import ensure_gray_retry_queues, notify_group_once_routed
from pocketmq.broker.send_back import retry_copy
from pocketmq.common.gray import GRAY_PROPERTY, retry_queue_id
from pocketmq.common.message import Message, MessageExt
from pocketmq.common.topic import TopicConfig


@given(st.integers(1, 16), st.booleans(), st.integers(0, 2**32))
def test_gray_retries_take_the_last_queue_and_normal_ones_never(queue_nums, gray, spread):
    queue_id = retry_queue_id(queue_nums, gray, spread)
    assert 0 <= queue_id < queue_nums
    if queue_nums >= 2:
        assert (queue_id == queue_nums - 1) == gray


class FakeTopics:
    def __init__(self):
        self.updated = []

    def create_or_update(self, config):
        self.updated.append(config)
        return config


def test_retry_topic_grows_to_two_queues_once():
    topics = FakeTopics()
    grown = ensure_gray_retry_queues(topics, TopicConfig("%RETRY%g", 1, 1))
    assert (grown.read_queue_nums, grown.write_queue_nums) == (2, 2)
    assert ensure_gray_retry_queues(topics, grown) is grown and topics.updated == [grown]


def test_retry_and_dlq_copies_keep_the_gray_mark():
    original = MessageExt(topic="T", queue_id=7, body=b"x", properties={GRAY_PROPERTY: "v2", "UNIQ_KEY": "u"})
    for topic in ("%RETRY%g", "%DLQ%g"):
        copy = retry_copy(original, topic=topic, queue_id=0, delay_level=0, origin_msg_id=None)
        assert copy.properties[GRAY_PROPERTY] == "v2"


async def test_a_clients_own_retry_send_keeps_the_gray_placement(tmp_path):
    """The SDK's fallback when CONSUMER_SEND_MSG_BACK fails: a send to %RETRY%<group> with no queue id."""
    async with running_broker(tmp_path) as broker:
        broker.topics.create_or_update(TopicConfig("%RETRY%g", 3, 3))
        for gray in (True, False):
            for i in range(6):
                msg = Message.create("%RETRY%g", f"m{i}", properties={GRAY_PROPERTY: "v2"} if gray else {})
                [result] = await broker.messages.send([msg], topic="%RETRY%g")
                assert (result.queue_id == 2) == gray


async def test_the_group_is_told_of_the_grown_retry_topic_only_after_the_name_servers_have_it():
    events: list[str] = []
    registry = ConsumerRegistry(expire_ms=1000)
    registry.add_notifier(lambda n: events.append(f"notify {n.client_id}"))
    registry.heartbeat("g", "normal", object())
    registry.heartbeat("g", "x@gray", object())  # the join tells the other member at once
    events.clear()

    async def register() -> None:
        events.append("registered")

    await notify_group_once_routed(register, registry, "g")
    assert events == ["registered", "notify normal", "notify x@gray"]  # the newcomer too: it rebalanced too early
