"""Which process opened a TCP connection: the proxy's way to apply a fault between two named processes.

Every process dials a broker or the name server through the same advertised address, so the proxy cannot
tell callers apart by address. The kernel can: the caller's end of the connection is a socket whose local
address is the peer address the proxy accepted, listed with its inode in ``/proc/net/tcp``, and that inode is
an open file of exactly one of the processes the harness started (``/proc/<pid>/fd``). Linux only.
"""

from __future__ import annotations

import os
import socket
import struct
import threading


def _hex_address(host: str, port: int) -> str:
    """``127.0.0.1:5000`` in /proc/net/tcp's form (the IPv4 address as a little-endian hex word)."""
    packed = struct.unpack("<I", socket.inet_aton(host))[0]
    return f"{packed:08X}:{port:04X}"


def socket_inode(host: str, port: int) -> int | None:
    """The inode of the TCP socket whose local address is ``host:port``, or None."""
    wanted = _hex_address(host, port)
    try:
        with open("/proc/net/tcp") as table:
            next(table)
            for line in table:
                fields = line.split()
                if fields[1] == wanted:
                    return int(fields[9])
    except OSError:
        return None
    return None


def owner_pid(inode: int, pids: list[int]) -> int | None:
    """Which of ``pids`` holds socket ``inode`` open."""
    target = f"socket:[{inode}]"
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue  # exited
        for name in names:
            try:
                if os.readlink(f"{fd_dir}/{name}") == target:
                    return pid
            except OSError:
                continue
    return None


class PeerNames:
    """Maps a connection's peer address to the name of the harness process that opened it."""

    def __init__(self, unknown: str = "other"):
        self.unknown = unknown
        self._pids: dict[int, str] = {}
        self._lock = threading.Lock()  # the harness sets, the proxy's worker threads read

    def set(self, name: str, pid: int | None) -> None:
        """``name`` runs as ``pid`` now (None: not running); a restart calls this with the new pid."""
        with self._lock:
            self._pids = {p: n for p, n in self._pids.items() if n != name}
            if pid is not None:
                self._pids[pid] = name

    def name_of(self, host: str, port: int) -> str:
        with self._lock:
            pids = dict(self._pids)
        inode = socket_inode(host, port)
        pid = owner_pid(inode, list(pids)) if inode is not None else None
        return pids.get(pid, self.unknown) if pid is not None else self.unknown
