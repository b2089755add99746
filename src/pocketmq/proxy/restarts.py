"""When ``pocketmq proxy``'s supervisor starts a worker again after it died: at once after a worker that had
served a while, after a doubling wait when it died soon after its start. A worker that cannot run at all (its
brokers refuse it, its port is gone) is then started again every ``MAX_DELAY_S``, not in a busy loop."""

from __future__ import annotations

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 30.0
STABLE_RUN_S = 60.0  # a worker that ran this long died of something new: started again at once


class RestartBackoff:
    """One worker slot's waits."""

    def __init__(self) -> None:
        self._delay_s = 0.0

    def next_delay_s(self, ran_s: float) -> float:
        """The wait before starting again the slot's worker, which died after ``ran_s`` seconds."""
        if ran_s >= STABLE_RUN_S:
            self._delay_s = 0.0
        else:
            self._delay_s = min(MAX_DELAY_S, max(FIRST_DELAY_S, self._delay_s * 2))
        return self._delay_s
