"""The broker's part of gray release (docs/gray.md, common/gray.py): retries of gray messages stay gray.

RocketMQ's RIP-72 left ``%RETRY%<group>`` with one queue shared by everyone, so a failed gray message could be
retried on a normal consumer and the other way round. Here the first heartbeat of a gray consumer grows its
group's retry topic to ``GRAY_RETRY_QUEUE_NUMS`` queues (and the group is told once the routes show it:
``notify_group_once_routed``); send-back then puts the retry copy of a gray message
(property ``PMQ_GRAY``, which the copy keeps) into the last queue and every other retry into the others
(``common.gray.retry_queue_id``), and consumers split the retry topic by the same rule. A topic that already
has 2 queues or more is left as it is. POP retries (``%RETRY%<group>_<topic>``: ``place_retry_copy``) and a
client's own retry send when send-back failed (broker/messages.py: a send to ``%RETRY%`` without a queue
id) are placed by the same rule.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable

from pocketmq.broker.retry_topic import grow_queues
from pocketmq.common import properties as props
from pocketmq.common.gray import GRAY_RETRY_QUEUE_NUMS, is_gray_message, retry_queue_id
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import TopicConfig


def ensure_gray_retry_queues(topics, retry_config: TopicConfig) -> TopicConfig:
    """Grow a group's retry topic to the gray split's queue count; the config in force afterwards."""
    return grow_queues(topics, retry_config, GRAY_RETRY_QUEUE_NUMS)


async def notify_group_once_routed(register: Callable[[], Awaitable[object]], consumers, group: str) -> None:
    """A gray consumer's heartbeat grew ``group``'s retry topic: once the name servers have the new queues
    (``register``: a registration round), tell every member of the group (NOTIFY_CONSUMER_IDS_CHANGED), so each
    rebalances the retry topic now and the gray consumer takes its gray retry queue at once; the consumer's own
    first rebalance ran right after its heartbeat, on the route from before."""
    await register()
    consumers.notify_group(group)


def place_retry_copy(topics, msg: MessageExt) -> None:
    """Set the queue of a POP retry copy (revive): a gray message's goes into the last queue, the topic grown
    to the split first (POP clients send no remoting heartbeat, and a pop retry topic exists per business
    topic, so it grows when its first gray retry comes); any other into the remaining queues, spread by its
    origin message id."""
    gray = is_gray_message(msg.properties)
    config = topics.get_or_create(msg.topic)
    if gray:
        config = ensure_gray_retry_queues(topics, config)
    spread = zlib.crc32((msg.properties.get(props.ORIGIN_MESSAGE_ID) or msg.uniq_key or "").encode())
    msg.queue_id = retry_queue_id(config.write_queue_nums, gray, spread)
