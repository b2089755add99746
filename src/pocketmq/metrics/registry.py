"""The metrics interface: counters, gauges and histograms with labels, held in memory by a ``MetricsRegistry``.

One registry per broker (passed in, never a process-wide singleton), so tests and the simulation can run
several brokers in one process and assert on each one's numbers::

    metrics = MetricsRegistry()
    reads = metrics.counter("pocketmq_remote_reads_total", "typed remote reads", ("broker", "result"))
    reads.inc(broker="broker-b", result="FOUND")
    metrics.value("pocketmq_remote_reads_total", broker="broker-b", result="FOUND")   # 1.0

Asking for a family that exists returns it (so code may look a family up where it uses it); asking again with
another kind or other label names is a programming error (ValueError). Every sample must name exactly the
family's labels. Values that are only known when someone looks (replication lag) come from *collectors*:
callables the registry runs before every ``collect()``.

Limits: at most ``max_series`` label sets per family; past that new label sets are not recorded (logged once
per family), so a bug that puts unbounded values in a label cannot eat the broker's memory.

Thread safety: each family updates under its own lock. PocketMQ updates its broker's registry on the broker's
event loop only (the gRPC servicer runs there too: docs/architecture.md), but a registry may be read or written
from another thread: a test's or an embedding application's.
"""

from __future__ import annotations

import bisect
import logging
import math
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry

from pocketmq.metrics.prometheus import collector_registry
from pocketmq.metrics.samples import FamilySnapshot, Sample, histogram_samples

log = logging.getLogger(__name__)

MAX_SERIES_PER_FAMILY = 10_000
# Seconds; covers a fast RPC (1 ms) up to a timeout (10 s).
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

LabelValues = tuple[str, ...]
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_Series = TypeVar("_Series")  # what a family holds per label set: a float, or a histogram's buckets


class _Family(Generic[_Series]):
    kind = ""

    def __init__(self, name: str, help_text: str, label_names: tuple[str, ...], max_series: int):
        self.name = name
        self.help = help_text
        self.label_names = label_names
        self._max_series = max_series
        self._lock = threading.Lock()
        self._series: dict[LabelValues, _Series] = {}
        self._overflow_logged = False

    def _key(self, labels: dict[str, object]) -> LabelValues:
        if labels.keys() != set(self.label_names):
            raise ValueError(f"metric {self.name} takes labels {list(self.label_names)}, got {sorted(labels)}")
        return tuple(str(labels[name]) for name in self.label_names)

    def _room_for(self, key: LabelValues) -> bool:
        """Whether ``key`` has a series or may get one (call with the lock held)."""
        if key in self._series or len(self._series) < self._max_series:
            return True
        if not self._overflow_logged:
            self._overflow_logged = True
            log.warning("event=metric_series_limit metric=%s max_series=%d", self.name, self._max_series)
        return False

    def remove(self, **labels) -> None:
        with self._lock:
            self._series.pop(self._key(labels), None)

    def clear(self) -> None:
        with self._lock:
            self._series.clear()

    def _labels(self, key: LabelValues) -> dict[str, str]:
        return dict(zip(self.label_names, key))

    def snapshot(self) -> FamilySnapshot:
        with self._lock:
            series = sorted(self._series.items())
            if not series and not self.label_names:  # an unlabelled family reads 0 before it first moves
                series = [((), self._zero())]
            samples = [s for key, value in series for s in self._samples(key, value)]
        return FamilySnapshot(self.name, self.kind, self.help, samples)

    def _zero(self) -> _Series:
        raise NotImplementedError

    def _samples(self, key: LabelValues, series: _Series) -> Iterable[Sample]:
        raise NotImplementedError


class _Scalar(_Family[float]):
    def _add(self, amount: float, labels: dict) -> None:
        key = self._key(labels)
        with self._lock:
            if self._room_for(key):
                self._series[key] = self._series.get(key, 0.0) + amount

    def value(self, **labels) -> float:
        with self._lock:
            return float(self._series.get(self._key(labels), 0.0))

    def values(self) -> dict[LabelValues, float]:
        """Label values (in ``label_names`` order) -> value, for readers that sum over some labels."""
        with self._lock:
            return dict(self._series)

    def _zero(self) -> float:
        return 0.0

    def _samples(self, key: LabelValues, series: float) -> Iterable[Sample]:
        yield Sample("", self._labels(key), float(series))


class Counter(_Scalar):
    """Only goes up (since the broker started)."""

    kind = "counter"

    def inc(self, amount: float = 1.0, **labels) -> None:
        if amount < 0:
            raise ValueError(f"counter {self.name} cannot go down (inc {amount})")
        self._add(amount, labels)


class Gauge(_Scalar):
    """A value that goes up and down."""

    kind = "gauge"

    def inc(self, amount: float = 1.0, **labels) -> None:
        self._add(amount, labels)

    def set(self, value: float, **labels) -> None:
        key = self._key(labels)
        with self._lock:
            if self._room_for(key):
                self._series[key] = float(value)


class _HistogramSeries:
    __slots__ = ("bucket_counts", "count", "sum")

    def __init__(self, buckets: int):
        self.bucket_counts = [0] * buckets  # not cumulative; the +Inf bucket is ``count``
        self.count = 0
        self.sum = 0.0


