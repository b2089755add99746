"""Where a group's pop of a queue starts: its consumer offset, or for a group new to the queue the init offset.

The init offset is the queue's min for INIT_MODE_MIN and for retry topics, its max for INIT_MODE_MAX unless the
queue still starts at 0 (nothing was ever removed: a new group reads it all). It is committed at once, so the
group's next pop of the queue starts there whatever its init mode.
"""

from __future__ import annotations

from pocketmq.broker.pop.receive import INIT_MODE_MAX
from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX


def start_offset(store, offsets, group: str, topic: str, queue_id: int, init_mode: int) -> int:
    committed = offsets.query(group, topic, queue_id)
    if committed is not None:
        return committed
    low = store.min_queue_offset(topic, queue_id)
    if init_mode == INIT_MODE_MAX and low > 0 and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        start = store.max_queue_offset(topic, queue_id)
    else:
        start = low
    offsets.commit(group, topic, queue_id, start)
    return start
