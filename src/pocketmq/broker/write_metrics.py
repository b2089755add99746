"""The metric families every background writer (revive, timer) counts into, by ``service`` (docs/metrics.md).

- ``pocketmq_background_write_failures_total{service,failure,reason}``: writes that did not reach the store;
  ``failure`` transient (retried after a backoff) or permanent (the message can never be written: set aside as
  a dead letter at once); ``reason`` a store status (``SERVICE_NOT_AVAILABLE``, ``MESSAGE_ILLEGAL`` ...) or an
  escape reason (``ESCAPE_DISABLED``, ``CONNECTION`` ...), ``INVALID`` for a message found unwritable before
  any write;
- ``pocketmq_background_write_endings_total{service,ending}``: ``dlq`` (a dead letter written for a message
  whose writes kept failing or were refused), ``parked`` (that dead letter could not be written either: the
  item keeps its state and tries again later), ``unwritable`` (not even a dead letter can ever be written:
  logged at ERROR with the message id, nothing else kept);
- ``pocketmq_background_passes_total{service,result}``: ``progress`` (something written), ``idle`` (nothing
  due), ``blocked`` (writes tried, none stored);
- ``pocketmq_background_pass_wait_seconds{service}``: the wait before the next pass (the interval, longer
  while blocked);
- ``pocketmq_background_write_backoff_items{service,state}``: items waiting after failed writes: ``backoff``
  (on the table) or ``parked`` (past it).
"""

from __future__ import annotations

from pocketmq.broker.write_backoff import WriteBackoff
from pocketmq.metrics import MetricsRegistry
from pocketmq.store.write_result import WriteResult

ENDING_DLQ = "dlq"
ENDING_PARKED = "parked"
ENDING_UNWRITABLE = "unwritable"
INVALID = "INVALID"  # the reason of a permanent failure found before writing


class BackgroundWriteMetrics:
    def __init__(self, registry: MetricsRegistry, service: str):
        self.service = service
        self._failures = registry.counter(
            "pocketmq_background_write_failures_total",
            "Writes of background services that did not reach the store",
            ("service", "failure", "reason"),
        )
        self._endings = registry.counter(
            "pocketmq_background_write_endings_total",
            "Background writes that ended: dead letter, parked or unwritable",
            ("service", "ending"),
        )
        self._passes = registry.counter(
            "pocketmq_background_passes_total", "Passes of background services, by result", ("service", "result")
        )
        self._pass_wait = registry.gauge(
            "pocketmq_background_pass_wait_seconds", "Wait before the next pass of a background service", ("service",)
        )
        self._backoff_items = registry.gauge(
            "pocketmq_background_write_backoff_items",
            "Items of a background service waiting after failed writes",
            ("service", "state"),
        )

    def failed(self, result: WriteResult, count: int = 1) -> None:
        self._failures.inc(count, service=self.service, failure=result.status.value.lower(), reason=result.reason)

    def ended(self, ending: str, count: int = 1) -> None:
        self._endings.inc(count, service=self.service, ending=ending)

    def passed(self, *, stored: int, failed: int, wait_ms: int) -> None:
        result = "progress" if stored else "blocked" if failed else "idle"
        self._passes.inc(service=self.service, result=result)
        self._pass_wait.set(wait_ms / 1000, service=self.service)

    def backlog(self, backoff: WriteBackoff) -> None:
        parked = backoff.parked()
        self._backoff_items.set(len(backoff) - parked, service=self.service, state="backoff")
        self._backoff_items.set(parked, service=self.service, state="parked")

    def failures(self) -> int:
        return int(sum(n for (service, _, _), n in self._failures.values().items() if service == self.service))

    def endings(self, ending: str) -> int:
        return int(self._endings.value(service=self.service, ending=ending))

    def passes(self, result: str) -> int:
        return int(self._passes.value(service=self.service, result=result))
