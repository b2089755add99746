"""The full-disk fault: a ballast file that takes every free byte of a broker's tmpfs, removed to heal."""

from __future__ import annotations

import os
from pathlib import Path

BALLAST_NAME = "chaos-ballast"
_BLOCK = b"\xba" * (1 << 20)


def fill(mount: Path) -> int:
    """Write ``mount/chaos-ballast`` until the filesystem is full; the bytes written."""
    written = 0
    fd = os.open(mount / BALLAST_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        block = _BLOCK
        while block:
            try:
                written += os.write(fd, block)
            except OSError:  # ENOSPC: try smaller blocks so the last pages go too
                block = block[: len(block) // 2] if len(block) > 4096 else b""
    finally:
        os.close(fd)
    return written


def clear(mount: Path) -> None:
    (mount / BALLAST_NAME).unlink(missing_ok=True)