class Histogram(_Family[_HistogramSeries]):
    """Observations counted into buckets (upper bounds, ascending), with their sum and count."""

    kind = "histogram"

    def __init__(
        self, name: str, help_text: str, label_names: tuple[str, ...], max_series: int, buckets: tuple[float, ...]
    ):
        super().__init__(name, help_text, label_names, max_series)
        if not buckets or list(buckets) != sorted(set(buckets)) or any(math.isinf(b) for b in buckets):
            raise ValueError(f"histogram {name}: buckets must be finite, ascending and distinct")
        self.buckets = tuple(float(b) for b in buckets)

    def observe(self, value: float, **labels) -> None:
        key = self._key(labels)
        with self._lock:
            if not self._room_for(key):
                return
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = _HistogramSeries(len(self.buckets))
            index = bisect.bisect_left(self.buckets, value)
            if index < len(self.buckets):
                series.bucket_counts[index] += 1
            series.count += 1
            series.sum += value

    def count(self, **labels) -> int:
        with self._lock:
            series = self._series.get(self._key(labels))
            return series.count if series is not None else 0

    def sum(self, **labels) -> float:
        with self._lock:
            series = self._series.get(self._key(labels))
            return series.sum if series is not None else 0.0

    def _zero(self) -> _HistogramSeries:
        return _HistogramSeries(len(self.buckets))

    def _samples(self, key: LabelValues, series: _HistogramSeries) -> Iterable[Sample]:
        return histogram_samples(self._labels(key), self.buckets, series.bucket_counts, series.count, series.sum)


_F = TypeVar("_F", bound=_Family[Any])


class MetricsRegistry:
    """The metric families of one broker (or any component given one)."""

    def __init__(self, *, max_series: int = MAX_SERIES_PER_FAMILY):
        self._max_series = max_series
        self._families: dict[str, _Family[Any]] = {}
        self._collectors: list[Callable[[], None]] = []
        self._sources: list[Callable[[], Iterable[FamilySnapshot]]] = []
        self._lock = threading.Lock()
        self._prometheus: CollectorRegistry | None = None

    @property
    def prometheus(self) -> CollectorRegistry:
        """This registry's ``prometheus_client`` registry (with the process's CPU and memory): what ``/metrics``
        renders. Made when first asked for: setting up the process collector reads ``/proc`` (~0.1 ms), which
        the many registries of tests and the simulation never need."""
        with self._lock:
            if self._prometheus is None:
                self._prometheus = collector_registry(self.collect)
            return self._prometheus

    def counter(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Counter:
        if not name.endswith("_total"):  # the exposition formats name a counter's samples so
            raise ValueError(f"counter {name!r} must end in _total")
        return self._family(Counter, name, help_text, labels)

    def gauge(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Gauge:
        return self._family(Gauge, name, help_text, labels)

    def histogram(
        self, name: str, help_text: str, labels: tuple[str, ...] = (), buckets: tuple[float, ...] = LATENCY_BUCKETS_S
    ) -> Histogram:
        family = self._family(Histogram, name, help_text, labels, buckets=buckets)
        if family.buckets != tuple(float(b) for b in buckets):
            raise ValueError(f"histogram {name} exists with other buckets")
        return family

    def _family(self, cls: type[_F], name: str, help_text: str, labels: tuple[str, ...], **extra: Any) -> _F:
        labels = tuple(labels)
        with self._lock:
            family = self._families.get(name)
            if family is None:
                if not _NAME.fullmatch(name) or not all(_LABEL.fullmatch(label) for label in labels):
                    raise ValueError(f"metric {name!r} labels {list(labels)}: not Prometheus names")
                family = self._families[name] = cls(name, help_text, labels, self._max_series, **extra)
                return family
        if type(family) is not cls or family.label_names != labels:
            raise ValueError(f"metric {name} exists as a {family.kind} with labels {list(family.label_names)}")
        return family

    def get(self, name: str) -> _Family[Any] | None:
        return self._families.get(name)

    def value(self, name: str, **labels) -> float:
        """A counter's or gauge's value (0 when that label set never moved or the family does not exist)."""
        family = self._families.get(name)
        if family is None:
            return 0.0
        if not isinstance(family, _Scalar):
            raise ValueError(f"metric {name} is a histogram: use count() / sum()")
        return family.value(**labels)

    def add_collector(self, collector: Callable[[], None]) -> None:
        """``collector()`` runs before every ``collect()``: it sets the gauges whose values are computed."""
        self._collectors.append(collector)

    def add_source(self, source: Callable[[], Iterable[FamilySnapshot]]) -> None:
        """``source()`` gives whole families at every ``collect()``: counts a hot path keeps in plain ints, turned
        into samples only when someone reads them, and values computed from the broker's state. Its names must
        not be those of this registry's own families."""
        self._sources.append(source)

    def collect(self) -> list[FamilySnapshot]:
        """Every family, sorted by name, after running the collectors; with the sources' families."""
        for collector in list(self._collectors):
            try:
                collector()
            except Exception:  # one broken collector must not hide every other metric
                log.exception("event=metrics_collector_failed collector=%r", collector)
        with self._lock:
            families = [f.snapshot() for f in self._families.values()]
        for source in list(self._sources):
            try:
                families.extend(source())
            except Exception:  # as a collector
                log.exception("event=metrics_source_failed source=%r", source)
        return sorted(families, key=lambda f: f.name)

    def __repr__(self) -> str:
        return (
            f"<MetricsRegistry families={len(self._families)} collectors={len(self._collectors)} "
            f"sources={len(self._sources)}>"
        )
