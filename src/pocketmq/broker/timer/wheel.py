"""The pending timers in memory: buckets of one second, each a flat ``array('q')`` of (deliver_ms, key) pairs,
and a heap of the timers of the seconds that came due.

A timer is two int64s (16 bytes) in its second's bucket, the key being its queue offset in the timer topic
(where the message itself waits). Buckets are found through a heap of their seconds. Memory for N pending
timers over S distinct seconds is about ``16 N + 200 S`` bytes: a million timers spread over the whole
3-day horizon (S = 259,200) take about 70 MB, a million within one hour about 17 MB. Nothing else of a
message is held in memory: its body stays in the commit log until it is delivered.

When the earliest second is reached (``next_due_ms`` or ``pop_due`` looks at it) its bucket is *opened*: its
timers move into the *near* heap of (deliver_ms, key) tuples (about 100 bytes a timer, for one second's
timers), and timers added for an opened second go there too. So taking the due timers costs a heap step
each, and the next due time one look, however many timers share the second: the delivery loop asks both on
every round, and rounds come as often as timers come due (scanning a bucket of 10,000 timers each round cost
more than delivering them).

Pure: the caller gives ``now_ms``.
"""

from __future__ import annotations

import heapq
import sys
from array import array
from collections.abc import Iterator

_NEAR_TIMER_BYTES = 120  # a (deliver_ms, key) tuple of two large ints: 56 + 2 x 32


class TimerWheel:
    def __init__(self) -> None:
        self._buckets: dict[int, array] = {}  # second -> [deliver_ms, key, deliver_ms, key, ...]
        self._seconds: list[int] = []  # heap of the buckets' seconds (each once)
        self._near: list[tuple[int, int]] = []  # heap of the timers of the opened seconds
        self._opened_until = -1  # the last second opened: every later second is in a bucket
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, deliver_ms: int, key: int) -> None:
        second = deliver_ms // 1000
        if second <= self._opened_until:
            heapq.heappush(self._near, (deliver_ms, key))
            self._count += 1
            return
        bucket = self._buckets.get(second)
        if bucket is None:
            bucket = self._buckets[second] = array("q")
            heapq.heappush(self._seconds, second)
        bucket.append(deliver_ms)
        bucket.append(key)
        self._count += 1

    def add_bucket(self, second: int, pairs: array) -> None:
        """Add the timers of one second at once, ``pairs`` being [deliver_ms, key, ...] all due in ``second``
        (a saved wheel loaded at start, ``timer.snapshot``)."""
        if second <= self._opened_until:
            for i in range(0, len(pairs), 2):
                self.add(pairs[i], pairs[i + 1])
            return
        bucket = self._buckets.get(second)
        if bucket is None:
            self._buckets[second] = array("q", pairs)
            heapq.heappush(self._seconds, second)
        else:
            bucket.extend(pairs)
        self._count += len(pairs) // 2

    def buckets(self) -> Iterator[tuple[int, array]]:
        """Every pending timer, grouped by second as ``add_bucket`` takes them (the near heap's too)."""
        near: dict[int, array] = {}
        for deliver_ms, key in self._near:
            near.setdefault(deliver_ms // 1000, array("q")).extend((deliver_ms, key))
        yield from near.items()
        yield from self._buckets.items()

    def remove(self, deliver_ms: int, key: int) -> bool:
        """Forget the timer ``key`` due at ``deliver_ms`` (a tombstone met while rebuilding); False if unknown."""
        if deliver_ms // 1000 <= self._opened_until:
            try:
                self._near.remove((deliver_ms, key))
            except ValueError:
                return False
            heapq.heapify(self._near)
            self._count -= 1
            return True
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
        near = [timer for timer in self._near if timer[1] >= key]
        removed = len(self._near) - len(near)
        if removed:
            heapq.heapify(near)
            self._near = near
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
        if not self._near:
            self._open_head()
        return self._near[0][0] if self._near else None

    def pop_due(self, now_ms: int, limit: int) -> list[tuple[int, int]]:
        """Up to ``limit`` timers due at or before ``now_ms`` as (deliver_ms, key), earliest first."""
        due: list[tuple[int, int]] = []
        near = self._near
        while len(due) < limit:
            if not near:
                if not self._seconds or self._seconds[0] * 1000 > now_ms or not self._open_head():
                    break
                near = self._near
            if near[0][0] > now_ms:
                break
            due.append(heapq.heappop(near))
        self._count -= len(due)
        return due

    def _open_head(self) -> bool:
        """Move the timers of the earliest second that has any into the near heap (empty); False when none."""
        while self._seconds:
            second = heapq.heappop(self._seconds)
            bucket = self._buckets.pop(second, None)
            self._opened_until = second
            if bucket:
                self._near = list(zip(bucket[0::2], bucket[1::2]))
                heapq.heapify(self._near)
                return True
        return False

    def min_key(self) -> int | None:
        """The smallest pending key (the timer topic's oldest undelivered offset), or None."""
        smallest = min((key for _, key in self._near), default=None)
        for bucket in self._buckets.values():
            if bucket:
                low = min(bucket[1::2])
                smallest = low if smallest is None else min(smallest, low)
        return smallest

    def memory_bytes(self) -> int:
        """Approximate bytes held: the arrays, the bucket dict and the heap (what docs/retry.md quotes)."""
        arrays = sum(sys.getsizeof(bucket) for bucket in self._buckets.values())
        near = sys.getsizeof(self._near) + _NEAR_TIMER_BYTES * len(self._near)
        return arrays + near + sys.getsizeof(self._buckets) + sys.getsizeof(self._seconds) + 28 * len(self._buckets)

    def __repr__(self) -> str:
        return f"<TimerWheel pending={self._count} seconds={len(self._buckets)}>"
