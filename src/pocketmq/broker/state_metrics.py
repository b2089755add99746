"""The broker's state as metrics, computed when ``/metrics`` is read (a metrics source, docs/metrics.md).

Storage (commit log bytes held, the data directory's disk), consumer lag per group and queue, POP messages in
flight per group and the timer's backlog. Nothing here runs on a request path: each scrape reads the tables
once (one max offset per committed queue, one ``statvfs``). A broker not started has none of these families.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from pocketmq.metrics.samples import FamilySnapshot, Sample

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker
    from pocketmq.broker.wiring import BrokerServices


def state_families(broker: Broker, services: BrokerServices | None) -> list[FamilySnapshot]:
    """``services``: the broker's, None before start and after shutdown (nothing to read then)."""
    if services is None:
        return []
    store = services.store
    disk_total_bytes, _used, disk_free_bytes = shutil.disk_usage(broker.config.data_dir)
    lag = []
    for (topic, group), queues in broker.offsets.table().items():
        for queue_id, committed in sorted(queues.items()):
            behind = max(store.max_queue_offset(topic, queue_id) - committed, 0)
            lag.append(Sample("", {"group": group, "topic": topic, "queue_id": str(queue_id)}, float(behind)))
    in_flight = sorted(services.pop.in_flight_by_group().items())
    return [
        _gauge(
            "pocketmq_store_bytes",
            "Commit log bytes the store holds (from its oldest kept record to its end)",
            store.max_phys_offset - store.min_phys_offset,
        ),
        _gauge("pocketmq_store_disk_free_bytes", "Free bytes on the disk of the data directory", disk_free_bytes),
        _gauge("pocketmq_store_disk_total_bytes", "Size of the disk of the data directory", disk_total_bytes),
        FamilySnapshot(
            "pocketmq_consumer_lag_messages",
            "gauge",
            "Messages of a queue after the offset its consumer group committed",
            lag,
        ),
        FamilySnapshot(
            "pocketmq_pop_in_flight_messages",
            "gauge",
            "Messages popped, not acked and still invisible, by consumer group",
            [Sample("", {"group": group}, float(n)) for group, n in in_flight],
        ),
        _gauge(
            "pocketmq_timer_backlog_messages",
            "Delayed and timed messages not delivered yet",
            services.timer.outstanding,
        ),
    ]


def _gauge(name: str, help_text: str, value: float) -> FamilySnapshot:
    return FamilySnapshot(name, "gauge", help_text, [Sample("", {}, float(value))])
