"""Producer fault avoidance (``send_latency_fault_enable``): brokers that were slow or failing sit out a while.

After every send the producer reports the broker's latency (or a failure). A latency at or above
``latency_max_ms[i]`` makes the broker unavailable for ``not_available_ms[i]`` (the largest i that applies);
a failure counts as ``isolation_latency_ms``. The defaults are RocketMQ 5's: latencies 50, 100, 550, 1800,
3000, 5000, 15000 ms -> 0, 0, 2, 5, 6, 10, 30 s, and a failure as 10 s of latency (-> 10 s out). When every
candidate is out, the one that comes back soonest is used rather than none.

Pure: ``now_ms`` comes from the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LatencyFaultPolicy:
    latency_max_ms: tuple[int, ...] = (50, 100, 550, 1800, 3000, 5000, 15000)
    not_available_ms: tuple[int, ...] = (0, 0, 2000, 5000, 6000, 10000, 30000)
    isolation_latency_ms: int = 10_000

    def __post_init__(self):
        if len(self.latency_max_ms) != len(self.not_available_ms):
            raise ValueError("latency_max_ms and not_available_ms need the same number of steps")
        if list(self.latency_max_ms) != sorted(self.latency_max_ms):
            raise ValueError("latency_max_ms must be increasing")

    def not_available_for_ms(self, latency_ms: float) -> int:
        for threshold, duration in zip(reversed(self.latency_max_ms), reversed(self.not_available_ms)):
            if latency_ms >= threshold:
                return duration
        return 0


@dataclass
class LatencyFaultTolerance:
    policy: LatencyFaultPolicy = field(default_factory=LatencyFaultPolicy)
    _available_from_ms: dict[str, int] = field(default_factory=dict)

    def update(self, broker_name: str, latency_ms: float, *, failed: bool, now_ms: int) -> None:
        latency = self.policy.isolation_latency_ms if failed else latency_ms
        duration = self.policy.not_available_for_ms(latency)
        if duration:
            self._available_from_ms[broker_name] = now_ms + duration
        else:
            self._available_from_ms.pop(broker_name, None)

    def is_available(self, broker_name: str, now_ms: int) -> bool:
        return self._available_from_ms.get(broker_name, 0) <= now_ms

    def filter(self, broker_names: list[str], now_ms: int) -> list[str]:
        """The available brokers; when none is, the one that comes back first (never an empty list)."""
        available = [b for b in broker_names if self.is_available(b, now_ms)]
        if available or not broker_names:
            return available
        return [min(broker_names, key=lambda b: self._available_from_ms.get(b, 0))]

    def __repr__(self) -> str:
        return f"<LatencyFaultTolerance out={dict(self._available_from_ms)}>"
