"""Queue locks for orderly push consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ): pure, ``now_ms`` from the caller.

An orderly consumer locks each queue it was given before it consumes, so two members of a group never
consume one queue at once while a rebalance moves it. A lock belongs to (group, queue) and names one client
id; it expires ``max_live_ms`` after its last renewal (RocketMQ's ``rebalanceLockMaxLiveTime``, 60 s; clients
renew every 20 s), so a consumer that died without unlocking frees its queues by itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.common.message import MessageQueue

DEFAULT_LOCK_MAX_LIVE_MS = 60_000


@dataclass(slots=True)
class _Lock:
    client_id: str
    renewed_ms: int


class QueueLockTable:
    def __init__(self, max_live_ms: int = DEFAULT_LOCK_MAX_LIVE_MS):
        self.max_live_ms = max_live_ms
        self._locks: dict[tuple[str, MessageQueue], _Lock] = {}

    def _holder(self, group: str, mq: MessageQueue, now_ms: int) -> str | None:
        lock = self._locks.get((group, mq))
        if lock is None or now_ms - lock.renewed_ms > self.max_live_ms:
            return None
        return lock.client_id

    def try_lock(self, group: str, client_id: str, queues: list[MessageQueue], now_ms: int) -> list[MessageQueue]:
        """Lock (or renew) every queue that is free, expired or already ``client_id``'s; returns those."""
        locked = []
        for mq in queues:
            holder = self._holder(group, mq, now_ms)
            if holder is None or holder == client_id:
                self._locks[(group, mq)] = _Lock(client_id, now_ms)
                locked.append(mq)
        return locked

    def unlock(self, group: str, client_id: str, queues: list[MessageQueue]) -> None:
        """Release the queues ``client_id`` holds (others' locks are left alone)."""
        for mq in queues:
            lock = self._locks.get((group, mq))
            if lock is not None and lock.client_id == client_id:
                del self._locks[(group, mq)]

    def holder(self, group: str, mq: MessageQueue, now_ms: int) -> str | None:
        return self._holder(group, mq, now_ms)

    def expire(self, now_ms: int) -> int:
        """Forget expired locks; returns how many."""
        stale = [key for key, lock in self._locks.items() if now_ms - lock.renewed_ms > self.max_live_ms]
        for key in stale:
            del self._locks[key]
        return len(stale)

    def __repr__(self) -> str:
        return f"<QueueLockTable locks={len(self._locks)} max_live_ms={self.max_live_ms}>"
