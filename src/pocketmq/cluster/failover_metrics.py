"""Counts of a broker's failover loop (docs/metrics.md), kept in plain numbers across its changes of role (each
round has a new broker and registry: ``families`` is a metrics source the round's registry reads).

- elections: epochs granted in the group since this broker started (one per election; counted from the
  group's epoch at each read of etcd, so an election between two reads counts too), and those it won;
- time without a master: how long this broker's reads found nobody holding the group's master lease (from
  the read that found it gone to the read that found a holder; the watch makes those reads follow the change
  at once), in total and now;
- the group's epoch as last read.
"""

from __future__ import annotations

from pocketmq.metrics.samples import FamilySnapshot, Sample
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock


class FailoverStats:
    def __init__(self, clock: Clock = SYSTEM_CLOCK):
        self._clock = clock
        self.epoch = 0
        self._read = False  # a first read gives the epoch elections before this broker's start made
        self.elections = 0
        self.won = 0
        self._masterless_ms = 0.0
        self._masterless_since_ms: float | None = None

    def observed(self, epoch: int, holder_id: int | None) -> None:
        """One read of the group: its epoch and lease holder (None: nobody)."""
        if self._read and epoch > self.epoch:
            self.elections += epoch - self.epoch
        self._read = True
        self.epoch = max(self.epoch, epoch)
        now_ms = self._clock.monotonic_ms()
        if holder_id is None and self._masterless_since_ms is None:
            self._masterless_since_ms = now_ms
        elif holder_id is not None and self._masterless_since_ms is not None:
            self._masterless_ms += now_ms - self._masterless_since_ms
            self._masterless_since_ms = None

    def masterless_s(self) -> float:
        """Seconds without a master so far, the current stretch included."""
        ongoing_ms = 0.0
        if self._masterless_since_ms is not None:
            ongoing_ms = self._clock.monotonic_ms() - self._masterless_since_ms
        return (self._masterless_ms + ongoing_ms) / 1000

    def families(self) -> list[FamilySnapshot]:
        def one(name: str, kind: str, help_text: str, value: float) -> FamilySnapshot:
            return FamilySnapshot(name, kind, help_text, [Sample("", {}, float(value))])

        return [
            one(
                "pocketmq_controller_elections_total",
                "counter",
                "Epochs granted in this broker's group since it started (one per election)",
                self.elections,
            ),
            one(
                "pocketmq_controller_elections_won_total",
                "counter",
                "Elections this broker won (master tenures it began)",
                self.won,
            ),
            one(
                "pocketmq_controller_masterless_seconds_total",
                "counter",
                "Time this broker saw its group without a master (nobody holding the lease)",
                self.masterless_s(),
            ),
            one(
                "pocketmq_controller_masterless",
                "gauge",
                "1 while this broker sees its group without a master, else 0",
                self._masterless_since_ms is not None,
            ),
            one("pocketmq_controller_epoch", "gauge", "The group's epoch as this broker last read it", self.epoch),
        ]
