"""A simple consumer whose cached route lists no broker (fetched while the masters were re-registering, e.g.
right after a name server restart) asks the name server again at once instead of failing every receive until
the next periodic refresh."""

from __future__ import annotations

import types

import pytest

from pocketmq.client.simple_consumer import AsyncSimpleConsumer
from pocketmq.common.errors import ClientError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.command import RemotingCommand

pytestmark = pytest.mark.timeout(10)


class FakeInstance:
    """Routes from a script: the cached one, then what a refresh finds; POPs answer 'nothing yet'."""

    def __init__(self, cached: list[str], refreshed: list[str]):
        self.routes = {False: cached, True: refreshed}
        self.refreshes = 0
        self.popped_from: list[str] = []
        self.clock = types.SimpleNamespace(now_ms=lambda: 0)

    async def route(self, topic: str, *, refresh: bool = False, auto_create: bool = True):
        self.refreshes += refresh
        return types.SimpleNamespace(broker_names=self.routes[refresh])

    async def invoke_broker(self, broker_name: str, request: RemotingCommand, timeout_s: float):
        self.popped_from.append(broker_name)
        return request.response(ResponseCode.POLLING_TIMEOUT)


def consumer_with(instance: FakeInstance) -> AsyncSimpleConsumer:
    consumer = AsyncSimpleConsumer("g", {"t": "*"})
    consumer._instance = instance
    return consumer


async def test_a_route_without_brokers_is_fetched_again_before_the_receive_gives_up():
    instance = FakeInstance(cached=[], refreshed=["broker-b"])
    assert await consumer_with(instance).receive(1, await_duration_ms=0) == []
    assert instance.refreshes == 1 and instance.popped_from == ["broker-b"]


async def test_a_topic_still_without_brokers_after_the_refresh_is_a_clear_error():
    instance = FakeInstance(cached=[], refreshed=[])
    with pytest.raises(ClientError, match="no readable queue"):
        await consumer_with(instance).receive(1, await_duration_ms=0)


async def test_a_route_with_brokers_is_used_as_it_is():
    instance = FakeInstance(cached=["broker-a"], refreshed=["broker-b"])
    await consumer_with(instance).receive(1, await_duration_ms=0)
    assert instance.refreshes == 0 and instance.popped_from == ["broker-a"]
