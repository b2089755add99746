"""The data directory lock: one process at a time owns a ``--data-dir``.

Two brokers on one directory both append to the same commit log and each believes its own end offset, so each
overwrites what the other acknowledged. ``DataDirLock`` prevents that: file ``<data_dir>/lock`` (RocketMQ's
store root has a ``lock`` file for the same reason) holds an exclusive ``flock`` for as long as the owner keeps
it, and the owner's PID as text so the refusal can name it.

``flock`` rather than a PID check: the kernel drops the lock when the owner's process ends, however it ends
(``kill -9`` included), so a crash never leaves a stale lock to clean by hand. The file itself stays; its
content is only a hint for the error message. ``flock`` locks belong to the open file, so a second
``acquire`` in the same process is refused as well: two stores on one directory in one process corrupt it just
the same.

The file is never deleted: deleting it while another process waits to open it would let two processes each
lock a different file of the same name.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from pocketmq.common.errors import StoreError

LOCK_FILE = "lock"


class DataDirLockedError(StoreError):
    """Another process (or another store in this one) owns the data directory."""

    retriable = False


class DataDirLock:
    def __init__(self, data_dir: Path):
        self.path = Path(data_dir).absolute() / LOCK_FILE  # absolute: the error names it wherever it is read
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock and write this process's PID; DataDirLockedError at once if another owner has it."""
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_owner(fd)
            os.close(fd)
            raise DataDirLockedError(
                f"data directory {self.path.parent} is in use by process {owner} (lock file "
                f"{self.path}): stop that process or choose another data directory"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        try:
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:  # a full disk: the flock is the lock; the PID only names the owner to a second process
            pass
        self._fd = fd

    def release(self) -> None:
        """Clear the PID and drop the lock (a process that ends without calling this drops it too)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # a stale PID would only mislead whoever reads the file next
        finally:
            os.close(fd)  # closing the only descriptor of the open file releases the flock


def _read_owner(fd: int) -> str:
    """The PID the owner wrote, or "unknown" (it may be between taking the lock and writing its PID)."""
    text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    return text if text.isdigit() else "unknown"
