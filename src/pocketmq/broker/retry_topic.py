"""A consumer group's retry topic ``%RETRY%<group>``: as many queues as the group's ``retryQueueNums``.

RocketMQ creates the retry topic with the group's ``retryQueueNums`` queues on the first heartbeat or send-back.
Here the same two moments also *grow* an existing retry topic to the group's count (a group created or changed
after its consumers first came keeps its setting), and never shrink it: retries waiting in a queue taken away
could no longer be consumed. Gray release may grow it further (broker/gray.py).
"""

from __future__ import annotations

import dataclasses
import logging

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.common.topic import TopicConfig, retry_topic

log = logging.getLogger(__name__)


def ensure_retry_topic(topics, group: SubscriptionGroupConfig) -> TopicConfig:
    """The config of ``group``'s retry topic, created or grown to ``group.retry_queue_nums`` queues."""
    return grow_queues(topics, topics.get_or_create(retry_topic(group.group)), group.retry_queue_nums)


def grow_queues(topics, config: TopicConfig, queue_nums: int) -> TopicConfig:
    """``config`` with at least ``queue_nums`` read and write queues (stored when it changed)."""
    if min(config.read_queue_nums, config.write_queue_nums) >= queue_nums:
        return config
    grown = dataclasses.replace(
        config,
        read_queue_nums=max(config.read_queue_nums, queue_nums),
        write_queue_nums=max(config.write_queue_nums, queue_nums),
    )
    log.info("event=retry_topic_grown topic=%s queues=%d", grown.name, grown.write_queue_nums)
    return topics.create_or_update(grown)
