"""Known bugs a test injects into the *simulated* system to prove that each checker can fail.

- ``sync_ack_before_replication``: the master answers SEND_OK once the record is flushed locally, without
  waiting for a slave (caught by the SYNC-durability checker).
- ``endless_ck_rewrite``: a CK rewrite policy that never ends (RocketMQ's rewrite-forever; caught by the
  rewrite-bound checker).
- ``breaker_ignored``: breakers that count failures but always let reads through (caught by the breaker
  checker).
- ``drop_ending``: ``CkEnding.DROP`` after the last rewrite (RocketMQ's silent drop; caught by the POP
  outcome checker, since a dropped message is neither acked, redelivered nor dead-lettered).
"""

from __future__ import annotations

from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.pop.rewrite import CkEnding, CkRewritePolicy, End, Rewrite
from pocketmq.cluster.breaker import BreakerBoard, CircuitBreaker


class EndlessCkRewritePolicy(CkRewritePolicy):
    def decide(self, ck: PopCheckpoint, queue_offset: int, now_ms: int, *, min_wait_ms: int = 0) -> Rewrite | End:
        step = super().decide(ck, queue_offset, now_ms, min_wait_ms=min_wait_ms)
        if isinstance(step, Rewrite):
            return step
        wait_ms = max(self.backoff_ms[-1], min_wait_ms)  # past the table: rewrite again with its last step
        return Rewrite(
            ck.single(
                queue_offset, invisible_time_ms=now_ms + wait_ms - ck.pop_time_ms, rewrite_count=ck.rewrite_count + 1
            ),
            wait_ms,
        )


class _IgnoredBreaker(CircuitBreaker):
    def admit(self, now_ms: int) -> bool:
        super().admit(now_ms)
        return True


class IgnoredBreakerBoard(BreakerBoard):
    breaker_class = _IgnoredBreaker


def ending(bugs) -> CkEnding:
    return CkEnding.DROP if "drop_ending" in bugs else CkEnding.DEAD_LETTER
