"""The topic table's journal: each change since the table's file was last written, one fsynced line.

Rewriting ``topics.json`` on every change costs the whole table's bytes and an fsync: about 100 ms per create at
10,000 topics. A change is appended instead to ``topics.json.journal`` as one JSON line,
``{"v": <table version>, "topic": <name>, "config": <its TopicConfig JSON, null when deleted>}``, fsynced
before the change is made (the change is as durable as the old rewrite made it). The table's owner folds the
journal into the file now and then (``due``): the file is written atomically with the new version, then the
journal removed; a crash between the two leaves lines the file already holds, which the load skips by version.

Only the last line can be torn (a crash during its append, before the change was made or answered): the load
cuts it off. An append that failed (a full disk) may have left a part of its line, so after one the next change
rewrites the file instead of appending behind it.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from pocketmq.runtime.files import append_durably, remove_durably

log = logging.getLogger(__name__)

MIN_LINES_BEFORE_FOLD = 64
TABLE_SHARE_BEFORE_FOLD = 8  # fold once the journal has an eighth as many lines as the table has topics


class TopicJournal:
    def __init__(self, table_path: Path):
        self.path = table_path.with_name(table_path.name + ".journal")
        self._lines = 0
        self._suspect = False  # an append failed: its part of a line may be at the end

    def due(self, topics: int) -> bool:
        """Whether the next change should rewrite the table's file (and ``clear`` the journal)."""
        return self._suspect or self._lines >= max(MIN_LINES_BEFORE_FOLD, topics // TABLE_SHARE_BEFORE_FOLD)

    def append(self, version: int, topic: str, config_json: dict | None) -> None:
        """Journal one change, durably; OSError when it could not be (the change must then not be made)."""
        line = json.dumps({"v": version, "topic": topic, "config": config_json}, sort_keys=True).encode() + b"\n"
        try:
            append_durably(self.path, line)
        except OSError:
            self._suspect = True
            raise
        self._lines += 1

    def clear(self) -> None:
        """The table's file now holds every change: remove the journal. A failure is logged, and the next change
        rewrites the file again (the lines left are older than the file, skipped at load)."""
        try:
            remove_durably(self.path)
        except OSError as exc:
            self._suspect = True
            log.warning("event=topic_journal_unremovable path=%s error=%r", self.path, exc)
            return
        self._lines = 0
        self._suspect = False

    def replay(self) -> list[tuple[int, str, dict | None]]:
        """The journaled changes in order, as (version, topic, config JSON or None for a delete). A torn or
        unreadable line ends the journal: it is cut off there (nothing after it was made)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        changes: list[tuple[int, str, dict | None]] = []
        good_bytes = 0
        for line in data.splitlines(keepends=True):
            change = _parse(line) if line.endswith(b"\n") else None
            if change is None:
                break
            changes.append(change)
            good_bytes += len(line)
        if good_bytes < len(data):
            log.warning(
                "event=topic_journal_tail_cut path=%s kept_lines=%d dropped_bytes=%d",
                self.path,
                len(changes),
                len(data) - good_bytes,
            )
            os.truncate(self.path, good_bytes)
        self._lines = len(changes)
        return changes


def _parse(line: bytes) -> tuple[int, str, dict | None] | None:
    try:
        obj = json.loads(line)
        version, topic, config = int(obj["v"]), str(obj["topic"]), obj["config"]
    except (ValueError, KeyError, TypeError):
        return None
    if config is not None and not isinstance(config, dict):
        return None
    return version, topic, config
