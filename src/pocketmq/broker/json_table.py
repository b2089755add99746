"""``PersistedJsonTable``: a broker table kept in memory under a lock and written atomically when it changed.

Subclasses mutate under ``self._lock``, set ``self._dirty``, and give the JSON document to write
(``_document_locked``, called with the lock held). ``persist()`` writes it outside the lock; a failed write
keeps the table dirty so the next interval tries again. ``take`` and ``write`` are its two halves, for a caller
that must wait for something between the snapshot and the write (consumer offsets wait for the commit log).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pocketmq.runtime.files import atomic_write_json


class PersistedJsonTable:
    def __init__(self, path: Path):
        self._path = Path(path)
        self._lock = threading.Lock()
        self._dirty = False

    def _document_locked(self) -> Any:
        raise NotImplementedError

    def to_json(self) -> Any:
        """The table as its file holds it (what the metadata sync sends slaves)."""
        with self._lock:
            return self._document_locked()

    def persist(self) -> bool:
        """Write the table if it changed since the last write; returns whether it wrote."""
        document = self.take()
        if document is None:
            return False
        self.write(document)
        return True

    def take(self) -> Any:
        """The document to write, or None when the table did not change since the last one taken; the table
        counts as clean until ``write`` fails or ``keep_dirty`` is called."""
        with self._lock:
            if not self._dirty:
                return None
            self._dirty = False
            return self._document_locked()

    def write(self, document: Any) -> None:
        try:
            atomic_write_json(self._path, document)
        except OSError:
            self.keep_dirty()  # try again next interval
            raise

    def keep_dirty(self) -> None:
        """A taken document was not written: the next ``persist`` writes the table again."""
        with self._lock:
            self._dirty = True
