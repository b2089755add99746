"""A circuit breaker per remote broker, pure (every decision takes ``now_ms``), so reads of a dead broker
fail fast instead of hammering it.

States::

    CLOSED --(failure_threshold consecutive failures)--> OPEN
    OPEN --(cool_down_ms elapsed, next request)--> HALF_OPEN: exactly one probe is let through
    HALF_OPEN --probe succeeds--> CLOSED        HALF_OPEN --probe fails--> OPEN (a fresh cool-down)
    HALF_OPEN --probe cancelled (no answer either way)--> HALF_OPEN, the next request is the probe

``admit(now_ms)`` says whether a request may go out; when it may not, ``retry_delay_ms(now_ms)`` is the
remaining cool-down (what a FAILED read with BREAKER_OPEN suggests). Every state change is logged and
counted in the metrics (``pocketmq_breaker_state`` 0 closed / 1 half-open / 2 open, and
``pocketmq_breaker_transitions_total{broker,to}``; docs/metrics.md).

The settings are read at each decision, so ``BreakerBoard.configure`` (a dynamic config change) applies to
breakers that exist as well as to those made later.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from pocketmq.metrics import MetricsRegistry

log = logging.getLogger(__name__)


class BreakerState(enum.Enum):
    CLOSED = "CLOSED"
    OPEN = "OPEN"
    HALF_OPEN = "HALF_OPEN"


STATE_GAUGE_VALUES = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    failure_threshold: int = 5  # consecutive failures that open the breaker
    cool_down_ms: int = 10_000  # how long it stays open before one probe

    def __post_init__(self) -> None:
        if self.failure_threshold < 1 or self.cool_down_ms < 0:
            raise ValueError("failure_threshold must be >= 1 and cool_down_ms >= 0")


class CircuitBreaker:
    def __init__(
        self, name: str, settings: BreakerSettings = BreakerSettings(), *, metrics: MetricsRegistry | None = None
    ):
        self.name = name
        self.settings = settings
        metrics = metrics if metrics is not None else MetricsRegistry()
        self._state_gauge = metrics.gauge(
            "pocketmq_breaker_state",
            "Circuit breaker state per remote broker: 0 closed, 1 half-open, 2 open",
            ("broker",),
        )
        self._transitions = metrics.counter(
            "pocketmq_breaker_transitions_total", "Circuit breaker state changes per remote broker", ("broker", "to")
        )
        self.state = BreakerState.CLOSED
        self._state_gauge.set(STATE_GAUGE_VALUES[self.state], broker=name)
        self.consecutive_failures = 0
        self._opened_at_ms = 0
        self._probe_in_flight = False

    def admit(self, now_ms: int) -> bool:
        """Whether a request may be sent now; in HALF_OPEN only the one probe is admitted."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN:
            if now_ms - self._opened_at_ms < self.settings.cool_down_ms:
                return False
            self._change(BreakerState.HALF_OPEN, "cool-down over: one probe")
        if self._probe_in_flight:
            return False
        self._probe_in_flight = True
        return True

    def retry_delay_ms(self, now_ms: int) -> int:
        """How long until a request may be admitted again (0 when it may now, or a probe is out: its answer
        decides, so callers should look again soon)."""
        if self.state is not BreakerState.OPEN:
            return 0
        return max(0, self._opened_at_ms + self.settings.cool_down_ms - now_ms)

    def record_success(self, now_ms: int) -> None:
        self.consecutive_failures = 0
        self._probe_in_flight = False
        if self.state is not BreakerState.CLOSED:
            self._change(BreakerState.CLOSED, "request succeeded")

    def record_failure(self, now_ms: int, reason: str = "") -> None:
        self.consecutive_failures += 1
        self._probe_in_flight = False
        if self.state is BreakerState.HALF_OPEN or (
            self.state is BreakerState.CLOSED and self.consecutive_failures >= self.settings.failure_threshold
        ):
            self._opened_at_ms = now_ms
            self._change(BreakerState.OPEN, f"{self.consecutive_failures} consecutive failures, last: {reason}")

    def release_probe(self) -> None:
        """A request that went out ended without a verdict (its task was cancelled): it says nothing about the
        broker, so the state stays, and in HALF_OPEN the next request may probe (else none ever would again)."""
        self._probe_in_flight = False

    def _change(self, state: BreakerState, why: str) -> None:
        log.warning(
            "event=breaker_state_changed broker=%s from=%s to=%s why=%s", self.name, self.state.value, state.value, why
        )
        self.state = state
        self._state_gauge.set(STATE_GAUGE_VALUES[state], broker=self.name)
        self._transitions.inc(broker=self.name, to=state.value)

    def __repr__(self) -> str:
        return f"<CircuitBreaker {self.name} {self.state.value} failures={self.consecutive_failures}>"


class BreakerBoard:
    """One breaker per remote broker name, created on first use with the shared settings; ``metrics`` is the
    owning broker's registry (remote readers count their reads there too)."""

    def __init__(self, settings: BreakerSettings = BreakerSettings(), *, metrics: MetricsRegistry | None = None):
        self.settings = settings
        self.metrics = metrics if metrics is not None else MetricsRegistry()
        self._breakers: dict[str, CircuitBreaker] = {}

    breaker_class = CircuitBreaker  # the simulation's injected bug swaps in a breaker that never refuses

    def get(self, broker_name: str) -> CircuitBreaker:
        breaker = self._breakers.get(broker_name)
        if breaker is None:
            breaker = self._breakers[broker_name] = self.breaker_class(broker_name, self.settings, metrics=self.metrics)
        return breaker

    def configure(self, settings: BreakerSettings) -> None:
        """New settings for every breaker, existing and future (a dynamic config change)."""
        self.settings = settings
        for breaker in self._breakers.values():
            breaker.settings = settings

    def states(self) -> dict[str, BreakerState]:
        return {name: b.state for name, b in sorted(self._breakers.items())}
