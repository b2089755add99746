"""Fixtures of the name server tests: an in-process NameServer on a loopback port and a remoting client."""

from __future__ import annotations

import pytest

from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.server import NameServer
from pocketmq.runtime.clock import ManualClock


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
async def namesrv(clock):
    server = NameServer(NamesrvConfig(port=0, broker_expire_ms=10_000, auto_create_timeout_ms=2_000), clock)
    await server.start()
    yield server
    await server.stop()
