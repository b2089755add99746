"""Fixtures of the name server tests: an in-process NameServer on a loopback port, a remoting client, and
``eventually`` (poll a condition with a deadline)."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.cluster.namesrv import NameServer
from pocketmq.cluster.namesrv_config import NamesrvConfig
from pocketmq.protocol.transport import RemotingClient
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


@pytest.fixture
async def remoting():
    client = RemotingClient()
    yield client
    await client.close()


async def _eventually(predicate, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.01)  # the poll interval of a condition with a deadline


@pytest.fixture
def eventually():
    return _eventually
