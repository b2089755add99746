"""A fixed-size, preallocated data file: the unit the commit log and the consume queues are made of.

Layout: a file named by the 20-digit zero-padded offset of its first byte in its log (``00000000001073741824``),
always exactly ``size_bytes`` long. It is created sparse (``ftruncate``), so bytes never written read as zeros;
the owners' formats use "a zero length" to mean "nothing written from here on".

Writes go through ``os.pwrite`` (an ``OSError`` such as disk full surfaces as an exception instead of the
SIGBUS a write through a mapping would raise); reads go through a read-only shared ``mmap`` of the same file,
which on Linux sees every ``pwrite`` at once, so a reader needs no copy of the writer's buffer and no syscall.

Sparse tails: on tmpfs (and any filesystem under memory pressure) touching a never-written page through the
shared mapping allocates it, and a full filesystem answers that with SIGBUS, which kills the process. So
nothing reads a segment past ``readable_end()``, the end of its last allocated extent (``SEEK_DATA`` /
``SEEK_HOLE``; on a filesystem without them the whole file counts as allocated).

Crash behaviour: after a process crash every ``pwrite`` is in the page cache and survives; after a power
loss only what ``flush()`` (fsync) covered does. ``truncate_after(pos)`` zeros the tail from ``pos`` on by
shrinking and re-extending the file (cheap, keeps the file sparse).

Thread safety: one writer (the event loop). ``flush()`` may run in a worker thread at the same time as writes
(fsync on an fd another thread writes to is safe); ``close()`` must not race with it: owners only close
segments nobody flushes any more.
"""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

from pocketmq.common.errors import StoreError

NAME_DIGITS = 20


def segment_name(base_offset: int) -> str:
    return f"{base_offset:0{NAME_DIGITS}d}"


def list_segment_bases(folder: Path) -> list[int]:
    """The base offsets of the segment files in ``folder``, ascending (other files are ignored)."""
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if len(p.name) == NAME_DIGITS and p.name.isdigit())


def open_segments(folder: Path, segment_bytes: int, what: str, *, writable: bool = True) -> list[Segment]:
    """Open the segment files of ``folder``, checking that they are aligned and leave no hole (``what`` names
    the log in errors)."""
    segments = []
    for base in list_segment_bases(folder):
        if base % segment_bytes:
            raise StoreError(f"{what} file {folder / segment_name(base)} is not aligned to {segment_bytes} bytes")
        segments.append(Segment(folder, base, segment_bytes, writable=writable))
    for prev, nxt in zip(segments, segments[1:]):
        if nxt.base_offset != prev.end_offset:
            raise StoreError(f"{what} has a hole between {prev} and {nxt}")
    return segments


def segment_at(segments: list[Segment], position: int, segment_bytes: int) -> Segment | None:
    """The segment of ``segments`` (contiguous, ascending) holding byte ``position`` of the log, else None."""
    if not segments:
        return None
    index = (position - segments[0].base_offset) // segment_bytes
    if 0 <= index < len(segments):
        return segments[index]
    return None


class Segment:
    """One preallocated file of ``size_bytes`` holding the log bytes ``[base_offset, base_offset + size_bytes)``."""

    __slots__ = ("base_offset", "size_bytes", "path", "_fd", "_map")

    def __init__(self, folder: Path, base_offset: int, size_bytes: int, *, writable: bool = True):
        """Open (creating it when ``writable``) the segment file; a read-only segment never changes the file
        (``pocketmq store verify`` reads a stopped broker's store with it)."""
        self.base_offset = base_offset
        self.size_bytes = size_bytes
        self.path = folder / segment_name(base_offset)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY, 0o644)
        try:
            current = os.fstat(fd).st_size
            if current not in (0, size_bytes) or (current == 0 and not writable):
                raise StoreError(f"{self.path} is {current} bytes, the configured segment size is {size_bytes}")
            if current == 0:  # a new file, or one a crash left right after its creation: extend (sparse)
                os.ftruncate(fd, size_bytes)
            self._map = mmap.mmap(fd, size_bytes, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        if not writable:
            self.seal()

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.size_bytes

    @property
    def view(self) -> mmap.mmap:
        """The read-only mapping (slice it; positions are relative to ``base_offset``)."""
        return self._map

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at relative position ``pos`` (must fit in the segment)."""
        if pos < 0 or pos + len(data) > self.size_bytes:
            raise ValueError(f"write of {len(data)} bytes at {pos} does not fit in {self}")
        fd = self._writable_fd()
        written = os.pwrite(fd, data, pos)
        while written < len(data):  # pwrite may write short (signals, odd filesystems)
            written += os.pwrite(fd, memoryview(data)[written:], pos + written)

    def read(self, pos: int, length: int) -> bytes:
        return self._map[pos : pos + length]

    def readable_end(self) -> int:
        """The relative end of the file's last allocated extent (page granular): bytes past it were never
        written and must not be read through the mapping (see the module docstring)."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            end = pos = 0
            while pos < self.size_bytes:
                try:
                    data = os.lseek(fd, pos, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # no data at or after pos
                        break
                    if exc.errno == errno.EINVAL:  # SEEK_DATA not supported: all of it counts as written
                        return self.size_bytes
                    raise
                pos = end = min(os.lseek(fd, data, os.SEEK_HOLE), self.size_bytes)
            return end
        finally:
            os.close(fd)

    def flush(self) -> None:
        """fsync the file (blocking: call from a worker thread)."""
        fd = self._fd
        if fd is not None:
            os.fsync(fd)

    def seal(self) -> None:
        """Close the write handle of a segment that will not be written or flushed again (reads stay)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def truncate_after(self, pos: int) -> None:
        """Zero every byte from relative position ``pos`` to the end of the file."""
        fd = self._writable_fd()
        os.ftruncate(fd, pos)
        os.ftruncate(fd, self.size_bytes)

    def close(self) -> None:
        self.seal()
        self._map.close()

    def delete(self) -> None:
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def _writable_fd(self) -> int:
        if self._fd is None:
            raise ValueError(f"{self} is closed")
        return self._fd

    def __repr__(self) -> str:
        return f"<Segment {self.path.name} size={self.size_bytes}>"
