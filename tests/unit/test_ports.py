"""``free_port``: a port below the kernel's ephemeral range, free to bind when it is returned."""

from __future__ import annotations

import random
import socket

import pytest

from pocketmq.runtime.ports import _ephemeral_low, free_port

pytestmark = pytest.mark.timeout(30)


def test_a_free_port_lies_below_the_ephemeral_range_and_binds():
    low = _ephemeral_low()
    for _ in range(20):
        port = free_port()
        assert 1024 <= port < low
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_port_in_use_is_not_handed_out(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        picks = iter([busy])  # the first pick is the busy port, then random picks as usual
        randrange = random.randrange
        monkeypatch.setattr("pocketmq.runtime.ports.random.randrange", lambda *a: next(picks, None) or randrange(*a))
        assert free_port() != busy
