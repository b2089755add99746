"""The data directory lock (store/dir_lock.py): one owner at a time, the owner's PID in the file, and a store
refuses a directory another store owns."""

from __future__ import annotations

import os

import pytest
from store_helpers import small_config

from pocketmq.store.dir_lock import DataDirLock, DataDirLockedError
from pocketmq.store.message_store import MessageStore


def test_one_owner_at_a_time_and_the_lock_file_names_it(tmp_path):
    owner = DataDirLock(tmp_path)
    owner.acquire()
    assert (tmp_path / "lock").read_text() == f"{os.getpid()}\n"
    with pytest.raises(DataDirLockedError, match=rf"in use by process {os.getpid()} \(lock file {tmp_path}/lock\)"):
        DataDirLock(tmp_path).acquire()
    owner.release()
    assert (tmp_path / "lock").read_text() == ""  # no stale PID left behind
    successor = DataDirLock(tmp_path)
    successor.acquire()
    assert successor.held
    successor.release()


async def test_a_store_refuses_a_directory_another_store_owns_until_it_shuts_down(open_store, tmp_path):
    first = await open_store(tmp_path / "s")
    second = MessageStore(small_config(tmp_path / "s"))
    with pytest.raises(DataDirLockedError):
        second.start()
    await first.shutdown()
    third = await open_store(tmp_path / "s")
    assert third.max_phys_offset == 0


def test_a_full_disk_still_takes_the_lock_without_the_pid(tmp_path, monkeypatch):
    def no_space(fd, data, offset):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", no_space)  # the PID write needs a page a full disk cannot give
    lock = DataDirLock(tmp_path)
    lock.acquire()
    monkeypatch.undo()
    other = DataDirLock(tmp_path)
    with pytest.raises(DataDirLockedError, match="unknown"):
        other.acquire()
    lock.release()
    other.acquire()
    other.release()
