"""Producer message ids (RocketMQ's UNIQ_KEY), in the shape of RocketMQ's ``MessageClientIDSetter``.

32 upper-case hex digits = 16 bytes::

    4 bytes  client IPv4 address
    2 bytes  process id (low 16 bits)
    4 bytes  a random number drawn once per process (RocketMQ: the class loader's hash code)
    4 bytes  milliseconds since the start of the current month (local time, as RocketMQ)
    2 bytes  a counter, wrapping at 65536

Unique per process as long as fewer than 65536 ids are made in one millisecond; the prefix (first 10 bytes)
separates processes. ``parse_message_id`` recovers the parts, which helps when reading logs.
"""

from __future__ import annotations

import datetime
import itertools
import os
import random
import socket
import struct
import threading
from dataclasses import dataclass

_TAIL = struct.Struct(">IH")


def local_ipv4() -> str:
    """This host's IPv4 address as its name resolves, else 127.0.0.1 (no packet is sent to find it)."""
    try:
        addr = socket.gethostbyname(socket.gethostname())
        socket.inet_aton(addr)
        return addr
    except OSError:
        return "127.0.0.1"


def month_start_ms(now_ms: int) -> int:
    """Epoch ms of the first instant of the (local-time) month containing ``now_ms``."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


class MessageIdGenerator:
    """Makes UNIQ_KEYs; ``next_id(now_ms)`` is cheap (one struct pack and one hex) and thread-safe."""

    def __init__(self, ip: str, pid: int, random_part: int):
        self._prefix = (
            socket.inet_aton(ip) + (pid & 0xFFFF).to_bytes(2, "big") + (random_part & 0xFFFFFFFF).to_bytes(4, "big")
        )
        self._prefix_hex = self._prefix.hex().upper()
        self._counter = itertools.count()
        self._lock = threading.Lock()  # itertools.count is atomic under the GIL; the lock guards the month
        self._month_start_ms = 0
        self._next_month_ms = 0

    @classmethod
    def for_this_process(cls, ip: str | None = None) -> MessageIdGenerator:
        return cls(ip or local_ipv4(), os.getpid(), random.getrandbits(32))

    @property
    def prefix_hex(self) -> str:
        return self._prefix_hex

    def next_id(self, now_ms: int) -> str:
        if not self._month_start_ms <= now_ms < self._next_month_ms:
            self._roll_month(now_ms)
        since_month_ms = (now_ms - self._month_start_ms) & 0xFFFFFFFF
        return self._prefix_hex + _TAIL.pack(since_month_ms, next(self._counter) & 0xFFFF).hex().upper()

    def _roll_month(self, now_ms: int) -> None:
        with self._lock:
            start = month_start_ms(now_ms)
            # the next month starts at most 31 days later; month_start_ms of a day in it finds it exactly
            self._month_start_ms, self._next_month_ms = start, month_start_ms(start + 32 * 86_400_000)

    def __repr__(self) -> str:
        return f"<MessageIdGenerator prefix={self._prefix_hex}>"


@dataclass(frozen=True, slots=True)
class MessageIdParts:
    ip: str
    pid: int
    random_part: int
    ms_since_month_start: int
    counter: int


def parse_message_id(message_id: str) -> MessageIdParts:
    """The parts of a UNIQ_KEY; ValueError when it is not 32 hex digits."""
    if len(message_id) != 32:
        raise ValueError(f"message id must be 32 hex digits, got {len(message_id)} characters")
    raw = bytes.fromhex(message_id)
    return MessageIdParts(
        ip=socket.inet_ntoa(raw[:4]),
        pid=int.from_bytes(raw[4:6], "big"),
        random_part=int.from_bytes(raw[6:10], "big"),
        ms_since_month_start=int.from_bytes(raw[10:14], "big"),
        counter=int.from_bytes(raw[14:16], "big"),
    )
