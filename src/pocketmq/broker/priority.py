"""Retries of priority messages keep their priority (docs/pop.md, "Priority topics").

A PRIORITY topic keeps priority *n* in queue *n* (``common.topic.priority_queue_id``, RocketMQ's RIP-80), and a
pop reads its queues highest first (``pop.receive.visit_order``). RocketMQ writes every retry into one retry
queue, where a retried high-priority message waits behind all the low ones retried before it. Here the pop
retry topic of a PRIORITY topic is itself a PRIORITY topic with as many queues, made so by the first retry that
needs it, and a retry copy goes into the queue of its priority; a pop reads retry queue *n* beside queue *n*.
"""

from __future__ import annotations

import dataclasses
import logging

from pocketmq.common import properties as props
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import MessageType, priority_queue_id

log = logging.getLogger(__name__)


def place_priority_retry(topics, msg: MessageExt) -> bool:
    """Put a POP retry copy of a priority message into the retry queue of its priority (the retry topic made a
    PRIORITY topic first); False, leaving the copy alone, for any other message."""
    priority = msg.priority
    if priority is None:
        return False
    business = topics.get(msg.properties.get(props.RETRY_TOPIC, ""))
    if business is None or business.message_type is not MessageType.PRIORITY:
        return False
    config = topics.get_or_create(msg.topic)
    queue_nums = business.write_queue_nums
    if config.message_type is not MessageType.PRIORITY or config.write_queue_nums < queue_nums:
        config = topics.create_or_update(
            dataclasses.replace(
                config,
                read_queue_nums=max(config.read_queue_nums, queue_nums),
                write_queue_nums=max(config.write_queue_nums, queue_nums),
                message_type=MessageType.PRIORITY,
            )
        )
        log.info("event=priority_retry_topic topic=%s queues=%d", config.name, config.write_queue_nums)
    msg.queue_id = priority_queue_id(priority, config.write_queue_nums)
    return True
