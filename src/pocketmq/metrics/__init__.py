"""Metrics: the in-memory registry (``registry``), its Prometheus text format (``prometheus``) and the
``/metrics`` HTTP endpoint (``http``). Names, labels and units: docs/metrics.md."""

from pocketmq.metrics.registry import Counter, Gauge, Histogram, MetricsRegistry

__all__ = ["Counter", "Gauge", "Histogram", "MetricsRegistry"]
