"""The staged simple consumer's registrations: at start on every broker serving the topic (a group without master
through its slave); a slave that refuses (it does not act as master) is registered when the first message comes
from it, so ``stage_of`` knows its origin; a master's refusal fails the start."""

from __future__ import annotations

import json
import types

import pytest

from pocketmq.client.simple_consumer import BROKER_NAME_PROPERTY, AsyncSimpleConsumer
from pocketmq.client.staged_simple_consumer import AsyncStagedSimpleConsumer
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import MessageExt
from pocketmq.protocol.codes import REGISTER_POP_STAGES, ResponseCode

pytestmark = pytest.mark.timeout(10)


class FakeInstance:
    """Broker "a" is a master, "slave-only" a group read through its slave; ``refusing`` answer errors."""

    def __init__(self, refusing: set[str]):
        self.refusing = refusing
        self.registered: list[str] = []

    async def route(self, topic, *, refresh=False, auto_create=True):
        return types.SimpleNamespace(readable_broker_names=["a", "slave-only"], master_addrs={"a": "10.0.0.1:10911"})

    async def invoke_broker(self, broker_name, request, timeout_s=None):
        assert request.code == REGISTER_POP_STAGES
        if broker_name in self.refusing:
            return request.response(ResponseCode.SYSTEM_ERROR, remark="not acting as master")
        self.registered.append(broker_name)
        return request.response(body=json.dumps({"origins": {"0": 10}}).encode())


@pytest.fixture
def fake(monkeypatch):
    """A staged consumer on a ``FakeInstance``; what a receive returns is the test's ``popped``."""
    popped: list[MessageExt] = []

    def make(refusing: set[str]):
        instance = FakeInstance(refusing)

        async def start(self):
            self._instance = instance

        async def receive(self, *args, **kwargs):
            return list(popped)

        monkeypatch.setattr(AsyncSimpleConsumer, "start", start)
        monkeypatch.setattr(AsyncSimpleConsumer, "receive", receive)
        return AsyncStagedSimpleConsumer("g", {"t": "*"}, [2, 2]), instance, popped

    return make


async def test_a_refusing_slave_is_registered_when_it_first_hands_out_a_message(fake):
    consumer, instance, popped = fake({"slave-only"})
    await consumer.start()
    assert instance.registered == ["a"]
    instance.refusing.clear()  # the slave acts now
    popped.append(
        MessageExt(topic="t", body=b"x", queue_id=0, queue_offset=12, properties={BROKER_NAME_PROPERTY: "slave-only"})
    )
    [msg] = await consumer.receive(1)
    assert instance.registered == ["a", "slave-only"]
    assert consumer.stage_of(msg) == 1  # offset 12 of a sequence from 10
    await consumer.receive(1)
    assert instance.registered == ["a", "slave-only"]  # once


async def test_a_master_s_refusal_fails_the_start(fake):
    consumer, _, _ = fake({"a"})
    with pytest.raises(PocketMQError, match="not acting as master"):
        await consumer.start()
