"""Consumer offsets: the next queue offset each group will consume, per (group, topic, queue id).

Commits only move an offset forward (a late or duplicated commit never rewinds a group); ``reset`` is the
one way back (admin reset). The table lives in memory and is persisted atomically
(``<data_dir>/config/consumer_offsets.json``) by the broker on an interval and at shutdown, so a crash
loses at most one interval of commits: consumers then see some messages again, never skip any. The offsets
of normal and staged POP lose nothing: at start the broker moves them past every CK in the revive queues
(``ReviveQueue.raise_pop_offsets``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from pocketmq.broker.json_table import PersistedJsonTable
from pocketmq.runtime.files import load_json

log = logging.getLogger(__name__)

_KEY_SEPARATOR = "@"  # RocketMQ's "topic@group" key of its offset table


class ConsumerOffsetManager(PersistedJsonTable):
    """The offset table. Thread-safe; ``persist()`` writes only when something changed."""

    def __init__(self, path: Path):
        super().__init__(path)
        self._table: dict[tuple[str, str], dict[int, int]] = {}  # (topic, group) -> queue id -> queue offset

    def load(self) -> None:
        data = load_json(self._path, {})
        for key, queues in data.get("offsetTable", {}).items():
            topic, _, group = key.partition(_KEY_SEPARATOR)
            self._table[(topic, group)] = {int(q): int(o) for q, o in queues.items()}
        log.info("event=offsets_loaded entries=%d path=%s", len(self._table), self._path)

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when the group never committed one for this queue."""
        return self._table.get((topic, group), {}).get(queue_id)

    def commit(self, group: str, topic: str, queue_id: int, queue_offset: int) -> bool:
        """Store ``queue_offset`` if it is ahead of what is stored; returns whether it moved.

        Negative offsets are ignored (some 4.x clients send -1 for "nothing consumed yet").
        """
        if queue_offset < 0:
            return False
        with self._lock:
            queues = self._table.setdefault((topic, group), {})
            current = queues.get(queue_id)
            if current is not None and current >= queue_offset:
                return False
            queues[queue_id] = queue_offset
            self._dirty = True
            return True

    def reset(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        """Set the offset whatever it was (admin reset, also backwards)."""
        if queue_offset < 0:
            raise ValueError("a queue offset is never negative")
        with self._lock:
            self._table.setdefault((topic, group), {})[queue_id] = queue_offset
            self._dirty = True

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self._table.get((topic, group), {}))

    def table(self) -> dict[tuple[str, str], dict[int, int]]:
        """(topic, group) -> queue id -> committed offset: a copy of the whole table."""
        with self._lock:
            return {key: dict(queues) for key, queues in self._table.items()}

    def topics_of_group(self, group: str) -> list[str]:
        return sorted(t for (t, g) in self._table if g == group)

    def groups_of_topic(self, topic: str) -> list[str]:
        return sorted(g for (t, g) in self._table if t == topic)

    def remove_group(self, group: str) -> None:
        with self._lock:
            for key in [k for k in self._table if k[1] == group]:
                del self._table[key]
                self._dirty = True

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self._table if k[0] == topic]:
                del self._table[key]
                self._dirty = True

    def _document_locked(self) -> dict:
        return {"offsetTable": self._snapshot_locked()}

    def snapshot(self) -> dict[str, dict[str, int]]:
        """The table in RocketMQ's offsetTable shape: {"topic@group": {"queueId": queue offset}}."""
        with self._lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> dict[str, dict[str, int]]:
        return {
            f"{t}{_KEY_SEPARATOR}{g}": {str(q): o for q, o in queues.items()} for (t, g), queues in self._table.items()
        }

    def __repr__(self) -> str:
        return f"<ConsumerOffsetManager entries={len(self._table)} dirty={self._dirty}>"


async def persist_behind_commit_log(table: PersistedJsonTable, store, timeout_ms: int) -> bool:
    """Write ``table`` if it changed, once the commit log is durable up to where it ended when the snapshot was
    taken; returns whether it wrote.

    A POP consumer offset moves at pop time, once its CK is appended: written to disk before the CK is
    (ASYNC_FLUSH, then a power loss), it would skip the popped messages for good, with no CK left to revive
    them. One group-commit round is asked for at once (``store.wait_durable``); when it does not come in
    ``timeout_ms`` the table stays dirty for the next round.
    """
    document = table.take()
    if document is None:
        return False
    log_end = store.max_phys_offset  # read after the snapshot: every CK it stands on is below
    if not await store.wait_durable(log_end, timeout_ms):
        table.keep_dirty()
        log.warning("event=offsets_persist_deferred reason=commit_log_not_durable log_end=%d", log_end)
        return False
    table.write(document)
    return True
