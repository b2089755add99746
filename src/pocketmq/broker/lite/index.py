"""Which messages of a LITE parent topic belong to which lite topic: an in-memory index over the parent's queues.

Storage (docs/architecture.md, "Lite topics share their parent's queues"): a lite topic owns no files. Its
messages are ordinary records of the parent topic, in the parent queue its name hashes to
(``lite_queue_id``), with the lite topic in property ``__LITE_TOPIC``. This index maps each lite topic to the
ascending parent queue offsets of its messages (an ``array('q')``: 8 bytes a message) and the time of its last
message. It is rebuilt from the store at start (``catch_up`` from each parent queue's min offset) and kept
current by the store's arrival notices, so it never disagrees with the commit log after a crash.

A lite topic's *offset* is a parent queue offset: stable across restarts and retention, so consumer progress
saved as one stays meaningful.
"""

from __future__ import annotations

import bisect
import zlib
from array import array


def lite_queue_id(lite_topic: str, queue_nums: int) -> int:
    """The parent queue of every message of ``lite_topic`` (one queue: its messages keep their order)."""
    return zlib.crc32(lite_topic.encode()) % max(queue_nums, 1)


class LiteQueue:
    """One lite topic: where its messages sit in its parent queue, and when the last one came."""

    __slots__ = ("queue_id", "offsets", "last_write_ms")

    def __init__(self, queue_id: int, now_ms: int):
        self.queue_id = queue_id
        self.offsets = array("q")  # parent queue offsets, ascending
        self.last_write_ms = now_ms

    def offsets_from(self, position: int, max_count: int) -> list[int]:
        i = bisect.bisect_left(self.offsets, position)
        return list(self.offsets[i : i + max_count])

    def trim_below(self, min_offset: int) -> None:
        """Forget offsets retention removed from the parent queue."""
        i = bisect.bisect_left(self.offsets, min_offset)
        if i:
            del self.offsets[:i]


class LiteIndex:
    """The lite topics of every LITE parent topic of one broker."""

    def __init__(self) -> None:
        self._parents: dict[str, dict[str, LiteQueue]] = {}
        self._indexed_to: dict[tuple[str, int], int] = {}  # (parent, queue id) -> next parent offset to index

    def lites(self, parent: str) -> dict[str, LiteQueue]:
        return self._parents.get(parent, {})

    def get(self, parent: str, lite_topic: str) -> LiteQueue | None:
        return self._parents.get(parent, {}).get(lite_topic)

    def count(self, parent: str | None = None) -> int:
        if parent is not None:
            return len(self._parents.get(parent, ()))
        return sum(len(lites) for lites in self._parents.values())

    def indexed_to(self, parent: str, queue_id: int) -> int:
        return self._indexed_to.get((parent, queue_id), 0)

    def add(self, parent: str, queue_id: int, queue_offset: int, lite_topic: str | None, now_ms: int) -> bool:
        """Index one record of a parent queue (``lite_topic`` None: a record without one, only passed over).
        True when ``lite_topic`` is new."""
        self._indexed_to[parent, queue_id] = queue_offset + 1
        if lite_topic is None:
            return False
        lites = self._parents.setdefault(parent, {})
        lite = lites.get(lite_topic)
        created = lite is None
        if lite is None:
            lite = lites[lite_topic] = LiteQueue(queue_id, now_ms)
        lite.offsets.append(queue_offset)
        lite.last_write_ms = now_ms
        return created

    def skip_to(self, parent: str, queue_id: int, queue_offset: int) -> None:
        """Start indexing a queue at ``queue_offset`` (its min offset: what lies below is gone)."""
        key = (parent, queue_id)
        self._indexed_to[key] = max(self._indexed_to.get(key, 0), queue_offset)

    def remove(self, parent: str, lite_topic: str) -> None:
        lites = self._parents.get(parent)
        if lites is not None:
            lites.pop(lite_topic, None)
            if not lites:
                del self._parents[parent]

    def parents(self) -> list[str]:
        return list(self._parents)

    def expired(self, now_ms: int, ttl_ms: int) -> list[tuple[str, str]]:
        """(parent, lite topic) of every lite topic without a message for longer than ``ttl_ms``."""
        deadline = now_ms - ttl_ms
        return [
            (parent, name)
            for parent, lites in self._parents.items()
            for name, lite in lites.items()
            if lite.last_write_ms < deadline
        ]
