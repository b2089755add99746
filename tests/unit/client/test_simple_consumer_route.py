"""A simple consumer whose cached route lists no broker (fetched while the masters were re-registering, e.g.
right after a name server restart) asks the name server again at once instead of failing every receive until
the next periodic refresh. A group without master is popped through its slave (which serves POP while it
acts as master); a slave that refuses the pop gives nothing, not an error."""

from __future__ import annotations

import types

import pytest

from pocketmq.client.simple_consumer import AsyncSimpleConsumer
from pocketmq.common.errors import ClientError, PocketMQError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.command import RemotingCommand

pytestmark = pytest.mark.timeout(10)


class FakeInstance:
    """Routes from a script: the cached one, then what a refresh finds; POPs answer 'nothing yet'."""

    def __init__(self, cached: list[str], refreshed: list[str], *, masters=None, answer=ResponseCode.POLLING_TIMEOUT):
        self.routes = {False: cached, True: refreshed}
        self.masters = masters
        self.answer = answer
        self.refreshes = 0
        self.popped_from: list[str] = []
        self.clock = types.SimpleNamespace(now_ms=lambda: 0)

    async def route(self, topic: str, *, refresh: bool = False, auto_create: bool = True):
        self.refreshes += refresh
        names = self.routes[refresh]
        masters = names if self.masters is None else self.masters
        return types.SimpleNamespace(readable_broker_names=names, master_addrs={name: "addr" for name in masters})

    async def invoke_broker(self, broker_name: str, request: RemotingCommand, timeout_s: float):
        self.popped_from.append(broker_name)
        return request.response(self.answer)


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


async def test_a_group_read_through_its_slave_is_popped_and_a_refusal_there_is_nothing():
    instance = FakeInstance(cached=["broker-a"], refreshed=[], masters=[], answer=ResponseCode.SYSTEM_ERROR)
    assert await consumer_with(instance).receive(1, await_duration_ms=0) == []
    assert instance.popped_from == ["broker-a"]


async def test_a_master_s_refusal_is_still_an_error():
    instance = FakeInstance(cached=["broker-a"], refreshed=[], answer=ResponseCode.SYSTEM_ERROR)
    with pytest.raises(PocketMQError):
        await consumer_with(instance).receive(1, await_duration_ms=0)
