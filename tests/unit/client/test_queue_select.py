"""Queue selection: round robin interleaved by broker, retries avoiding failed brokers, message groups by
Java's String.hashCode."""

from __future__ import annotations

from collections import Counter

import pytest

from pocketmq.client.queue_select import (
    MessageGroupSelector,
    RoundRobinSelector,
    interleave_by_broker,
    java_string_hash,
)
from pocketmq.common.message import Message, MessageQueue


def queues(brokers=("a", "b"), per_broker=4, topic="t") -> list[MessageQueue]:
    return interleave_by_broker(MessageQueue(topic, b, i) for b in brokers for i in range(per_broker))


def test_java_string_hash_matches_java():
    # what Java's String.hashCode() gives for these strings
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648  # the famous Integer.MIN_VALUE string
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two UTF-16 units


def test_interleave_alternates_brokers_then_queue_ids():
    mqs = interleave_by_broker(
        [
            MessageQueue("t", "b", 1),
            MessageQueue("t", "a", 1),
            MessageQueue("t", "b", 0),
            MessageQueue("t", "a", 0),
            MessageQueue("t", "a", 2),
        ]
    )
    assert [(m.broker_name, m.queue_id) for m in mqs] == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2)]


def test_round_robin_covers_every_queue_evenly_and_alternates_brokers():
    mqs = queues()
    selector = RoundRobinSelector(start=0)
    picks = [selector.select(mqs, Message("t", b"x")) for _ in range(8 * 10)]
    assert Counter(picks) == {mq: 10 for mq in mqs}
    assert all(picks[i].broker_name != picks[i + 1].broker_name for i in range(len(picks) - 1))


def test_retry_avoids_failed_brokers_and_falls_back_when_all_failed():
    mqs = queues()
    selector = RoundRobinSelector(start=0)
    for _ in range(10):
        assert selector.select(mqs, Message("t", b"x"), frozenset({"a"})).broker_name == "b"
    assert selector.select(mqs, Message("t", b"x"), frozenset({"a", "b"})) in mqs


def test_empty_queue_list_is_an_error():
    with pytest.raises(ValueError):
        RoundRobinSelector().select([], Message("t", b"x"))
    with pytest.raises(ValueError):
        MessageGroupSelector().select([], Message.create("t", b"x", message_group="g"))


def test_message_group_always_lands_on_the_same_queue_even_on_retry():
    mqs = queues()
    selector = MessageGroupSelector()
    msg = Message.create("t", b"x", message_group="order-42")
    expected = mqs[abs(java_string_hash("order-42")) % len(mqs)]
    assert {selector.select(mqs, msg) for _ in range(20)} == {expected}
    assert selector.select(mqs, msg, frozenset({expected.broker_name})) == expected


def test_messages_without_group_use_the_fallback():
    mqs = queues()
    selector = MessageGroupSelector(RoundRobinSelector(start=0))
    picks = {selector.select(mqs, Message("t", b"x")) for _ in range(len(mqs))}
    assert picks == set(mqs)


def test_groups_spread_over_queues():
    mqs = queues(per_broker=8)
    selector = MessageGroupSelector()
    used = {selector.select(mqs, Message.create("t", b"x", message_group=f"g{i}")) for i in range(200)}
    assert len(used) == len(mqs)
