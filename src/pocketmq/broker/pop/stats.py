"""Per-queue POP counts of one group for ``group describe``: in flight, waiting to revive, retried,
dead-lettered, CK rewrites and endings, gathered from the revive ledgers, the FIFO state and the counters of
revive and of the FIFO mode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pocketmq.broker.pop.fifo import FifoPopState
from pocketmq.broker.pop.revive_queue import ReviveQueue

# Where each of ReviveService.per_queue's counts goes in a QueuePopStats row.
_REVIVE_COLUMNS = {"retried": 2, "dead_lettered": 3, "rewrites": 4, "endings": 5}


@dataclass(frozen=True, slots=True)
class QueuePopStats:
    in_flight: int = 0
    waiting_to_revive: int = 0
    retried: int = 0
    dead_lettered: int = 0
    rewrites: int = 0  # CK rewrites after failed reads (revive backoff)
    endings: int = 0  # messages whose reads failed past the backoff table (dead-lettered reference or dropped)


def group_stats(
    group: str,
    now_ms: int,
    revive_queues: list[ReviveQueue],
    fifo: FifoPopState,
    revive_counts: Mapping[tuple[str, str, int, str], int],
    fifo_dead_lettered: Mapping[tuple[str, str, int], int],
) -> dict[tuple[str, int], QueuePopStats]:
    """(topic, queue id) -> the group's counts there. ``revive_counts``: ``ReviveService.per_queue``;
    ``fifo_dead_lettered``: ``FifoPop.dead_lettered``."""
    counts: dict[tuple[str, int], list[int]] = {}

    def row(topic: str, queue_id: int) -> list[int]:
        return counts.setdefault((topic, queue_id), [0] * 6)

    for queue in revive_queues:
        queue.catch_up()
        for (g, topic, queue_id), state in queue.ledger.pop_state(now_ms).items():
            if g == group:
                r = row(topic, queue_id)
                r[0] += state.in_flight
                r[1] += state.waiting_to_revive
    for (topic, queue_id), orderly in fifo.of_group(group).items():
        row(topic, queue_id)[0] += orderly.in_flight(now_ms)
    for (g, topic, queue_id, what), n in revive_counts.items():
        if g == group:
            row(topic, queue_id)[_REVIVE_COLUMNS[what]] += n
    for (g, topic, queue_id), n in fifo_dead_lettered.items():
        if g == group:
            row(topic, queue_id)[3] += n
    return {key: QueuePopStats(*values) for key, values in counts.items()}
