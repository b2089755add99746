"""The Prometheus exposition of a broker's metrics, by ``prometheus_client``.

Each ``MetricsRegistry`` has its own ``prometheus_client.CollectorRegistry`` (``collector_registry``; never the
library's process-wide default, so several brokers in one process each expose their own numbers). It holds one
collector that turns the registry's family snapshots into ``prometheus_client`` metrics at scrape time, and the
library's ``ProcessCollector`` (``process_cpu_seconds_total``, ``process_resident_memory_bytes``, open file
descriptors, start time; read from ``/proc``, so Linux only).

``exposition(registry, accept_header)`` is what any HTTP server answers ``GET /metrics`` with: the body and its
content type, the Prometheus text format 0.0.4, or OpenMetrics when the scraper's ``Accept`` asks for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

from pocketmq.metrics.samples import FamilySnapshot

_TOTAL = "_total"


def collector_registry(collect: Callable[[], Iterable[FamilySnapshot]]) -> CollectorRegistry:
    """A registry of its own serving the families ``collect()`` gives, with the process's CPU and memory."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(collect))
    ProcessCollector(registry=registry)
    return registry


def exposition(registry: CollectorRegistry, accept_header: str = "") -> tuple[bytes, str]:
    """(body, content type) of a scrape: the text format unless ``accept_header`` asks for OpenMetrics."""
    encode, content_type = choose_encoder(accept_header)
    return encode(registry), content_type


class _SnapshotCollector:
    """A ``prometheus_client`` custom collector over family snapshots: nothing is copied until a scrape."""

    def __init__(self, collect: Callable[[], Iterable[FamilySnapshot]]):
        self._collect = collect

    def collect(self) -> Iterator[Metric]:
        for family in self._collect():
            # prometheus_client names a counter family without its _total and adds it back to the samples
            name = family.name[: -len(_TOTAL)] if family.kind == "counter" else family.name
            metric = Metric(name, family.help, family.kind)
            for sample in family.samples:
                metric.add_sample(family.name + sample.suffix, sample.labels, sample.value)
            yield metric
