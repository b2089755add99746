"""The recent samples behind the console's charts: per key (a broker's put and got totals, a group's lag), the
last ``MAX_SAMPLES`` (time, value) pairs, taken when a page polls. Rates are the differences of totals."""

from __future__ import annotations

import time
from collections import deque

MAX_SAMPLES = 120  # 10 minutes at the pages' 5 s polling
MAX_KEYS = 2_000  # a bound on memory however many groups and brokers are looked at


class History:
    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._samples: dict[str, deque[tuple[float, float]]] = {}

    def add(self, key: str, value: float) -> None:
        samples = self._samples.get(key)
        if samples is None:
            if len(self._samples) >= MAX_KEYS:
                self._samples.pop(next(iter(self._samples)))
            samples = self._samples[key] = deque(maxlen=MAX_SAMPLES)
        now = self._clock()
        if samples and now - samples[-1][0] < 0.5:
            samples.pop()  # two polls at once (two open pages): one sample
        samples.append((now, value))

    def values(self, key: str) -> list[tuple[float, float]]:
        return list(self._samples.get(key, ()))

    def rates(self, key: str) -> list[tuple[float, float]]:
        """Per second between consecutive samples of a growing total (a restart's drop shows as 0)."""
        samples = self.values(key)
        return [(t1, max(0.0, (v1 - v0) / (t1 - t0))) for (t0, v0), (t1, v1) in zip(samples, samples[1:]) if t1 > t0]
