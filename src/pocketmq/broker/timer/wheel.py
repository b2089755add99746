"""The pending timers in memory: buckets of one second, each a flat ``array('q')`` of (deliver_ms, key) pairs.

A timer is two int64s (16 bytes) in its second's bucket, the key being its queue offset in the timer topic
(where the message itself waits). Buckets are found through a heap of their seconds. Memory for N pending
timers over S distinct seconds is about ``16 N + 200 S`` bytes: a million timers spread over the whole
3-day horizon (S = 259,200) take about 70 MB, a million within one hour about 17 MB. Nothing else of a
message is held in memory: its body stays in the commit log until it is delivered.

Pure: the caller gives ``now_ms``.
"""

from __future__ import annotations

import heapq
import sys
from array import array


class TimerWheel:
    def __init__(self) -> None:
        self._buckets: dict[int, array] = {}  # second -> [deliver_ms, key, deliver_ms, key, ...]
        self._seconds: list[int] = []  # heap of the buckets' seconds (each once)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, deliver_ms: int, key: int) -> None:
        second = deliver_ms // 1000
        bucket = self._buckets.get(second)
        if bucket is None:
            bucket = self._buckets[second] = array("q")
            heapq.heappush(self._seconds, second)
        bucket.append(deliver_ms)
        bucket.append(key)
        self._count += 1

    def remove(self, deliver_ms: int, key: int) -> bool:
        """Forget the timer ``key`` due at ``deliver_ms`` (a tombstone met while rebuilding); False if unknown."""
        bucket = self._buckets.get(deliver_ms // 1000)
        if bucket is None:
            return False
        for i in range(1, len(bucket), 2):
            if bucket[i] == key and bucket[i - 1] == deliver_ms:
                del bucket[i - 1 : i + 1]
                self._count -= 1
                return True
        return False

    def remove_below(self, key: int) -> int:
        """Forget every timer whose key is below ``key`` (done elsewhere); returns how many. Only the buckets
        that hold such a key are rebuilt."""
        removed = 0
        for second, bucket in self._buckets.items():
            if bucket and min(bucket[1::2]) < key:
                keep = array("q")
                for i in range(0, len(bucket), 2):
                    if bucket[i + 1] >= key:
                        keep.extend(bucket[i : i + 2])
                removed += (len(bucket) - len(keep)) // 2
                self._buckets[second] = keep  # an empty bucket is dropped when it reaches the heap's head
        self._count -= removed
        return removed

    def next_due_ms(self) -> int | None:
        """When the earliest pending timer is due, or None when none is pending."""
        while self._seconds:
            bucket = self._buckets.get(self._seconds[0])
            if bucket:
                return min(bucket[0::2])
            self._drop_head()
        return None

    def pop_due(self, now_ms: int, limit: int) -> list[tuple[int, int]]:
        """Up to ``limit`` timers due at or before ``now_ms`` as (deliver_ms, key), earliest seconds first."""
        due: list[tuple[int, int]] = []
        while self._seconds and self._seconds[0] * 1000 <= now_ms and len(due) < limit:
            second = self._seconds[0]
            bucket = self._buckets.get(second)
            if not bucket:
                self._drop_head()
                continue
            keep = array("q")
            for i in range(0, len(bucket), 2):
                if len(due) >= limit:
                    keep.extend(bucket[i:])  # one C-level copy of the rest, not a Python loop over it
                    break
                if bucket[i] <= now_ms:
                    due.append((bucket[i], bucket[i + 1]))
                else:
                    keep.append(bucket[i])
                    keep.append(bucket[i + 1])
            if keep:
                self._buckets[second] = keep
                break  # the rest of this second is not due yet (or over the limit)
            self._drop_head()
        self._count -= len(due)
        return due

    def min_key(self) -> int | None:
        """The smallest pending key (the timer topic's oldest undelivered offset), or None."""
        smallest = None
        for bucket in self._buckets.values():
            if bucket:
                low = min(bucket[1::2])
                smallest = low if smallest is None else min(smallest, low)
        return smallest

    def memory_bytes(self) -> int:
        """Approximate bytes held: the arrays, the bucket dict and the heap (what docs/retry.md quotes)."""
        arrays = sum(sys.getsizeof(bucket) for bucket in self._buckets.values())
        return arrays + sys.getsizeof(self._buckets) + sys.getsizeof(self._seconds) + 28 * len(self._buckets)

    def _drop_head(self) -> None:
        second = heapq.heappop(self._seconds)
        self._buckets.pop(second, None)

    def __repr__(self) -> str:
        return f"<TimerWheel pending={self._count} seconds={len(self._buckets)}>"
