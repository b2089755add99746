"""What revive does with a CK message it could not read: rewrite it with backoff, or end it.

A message behind a CK that could not be read for a passing reason (a FAILED read with ``need_retry``) is not
revived now: its CK is rewritten as a one-message CK that keeps the pop time, counts one more rewrite, and
comes back after the next step of the backoff table (RocketMQ 5.3's ``ckRewriteIntervalsInSeconds``: 10 s,
20 s, 30 s, 1 m, 2 m, 3 m ... 10 m, 20 m, 30 m, 1 h, 2 h). When the table is used up the CK *ends*: by default
the message goes to the DLQ with the reason (so nothing is lost silently); ``ending=DROP`` drops it with an
error log instead. There is no "forever" setting: every CK ends after ``len(backoff_ms)`` rewrites, and sooner
when ``max_total_ms`` is set: a CK ends at its first failed read ``max_total_ms`` or more after its pop time
(which every rewrite keeps, so the time counts from the message's pop, invisible time included); the wait before
that read is cut so that it comes at that time, not a whole (perhaps 2 h) step later.

Pure: the caller gives ``now_ms`` and gets back the decision.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pocketmq.broker.pop.checkpoint import PopCheckpoint

_S = 1000
DEFAULT_CK_REWRITE_BACKOFF_MS = tuple(
    s * _S for s in (10, 20, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)


class CkEnding(enum.Enum):
    DEAD_LETTER = "dlq"  # the message (or a reference to it) goes to %DLQ%<group> with the reason
    DROP = "drop"  # logged at ERROR and dropped


@dataclass(frozen=True, slots=True)
class Rewrite:
    checkpoint: PopCheckpoint  # the one-message CK to write
    wait_ms: int  # how long until it revives


@dataclass(frozen=True, slots=True)
class End:
    ending: CkEnding
    rewrite_count: int


@dataclass(frozen=True, slots=True)
class CkRewritePolicy:
    backoff_ms: tuple[int, ...] = DEFAULT_CK_REWRITE_BACKOFF_MS
    ending: CkEnding = CkEnding.DEAD_LETTER
    max_total_ms: int = 0  # 0: no limit but the table's length

    def __post_init__(self):
        if not self.backoff_ms or any(step <= 0 for step in self.backoff_ms):
            raise ValueError("the CK rewrite backoff needs at least one step, each > 0 ms")
        if self.max_total_ms < 0:
            raise ValueError("the CK rewrite maximum total time is not negative (0: no limit)")

    @property
    def max_rewrites(self) -> int:
        return len(self.backoff_ms)

    def decide(self, ck: PopCheckpoint, queue_offset: int, now_ms: int, *, min_wait_ms: int = 0) -> Rewrite | End:
        """The next step for the unread message at ``queue_offset`` of ``ck``.

        ``min_wait_ms`` is a floor from the failed read (e.g. a remote broker's breaker cool-down): the CK
        waits at least that long, whatever the table (or ``max_total_ms``) says.
        """
        step_ms = self.backoff_ms[ck.rewrite_count] if ck.rewrite_count < self.max_rewrites else 0
        if self.max_total_ms:
            left_ms = ck.pop_time_ms + self.max_total_ms - now_ms
            step_ms = min(step_ms, left_ms) if left_ms > 0 else 0
        if step_ms <= 0:
            return End(self.ending, ck.rewrite_count)
        wait_ms = max(step_ms, min_wait_ms)
        # The pop time stays (the CK's identity and the message's first pop); the invisible time grows so that
        # the revive time is now + wait.
        invisible_ms = max(now_ms + wait_ms - ck.pop_time_ms, 0)
        return Rewrite(
            ck.single(queue_offset, invisible_time_ms=invisible_ms, rewrite_count=ck.rewrite_count + 1), wait_ms
        )
