"""Backoff and ending for the writes of background services (revive, timer), as reads have (``pop.rewrite``).

Two pure parts, both driven by the caller's ``now_ms``:

- ``WriteBackoff``: per item (a CK key, a timer's queue offset) whose write failed for a passing reason. After
  failure *n* the item waits step *n* of the table (by default POP's ``pop_ck_rewrite_backoff_ms``: 10 s, 20 s,
  30 s, 1 m ... 2 h) and is left out of the service's passes meanwhile. Once the table is used up the item
  *ends*: its next attempt writes its ending (a dead letter with the reason ``WRITE_FAILED``) instead of what it
  tried to write. When that write fails too (the same full disk, the same unreachable master), the item stays
  *parked*: it keeps its state (nothing is lost) and tries its ending again after the last step of the
  table, for as long as it takes. The state is in memory: a restart starts every count again.
- ``PassPacer``: how long a service waits before its next pass. A pass that wrote something, or found nothing
  to do, is followed by the service's interval; a pass that tried writes and stored none (*blocked*) by twice
  the previous wait, up to ``max_wait_ms``: a service whose every write fails does not spin.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
DEFAULT_MAX_PASS_WAIT_MS = 30_000


@dataclass(frozen=True, slots=True)
class WriteStep:
    failures: int  # consecutive failed writes of the item, this one counted
    wait_ms: int  # until its next attempt
    ends_next: bool  # the next attempt writes the item's ending (the table is used up)
    parked: bool  # the ending itself failed: the item waits for the writes to work again


@dataclass(slots=True)
class _Failing:
    failures: int
    next_attempt_ms: int
    reason: str


class WriteBackoff(Generic[Key]):
    def __init__(self, backoff_ms: tuple[int, ...]):
        self.backoff_ms = backoff_ms
        self._failing: dict[Key, _Failing] = {}

    @property
    def backoff_ms(self) -> tuple[int, ...]:
        return self._backoff_ms

    @backoff_ms.setter
    def backoff_ms(self, table: tuple[int, ...]) -> None:
        """A new table (a dynamic config change) applies to the next failure of every item."""
        if not table or any(step <= 0 for step in table):
            raise ValueError("a write backoff needs at least one step, each > 0 ms")
        self._backoff_ms = tuple(table)

    def ready(self, key: Key, now_ms: int) -> bool:
        """Whether ``key`` may be written now (never failed, or its wait is over)."""
        failing = self._failing.get(key)
        return failing is None or failing.next_attempt_ms <= now_ms

    def ends(self, key: Key) -> bool:
        """Whether the next attempt of ``key`` writes its ending."""
        failing = self._failing.get(key)
        return failing is not None and failing.failures >= len(self._backoff_ms)

    def last_reason(self, key: Key) -> str:
        failing = self._failing.get(key)
        return failing.reason if failing is not None else ""

    def failed(self, key: Key, now_ms: int, reason: str) -> WriteStep:
        """``key``'s write failed for a passing ``reason``: when it may try again, and whether that is its ending."""
        failing = self._failing.get(key)
        parked = failing is not None and failing.failures >= len(self._backoff_ms)
        failures = 1 if failing is None else failing.failures + 1
        wait_ms = self._backoff_ms[min(failures, len(self._backoff_ms)) - 1]
        self._failing[key] = _Failing(failures, now_ms + wait_ms, reason)
        return WriteStep(failures, wait_ms, failures >= len(self._backoff_ms), parked)

    def succeeded(self, key: Key) -> None:
        self._failing.pop(key, None)

    def retain(self, keep: Callable[[Key], bool]) -> None:
        """Forget the items ``keep`` rejects (closed by another path: an ack, a master taking its work back)."""
        for key in [k for k in self._failing if not keep(k)]:
            del self._failing[key]

    def parked(self) -> int:
        """Items whose ending failed at least once and that wait for the writes to work again."""
        return sum(1 for f in self._failing.values() if f.failures > len(self._backoff_ms))

    def __len__(self) -> int:
        return len(self._failing)

    def __repr__(self) -> str:
        return f"<WriteBackoff failing={len(self._failing)} parked={self.parked()}>"


class PassPacer:
    def __init__(self, interval_ms: int, max_wait_ms: int = DEFAULT_MAX_PASS_WAIT_MS):
        if interval_ms <= 0 or max_wait_ms < interval_ms:
            raise ValueError("a pass interval is > 0 and at most the longest wait")
        self.interval_ms = interval_ms
        self.max_wait_ms = max_wait_ms
        self.wait_ms = interval_ms
        self.blocked = False  # the last pass tried writes and stored none

    def after_pass(self, *, stored: int, failed: int) -> int:
        """The wait before the next pass, given how many writes of this one were stored and how many failed
        for a passing reason."""
        self.blocked = bool(failed and not stored)
        self.wait_ms = min(self.wait_ms * 2, self.max_wait_ms) if self.blocked else self.interval_ms
        return self.wait_ms

    def reset(self) -> None:
        """Forget the blocked passes: something that may let the writes work changed (an operator's setting)."""
        self.blocked = False
        self.wait_ms = self.interval_ms
