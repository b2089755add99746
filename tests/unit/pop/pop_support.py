"""An in-process broker on a ManualClock for pop engine tests (no sockets)."""

from __future__ import annotations

import contextlib
import dataclasses

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.pop.receive import PopRequest
from pocketmq.common.message import Message
from pocketmq.common.topic import TopicConfig
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import PutResult


@contextlib.asynccontextmanager
async def running_broker(tmp_path, clock: ManualClock | None = None, **settings):
    config = dataclasses.replace(
        BrokerConfig(data_dir=tmp_path / "data", remoting_port=0, grpc_port=0),
        pop_revive_interval_ms=3_600_000,
        **settings,
    )
    broker = Broker(config, clock=clock or ManualClock())
    await broker.start(remoting_port=10911)
    try:
        yield broker
    finally:
        await broker.shutdown()


async def send(broker: Broker, topic: str, count: int, *, queues: int = 1, group_of=None, tags=None) -> None:
    if broker.topics.get(topic) is None:
        broker.topics.create_or_update(TopicConfig(topic, queues, queues))
    messages = [
        Message.create(topic, f"m{i}", tags=tags(i) if tags else None, message_group=group_of(i) if group_of else None)
        for i in range(count)
    ]
    for msg in messages:
        await broker.messages.send([msg], topic=topic)


async def pop(broker: Broker, group: str, topic: str, max_count: int = 32, invisible_ms: int = 10_000, **kw):
    result = await broker.pop.pop(PopRequest(group, topic, max_count, invisible_ms, **kw))
    return result.delivered()


class FaultyStore:
    """A broker's store with injected write faults: ``refuse(msgs)`` gives the status a put of ``msgs`` is refused
    with (a full disk's SERVICE_NOT_AVAILABLE, an illegal record's MESSAGE_ILLEGAL), or None to store them. Reads
    and everything else go to the real store. ``full`` and ``illegal`` are for the caller's ``refuse``."""

    def __init__(self, store):
        self._store = store
        self.full = False
        self.illegal = lambda msg: False
        self.refuse = lambda msgs: None
        self.refused_puts = 0

    async def put_messages(self, msgs):
        status = self.refuse(msgs)
        if status is None:
            return await self._store.put_messages(msgs)
        self.refused_puts += 1
        return [PutResult(status, reason="injected")] * len(msgs)

    def __getattr__(self, name):
        return getattr(self._store, name)


def acting_path(bridge, progress, clock=None):
    """The write path of a slave acting as master whose escapes go through ``bridge`` (``broker.write_path.use``)."""
    from pocketmq.broker.acting_writes import EscapedWritePath

    return EscapedWritePath(bridge, progress, "rmq_sys_REVIVE_LOG_test", clock)
