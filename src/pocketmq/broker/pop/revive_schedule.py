"""When revive wakes, and whether a wake-up is a full pass (every revive queue) or visits only the queues with a
CK due.

- A *full pass* every ``interval_ms`` (the first one ``interval_ms`` after start): every revive queue is caught
  up (that is how revive learns of new CKs), its due CKs are handed back, CKs left for later (waiting after a
  failed write, held by an ack being written, handled elsewhere) are tried again, and the revive offsets are
  committed.
- In between, a *wake-up* at the first ``tick_ms`` boundary at or after the earliest revive time the ledgers
  know of: it visits only the revive queues that have a CK due by then, so its work is that of the CKs due,
  not of the whole set of revive queues. CKs due within one tick share a wake-up (and its two writes per revive
  queue).

A CK is read into its ledger by the first full pass after it was appended, or earlier by the wake-up of its
tick: whoever appends a CK tells its revive queue its revive time (``ReviveQueue.expect``), the caller counts that
time with the ledgers' (``ReviveQueue.next_revive_time_ms``), and a CK whose tick comes before the planned
wake-up wakes revive at once to plan again (``wakes_earlier``; not before the first full pass). So an invisible
time shorter than ``interval_ms`` comes back within a tick too.

Pure: the caller gives ``now_ms`` and the ledgers' earliest revive time; the caller's pacing after blocked or
failed passes (``write_backoff.PassPacer``, ``runtime.periodic``) comes before this.
"""

from __future__ import annotations

REVIVE_TICK_MS = 10


class ReviveSchedule:
    def __init__(self, interval_ms: int, tick_ms: int = REVIVE_TICK_MS):
        if interval_ms <= 0 or tick_ms <= 0:
            raise ValueError("a revive interval and tick are > 0 ms")
        self.interval_ms = interval_ms
        self.tick_ms = tick_ms
        self._last_full_ms: int | None = None  # when the last full pass started; None before the first
        self._full_next = False

    def full_pass(self, now_ms: int) -> bool:
        """Whether the wake-up at ``now_ms`` is a full pass (the first, an interval after the last, or asked for);
        it is counted as one when so."""
        if self._full_next or self._last_full_ms is None or now_ms - self._last_full_ms >= self.interval_ms:
            self._last_full_ms = now_ms
            self._full_next = False
            return True
        return False

    def want_full_pass(self) -> None:
        """Make the next wake-up a full pass: something changed that may let the CKs left for later go now (an
        operator's setting)."""
        self._full_next = True

    def wait_ms(self, now_ms: int, next_due_ms: int | None) -> int:
        """After a pass: until the next wake-up, given the earliest revive time the ledgers know of and have not
        listed as due (None: no CK waits)."""
        if self._last_full_ms is None:
            return self.interval_ms
        wait_ms = self._last_full_ms + self.interval_ms - now_ms
        if next_due_ms is not None:
            wait_ms = min(wait_ms, self.tick_of(next_due_ms) - now_ms)
        return max(wait_ms, 0)

    def tick_of(self, revive_time_ms: int) -> int:
        """The wake-up a CK due at ``revive_time_ms`` comes back in: the first tick at or after it."""
        return -(-revive_time_ms // self.tick_ms) * self.tick_ms

    def wakes_earlier(self, revive_time_ms: int, planned_ms: int) -> bool:
        """Whether a CK due at ``revive_time_ms``, appended since the wake-up at ``planned_ms`` was planned, needs
        an earlier one: its tick comes first. Never before the first full pass, the only wake-up planned until
        then (it reads the revive queues after a start, as ``wait_ms`` says)."""
        return self._last_full_ms is not None and self.tick_of(revive_time_ms) < planned_ms

    def __repr__(self) -> str:
        return f"<ReviveSchedule interval_ms={self.interval_ms} tick_ms={self.tick_ms} last_full={self._last_full_ms}>"
