"""A group's ``%RETRY%`` topic has the group's retryQueueNums queues: created with them, grown to them, never
shrunk; send-back spreads its copies over them."""

from __future__ import annotations

import dataclasses

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.retry_topic import ensure_retry_topic
from pocketmq.broker.topics import TopicManager


def test_created_with_the_groups_queues_grown_never_shrunk(tmp_path):
    topics = TopicManager(tmp_path / "topics.json", auto_create_enabled=False, default_queue_nums=8)
    group = SubscriptionGroupConfig("G", retry_queue_nums=3)
    created = ensure_retry_topic(topics, group)
    assert (created.name, created.read_queue_nums, created.write_queue_nums) == ("%RETRY%G", 3, 3)
    grown = ensure_retry_topic(topics, dataclasses.replace(group, retry_queue_nums=5))
    assert (grown.read_queue_nums, grown.write_queue_nums) == (5, 5) and topics.get("%RETRY%G") == grown
    kept = ensure_retry_topic(topics, dataclasses.replace(group, retry_queue_nums=1))
    assert (kept.read_queue_nums, kept.write_queue_nums) == (5, 5)  # retries waiting in queues 1..4 stay readable
    assert ensure_retry_topic(topics, SubscriptionGroupConfig("H")).write_queue_nums == 1  # RocketMQ's default
