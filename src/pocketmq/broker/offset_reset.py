"""Resetting a consumer group's offsets of a topic to a time (an operator's "consume again from 9:00").

The broker decides each queue's new offset from its own store: the first message stored at or after the time
(its max offset for ``RESET_TO_LATEST``), and stores it as the group's offset, also backwards. Online push
consumers are told the same offsets by the front end (RESET_CONSUMER_CLIENT_OFFSET) and pull from them at
once; a consumer that is offline starts from the stored offset when it comes back.

A commit a consumer sent before it heard of the reset (on a pull, or an offset update) can arrive after it, and
commits only move forward: it would undo the reset. So for ``RESET_FENCE_MS`` after a reset the clients' own
commits of the group's queues are not stored (``ResetFences``); what a consumer did since the reset is
committed by its next commit after that, as it commits its position, not a difference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.common.errors import TopicNotExistError
from pocketmq.protocol.consumer_admin_headers import RESET_TO_LATEST

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

# Longer than a consumer takes to hear of a reset (one oneway request) and for its requests sent before to arrive;
# short enough that a consumer's progress after the reset is stored soon (push consumers persist every 5 s).
RESET_FENCE_MS = 3000


class ResetFences:
    """(group, topic, queue id) -> until when (monotonic ms) the clients' commits of that queue are not stored."""

    def __init__(self) -> None:
        self._until_ms: dict[tuple[str, str, int], float] = {}

    def fence(self, group: str, topic: str, queue_ids, until_ms: float) -> None:
        for queue_id in queue_ids:
            self._until_ms[(group, topic, queue_id)] = until_ms

    def fenced(self, group: str, topic: str, queue_id: int, now_ms: float) -> bool:
        if not self._until_ms:  # the common case: no reset lately
            return False
        key = (group, topic, queue_id)
        until_ms = self._until_ms.get(key)
        if until_ms is None:
            return False
        if now_ms < until_ms:
            return True
        del self._until_ms[key]
        return False


def reset_group_offsets(broker: Broker, group: str, topic: str, timestamp_ms: int, *, force: bool) -> dict[int, int]:
    """Queue id -> the offset now stored for ``group`` on every read queue of ``topic``, fenced from stale commits.
    Without ``force`` a queue only moves back: a group behind the time keeps its offset. TopicNotExistError for a
    topic this broker lacks."""
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
    broker.offset_fences.fence(group, topic, table, broker.clock.monotonic_ms() + RESET_FENCE_MS)
    return table
