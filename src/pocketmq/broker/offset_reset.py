"""Resetting a consumer group's offsets of a topic to a time (an operator's "consume again from 9:00").

The broker decides each queue's new offset from its own store: the first message stored at or after the time
(its max offset for ``RESET_TO_LATEST``), and stores it as the group's offset, also backwards. Online push
consumers are told the same offsets by the front end (RESET_CONSUMER_CLIENT_OFFSET) and pull from them at
once; a consumer that is offline starts from the stored offset when it comes back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.common.errors import TopicNotExistError
from pocketmq.protocol.consumer_admin_headers import RESET_TO_LATEST

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


def reset_group_offsets(broker: Broker, group: str, topic: str, timestamp_ms: int, *, force: bool) -> dict[int, int]:
    """Queue id -> the offset now stored for ``group`` on every read queue of ``topic``. Without ``force`` a queue
    only moves back: a group behind the time keeps its offset. TopicNotExistError for a topic this broker lacks."""
    config = broker.topics.get(topic)
    if config is None:
        raise TopicNotExistError(f"topic {topic!r} does not exist on broker {broker.broker_name}")
    store, offsets = broker.store, broker.offsets
    table = {}
    for queue_id in range(config.read_queue_nums):
        if timestamp_ms == RESET_TO_LATEST:
            target = store.max_queue_offset(topic, queue_id)
        else:
            target = store.queue_offset_by_time(topic, queue_id, timestamp_ms)
        current = offsets.query(group, topic, queue_id)
        if not force and current is not None and current <= target:
            target = current
        offsets.reset(group, topic, queue_id, target)
        table[queue_id] = target
    return table
