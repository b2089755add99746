"""The message index: find records by the producer's message id (UNIQ_KEY) or by a business key (KEYS).

Design. Every key of a record (its UNIQ_KEY and each space-separated word of its KEYS) is hashed together with
the record's topic (``crc32c(topic + "\\x01" + key)``, 32 bits) and the record's phys offset is remembered
under that hash:

- in memory: ``dict[key_hash] -> phys_offset | list[phys_offset]`` (ascending; a plain int while a hash has
  one record, the common case for message ids, which keeps memory near 100 bytes per key);
- on disk: append-only files of 12-byte entries, one file per commit log segment, named like it, in
  ``<data_dir>/index/``::

      entry   uint32 key_hash   int64 phys_offset          (big-endian)

  Entries of a file are in ascending phys offset order. Deleting a commit log segment (retention) deletes its
  index file and forgets its entries.

A hash only nominates candidates: queries read each candidate record from the commit log and keep it only
when its topic and key really match, so hash collisions cost a record read, never a wrong answer. The time
range filter uses the store timestamp of the record.

Durability. Entries are buffered in memory and written + fsynced by the store's flush (``take_pending`` on
the loop, ``write_pending`` in the worker thread) before a checkpoint covering them is saved. At start,
``load(until_phys_offset)`` reads the files, drops entries at or past the recovery point (and a torn last
entry), and the store re-dispatches the commit log from there, re-adding those entries.

Thread safety: ``add``, queries and ``load`` run on the event loop; ``write_pending`` runs in the flush
worker thread on entries already taken from the loop.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterable
from pathlib import Path

from crc32c import crc32c

from pocketmq.store.segment import list_segment_bases, segment_name

ENTRY = struct.Struct(">Iq")
ENTRY_SIZE = ENTRY.size  # 12


def key_hash(topic: str, key: str) -> int:
    return crc32c(f"{topic}\x01{key}".encode())


class MessageIndex:
    def __init__(self, folder: Path, commit_log_segment_bytes: int):
        self.folder = Path(folder)
        self.segment_bytes = commit_log_segment_bytes
        self._by_hash: dict[int, int | list[int]] = {}
        self._pending: dict[int, bytearray] = {}  # index file base -> entries not yet written
        self.entries = 0
        self.folder.mkdir(parents=True, exist_ok=True)

    # ---- adding ----------------------------------------------------------------------------------------

    def add(self, topic: str, keys: Iterable[str], phys_offset: int) -> None:
        """Index one record under each of ``keys`` (records arrive in ascending phys offset order)."""
        base = phys_offset - phys_offset % self.segment_bytes
        pending = self._pending.get(base)
        if pending is None:
            pending = self._pending[base] = bytearray()
        for key in keys:
            h = key_hash(topic, key)
            self._remember(h, phys_offset)
            pending += ENTRY.pack(h, phys_offset)

    def _remember(self, h: int, phys_offset: int) -> None:
        known = self._by_hash.get(h)
        if known is None:
            self._by_hash[h] = phys_offset
        elif isinstance(known, list):
            if known[-1] == phys_offset:  # a key listed twice in one record counts once
                return
            known.append(phys_offset)
        elif known != phys_offset:
            self._by_hash[h] = [known, phys_offset]
        else:
            return
        self.entries += 1

    # ---- querying --------------------------------------------------------------------------------------

    def candidates(self, topic: str, key: str) -> list[int]:
        """Phys offsets of the records that may carry ``key`` in ``topic``, ascending."""
        known = self._by_hash.get(key_hash(topic, key))
        if known is None:
            return []
        return list(known) if isinstance(known, list) else [known]

    # ---- durability ------------------------------------------------------------------------------------

    def take_pending(self) -> dict[int, bytes]:
        pending = {base: bytes(data) for base, data in self._pending.items()}
        self._pending.clear()
        return pending

    def write_pending(self, pending: dict[int, bytes]) -> None:
        """Append and fsync taken entries (blocking: call from a worker thread)."""
        for base, data in pending.items():
            fd = os.open(self.folder / segment_name(base), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)

    def load(self, until_phys_offset: int) -> int:
        """Read the index files, keeping entries below ``until_phys_offset`` and cutting the rest off the
        files (they are re-dispatched from the commit log). Returns the number of entries kept."""
        self._by_hash.clear()
        self._pending.clear()
        self.entries = 0
        for base in list_segment_bases(self.folder):
            path = self.folder / segment_name(base)
            data = path.read_bytes()
            whole = len(data) - len(data) % ENTRY_SIZE
            keep = whole
            if base + self.segment_bytes > until_phys_offset:
                keep = _entries_below(data, whole, until_phys_offset)
            if keep == 0 and base >= until_phys_offset:
                path.unlink()
                continue
            if keep != len(data):
                os.truncate(path, keep)
            self._remember_all(memoryview(data)[:keep])
        return self.entries

    def _remember_all(self, entries: memoryview) -> None:
        """``_remember`` each entry of a file: a start reads every index entry since the oldest segment (a
        million is common), and most hashes are new: stored without a call."""
        by_hash = self._by_hash
        added = 0
        for h, phys_offset in ENTRY.iter_unpack(entries):
            if h in by_hash:
                self._remember(h, phys_offset)  # a hash seen before: a list, or the same record again
            else:
                by_hash[h] = phys_offset
                added += 1
        self.entries += added

    def delete_segment(self, base: int, end: int) -> None:
        """Forget the entries of records in ``[base, end)`` (a deleted commit log segment) and its file."""
        path = self.folder / segment_name(base)
        self._pending.pop(base, None)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        for h in {h for h, _ in ENTRY.iter_unpack(memoryview(data)[: len(data) - len(data) % ENTRY_SIZE])}:
            self._forget_below(h, end)
        path.unlink()

    def _forget_below(self, h: int, end: int) -> None:
        known = self._by_hash.get(h)
        if known is None:
            return
        if isinstance(known, list):
            cut = bisect.bisect_left(known, end)
            self.entries -= cut
            rest = known[cut:]
            if not rest:
                del self._by_hash[h]
            else:
                self._by_hash[h] = rest if len(rest) > 1 else rest[0]
        elif known < end:
            self.entries -= 1
            del self._by_hash[h]

    def __repr__(self) -> str:
        return f"<MessageIndex {self.folder} keys={len(self._by_hash)} entries={self.entries}>"


def _entries_below(data: bytes, whole: int, phys_offset: int) -> int:
    """Byte length of the leading entries of ``data`` whose phys offset is below ``phys_offset``."""
    lo, hi = 0, whole // ENTRY_SIZE
    while lo < hi:
        mid = (lo + hi) // 2
        if ENTRY.unpack_from(data, mid * ENTRY_SIZE)[1] < phys_offset:
            lo = mid + 1
        else:
            hi = mid
    return lo * ENTRY_SIZE
