"""Atomic files: the broker's metadata (topics, groups, consumer offsets, timer and revive progress), the
store's checkpoint, the SDK's local offsets.

A file is replaced whole: written to a temp file in the same folder, fsynced, renamed over the old one, and
the folder fsynced, so a crash leaves either the old or the new content, never half of one. A journal beside
such a file (the topic table's) is appended to and fsynced (``append_durably``): only its last line can be torn.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes, *, private: bool = False) -> None:
    """``private``: readable by the owner only (0600), for files that hold secrets."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        if private:
            os.fchmod(f.fileno(), 0o600)  # before a byte is written: the secrets are never readable by others
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def append_durably(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` and fsync it (and the folder when this created the file): on return it
    survives a power loss. A crash during the call may leave a part of ``data`` at the end, for the reader to
    cut off."""
    path = Path(path)
    created = not path.exists()
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if created:
        _fsync_dir(path.parent)


def remove_durably(path: Path) -> None:
    """Remove ``path`` (if there) and fsync its folder."""
    path = Path(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_json(path: Path, obj: Any, *, private: bool = False) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=1, sort_keys=True).encode(), private=private)


def load_json(path: Path, default: Any) -> Any:
    """The file's JSON content, or ``default`` when the file does not exist."""
    try:
        return json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        return default


def load_or_create_secret(path: Path, size_bytes: int = 32) -> bytes:
    """The random secret kept in ``path``, made (from the OS's CSPRNG) and saved atomically on first use."""
    path = Path(path)
    try:
        secret = path.read_bytes()
    except FileNotFoundError:
        secret = b""
    if len(secret) < size_bytes:  # absent (or too short to be one of ours: a new one replaces it)
        secret = secrets.token_bytes(size_bytes)
        atomic_write_bytes(path, secret)
        os.chmod(path, 0o600)
    return secret
