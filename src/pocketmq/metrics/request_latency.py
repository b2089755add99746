"""Request latency per request code, kept in plain lists on the request path and read as a histogram family.

A front end's router calls ``observe(code, seconds)`` once per request: a dict lookup, a bisect and two
additions, no lock and no label set built (the broker's requests are all served on its event loop). The
``pocketmq_request_latency_seconds`` samples are made only when someone reads them (``family``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from pocketmq.metrics.samples import FamilySnapshot, histogram_samples

# Seconds: a request served from memory (100 µs) up to a held pull or a POP long poll (30 s)
REQUEST_LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class RequestLatency:
    def __init__(self, buckets: tuple[float, ...] = REQUEST_LATENCY_BUCKETS_S):
        self._buckets = buckets
        # code -> observations per bucket (the last one: above every bound), then their sum in seconds
        self._series: dict[int, list] = {}

    def observe(self, code: int, seconds: float) -> None:
        series = self._series.get(code)
        if series is None:
            series = self._series[code] = [0] * (len(self._buckets) + 1) + [0.0]
        series[bisect.bisect_left(self._buckets, seconds)] += 1
        series[-1] += seconds

    def count(self, code: int) -> int:
        series = self._series.get(code)
        return sum(series[:-1]) if series is not None else 0

    def family(self, name: str, help_text: str, labels_of: Callable[[int], dict[str, str]]) -> FamilySnapshot:
        """The histogram family of every code seen so far; ``labels_of(code)`` names a code's series."""
        samples = []
        for code, series in sorted(self._series.items()):
            counts = series[:-1]
            samples.extend(histogram_samples(labels_of(code), self._buckets, counts, sum(counts), series[-1]))
        return FamilySnapshot(name, "histogram", help_text, samples)
