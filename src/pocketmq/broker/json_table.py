"""``PersistedJsonTable``: a broker table kept in memory under a lock and written atomically when it changed.

Subclasses mutate under ``self._lock``, set ``self._dirty``, and give the JSON document to write
(``_document_locked``, called with the lock held). ``persist()`` writes it outside the lock; a failed write
keeps the table dirty so the next interval tries again.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pocketmq.store.metadata import atomic_write_json


class PersistedJsonTable:
    def __init__(self, path: Path):
        self._path = Path(path)
        self._lock = threading.Lock()
        self._dirty = False

    def _document_locked(self) -> Any:
        raise NotImplementedError

    def persist(self) -> bool:
        """Write the table if it changed since the last write; returns whether it wrote."""
        with self._lock:
            if not self._dirty:
                return False
            document = self._document_locked()
            self._dirty = False
        try:
            atomic_write_json(self._path, document)
        except OSError:
            self._dirty = True  # try again next interval
            raise
        return True
