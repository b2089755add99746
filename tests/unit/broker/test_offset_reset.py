"""A group's offsets reset to a time on one broker: forward and back, or only back."""

from __future__ import annotations

import types

import pytest

from pocketmq.broker.offset_reset import RESET_FENCE_MS, ResetFences, reset_group_offsets
from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.common.errors import TopicNotExistError
from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.consumer_admin_headers import RESET_TO_LATEST


class Store:
    """Queue q holds offsets 0..9, the message at offset i stored at time 100 * i (all queues alike)."""

    def max_queue_offset(self, topic, queue_id):
        return 10

    def queue_offset_by_time(self, topic, queue_id, timestamp_ms):
        return min(10, -(-timestamp_ms // 100))


@pytest.fixture
def broker(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path / "offsets.json")
    topics = {"t": TopicConfig("t", 2, 2)}
    return types.SimpleNamespace(
        broker_name="b",
        store=Store(),
        offsets=offsets,
        topics=types.SimpleNamespace(get=topics.get),
        offset_fences=ResetFences(),
        clock=types.SimpleNamespace(monotonic_ms=lambda: 1000.0),
    )


def test_forced_resets_move_both_ways_and_only_back_keeps_a_group_behind_the_time(broker):
    broker.offsets.commit("g", "t", 0, 8)
    broker.offsets.commit("g", "t", 1, 2)
    assert reset_group_offsets(broker, "g", "t", 450, force=False) == {0: 5, 1: 2}
    assert broker.offsets.offsets("g", "t") == {0: 5, 1: 2}
    assert reset_group_offsets(broker, "g", "t", RESET_TO_LATEST, force=True) == {0: 10, 1: 10}
    assert reset_group_offsets(broker, "g", "t", 0, force=True) == {0: 0, 1: 0}
    assert reset_group_offsets(broker, "fresh", "t", 300, force=False) == {0: 3, 1: 3}  # nothing stored yet
    with pytest.raises(TopicNotExistError):
        reset_group_offsets(broker, "g", "missing", 0, force=True)


def test_the_groups_commits_of_the_reset_queues_are_fenced_for_a_while(broker):
    reset_group_offsets(broker, "g", "t", 0, force=True)
    fences = broker.offset_fences
    assert fences.fenced("g", "t", 0, 1000.0) and fences.fenced("g", "t", 1, 1000.0 + RESET_FENCE_MS - 1)
    assert not fences.fenced("other", "t", 0, 1000.0) and not fences.fenced("g", "t", 2, 1000.0)
    assert not fences.fenced("g", "t", 0, 1000.0 + RESET_FENCE_MS)
    assert not fences.fenced("g", "t", 0, 1000.0)  # gone once passed
