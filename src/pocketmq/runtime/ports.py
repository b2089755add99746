"""A port to listen on later, again and again: below the kernel's ephemeral range.

A server that must come back on the same port (a broker under the controller over its rounds, a restarted test
server) picks its port once, before it listens. Asking the kernel (bind to port 0) hands out a port of the
ephemeral range, and between that pick and the real bind any process's outgoing connection or port-0 listener
may take that same port ("address already in use": a controlled broker failed so beside a loaded test run, and
a chaos cluster before it). Below the range only another such pick can collide.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path


def free_port(*hosts: str) -> int:
    """A port free on 127.0.0.1 and on every one of ``hosts`` right now, below the kernel's ephemeral range."""
    low = _ephemeral_low()
    while True:
        port = random.randrange(max(1024, low // 2), low)
        try:
            for host in ("127.0.0.1", *hosts):
                with socket.socket() as probe:
                    probe.bind((host, port))
            return port
        except OSError:
            continue


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
