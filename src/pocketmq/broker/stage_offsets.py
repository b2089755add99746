"""Stage offsets of staged-concurrent consumers (docs/staged.md), one record per (group, topic, queue id).

A record is ``{"commitOffset": queue offset, "stageOffsets": [{"strategy", "stageGroup", "stageOffset"}]}``:
the stage offset of every (strategy, stage group) sequence of that queue, valid at ``commitOffset``. The broker
stores it as given (the consumer owning the queue under its lock is the only writer), replacing the previous
record whole, so a (commit offset, stage offsets) pair is never torn. Keyed per queue: RIP-22's prototype
keyed its cache per topic and mixed the queues' counters.

Persisted atomically to ``<data_dir>/config/consumer_stage_offsets.json`` with the consumer offsets (on the
offset persist interval and at shutdown).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TypedDict

from pocketmq.broker.json_table import PersistedJsonTable
from pocketmq.common.errors import BadRequestError
from pocketmq.runtime.files import load_json

log = logging.getLogger(__name__)


class StageOffsetEntry(TypedDict):
    """One entry of a record's ``stageOffsets`` (the JSON's names)."""

    strategy: str | None
    stageGroup: str | None
    stageOffset: int


def checked_record(obj) -> dict:
    """The record of an UPDATE_STAGE_OFFSETS body in canonical form; BadRequestError when malformed."""
    if not isinstance(obj, dict):
        raise BadRequestError("stage offsets body must be a JSON object")
    entries = obj.get("stageOffsets") or []
    if not isinstance(entries, list):
        raise BadRequestError("stageOffsets must be a list")
    try:
        commit_offset = int(obj["commitOffset"])
        canonical: list[StageOffsetEntry] = [
            {
                "strategy": None if e.get("strategy") is None else str(e["strategy"]),
                "stageGroup": None if e.get("stageGroup") is None else str(e["stageGroup"]),
                "stageOffset": int(e["stageOffset"]),
            }
            for e in entries
        ]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise BadRequestError(
            "stage offsets need commitOffset and stageOffsets of strategy, stageGroup, stageOffset"
        ) from None
    if commit_offset < 0 or any(e["stageOffset"] < 0 for e in canonical):
        raise BadRequestError("commitOffset and stage offsets are never negative")
    return {"commitOffset": commit_offset, "stageOffsets": canonical}


class StageOffsetManager(PersistedJsonTable):
    """The stage offset table. Thread-safe; ``persist()`` (PersistedJsonTable) writes only when it changed."""

    def __init__(self, path: Path):
        super().__init__(path)
        self._table: dict[tuple[str, str, int], dict] = {}  # (group, topic, queue id) -> record

    def load(self) -> None:
        self._table.update(parse_stage_offsets(load_json(self._path, {})))
        log.info("event=stage_offsets_loaded entries=%d path=%s", len(self._table), self._path)

    def query(self, group: str, topic: str, queue_id: int) -> dict | None:
        return self._table.get((group, topic, queue_id))

    def update(self, group: str, topic: str, queue_id: int, record: dict) -> None:
        with self._lock:
            self._table[(group, topic, queue_id)] = checked_record(record)
            self._dirty = True

    def merge_forward(self, table: dict[tuple[str, str, int], dict]) -> int:
        """Take every record of ``table`` (another broker's: a slave's master) whose commit offset is ahead of
        this table's for its queue, or whose queue has none here; returns how many it took. Records committed
        here further on stay (a staged consumer that committed on the slave while its master was away)."""
        with self._lock:
            newer = {
                key: record
                for key, record in table.items()
                if key not in self._table or record["commitOffset"] > self._table[key]["commitOffset"]
            }
            self._table.update(newer)
            self._dirty = self._dirty or bool(newer)
        return len(newer)

    def remove_group(self, group: str) -> None:
        with self._lock:
            before = len(self._table)
            self._table = {k: r for k, r in self._table.items() if k[0] != group}
            self._dirty = self._dirty or len(self._table) != before

    def _document_locked(self) -> dict:
        return {
            "stageOffsetTable": [
                {"group": g, "topic": t, "queueId": q, "record": r} for (g, t, q), r in sorted(self._table.items())
            ]
        }

    def __repr__(self) -> str:
        return f"<StageOffsetManager entries={len(self._table)} dirty={self._dirty}>"


def parse_stage_offsets(document: dict) -> dict[tuple[str, str, int], dict]:
    """(group, topic, queue id) -> record of a ``StageOffsetManager.to_json`` document; ValueError when it does
    not parse."""
    try:
        return {
            (entry["group"], entry["topic"], int(entry["queueId"])): checked_record(entry["record"])
            for entry in document.get("stageOffsetTable", [])
        }
    except (KeyError, TypeError, ValueError, AttributeError, BadRequestError) as exc:
        raise ValueError(f"stage offsets do not parse: {exc}") from None
