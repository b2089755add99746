"""Producer retry and fault-avoidance decisions against a fake client instance (no sockets, virtual clock):
retries go to another broker, at most ``retry_times`` of them; with ``send_latency_fault_enable`` a failing
broker sits out for its duration and is then tried again; non-OK store statuses retry only when asked."""

import pytest

from pocketmq.client.message_id import MessageIdGenerator
from pocketmq.client.producer import AsyncProducer, ProducerOptions, SendStatus
from pocketmq.client.queue_select import FunctionSelector, KeyHashSelector, RandomSelector, RoundRobinSelector
from pocketmq.client.route_view import TopicRouteView
from pocketmq.common.message import Message, MessageQueue
from pocketmq.errors import RemotingError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.runtime.clock import ManualClock

QUEUES = tuple(MessageQueue("t", b, q) for q in range(2) for b in ("a", "b"))


class FakeRemoting:
    def __init__(self, clock, instance):
        self.clock, self.instance = clock, instance
        self.calls: list[str] = []

    async def invoke(self, addr, request, timeout_s):
        self.calls.append(addr)
        behaviour = self.instance.behaviour.get(addr, "ok")
        if behaviour == "down":
            raise RemotingError(f"connection refused {addr}")
        code = ResponseCode.SUCCESS if behaviour == "ok" else ResponseCode.FLUSH_DISK_TIMEOUT
        return request.response(code, {"msgId": "X", "queueId": request.ext_fields["e"], "queueOffset": 0})


class FakeInstance:
    def __init__(self):
        self.clock = ManualClock()
        self.message_ids = MessageIdGenerator("127.0.0.1", 1, 2)
        self.remoting = FakeRemoting(self.clock, self)
        self.behaviour: dict[str, str] = {}
        self.route_view = TopicRouteView("t", {"a": "a", "b": "b"}, QUEUES, QUEUES)

    def cached_route(self, topic):
        return self.route_view

    async def route(self, topic, refresh=False):
        return self.route_view

    def broker_addr(self, name):
        return name

    def register_producer(self, group):
        pass

    def unregister_producer(self, group):
        pass


async def producer(**options):
    instance = FakeInstance()
    p = AsyncProducer(options=ProducerOptions(**options), instance=instance, selector=RoundRobinSelector(start=0))
    await p.start()
    return p, instance


async def test_a_failed_send_is_retried_on_the_other_broker():
    p, instance = await producer()
    instance.behaviour["a"] = "down"
    result = await p.send(Message.create("t", "x"))
    assert result.message_queue.broker_name == "b" and instance.remoting.calls == ["a", "b"]


async def test_at_most_retry_times_retries():
    p, instance = await producer(retry_times_when_send_failed=2)
    instance.behaviour.update(a="down", b="down")
    with pytest.raises(RemotingError):
        await p.send(Message.create("t", "x"))
    assert len(instance.remoting.calls) == 3


async def test_fault_avoidance_skips_a_failing_broker_for_its_duration():
    p, instance = await producer(send_latency_fault_enable=True)
    instance.behaviour["a"] = "down"
    await p.send(Message.create("t", "first"))  # a fails once: it sits out 10 s (RocketMQ 5's isolation)
    instance.remoting.calls.clear()
    for i in range(10):
        await p.send(Message.create("t", f"m{i}"))
    assert instance.remoting.calls == ["b"] * 10
    instance.clock.advance(10_001)
    instance.behaviour["a"] = "ok"
    for i in range(4):
        await p.send(Message.create("t", f"late{i}"))
    assert "a" in instance.remoting.calls[10:]


async def test_without_fault_avoidance_the_failing_broker_is_tried_again():
    p, instance = await producer()
    instance.behaviour["a"] = "down"
    for i in range(10):
        await p.send(Message.create("t", f"m{i}"))
    assert instance.remoting.calls.count("a") >= 4


async def test_not_store_ok_is_a_result_unless_asked_to_retry():
    p, instance = await producer()
    instance.behaviour["a"] = "flush-timeout"
    assert (await p.send(Message.create("t", "x"))).status is SendStatus.FLUSH_DISK_TIMEOUT
    p, instance = await producer(retry_another_broker_when_not_store_ok=True)
    instance.behaviour["a"] = "flush-timeout"
    result = await p.send(Message.create("t", "x"))
    assert result.status is SendStatus.SEND_OK and result.message_queue.broker_name == "b"


async def test_async_callback_oneway_and_delay():
    p, instance = await producer()
    got = []
    result = await p.send_async(Message.create("t", "x"), callback=got.append)
    assert got == [result]
    msg = Message.create("t", "later")
    await p.send(msg, delay_level=3)
    assert msg.properties["DELAY"] == "3"


def test_selectors():
    keyed = KeyHashSelector()
    m1 = Message.create("t", "x", keys="order-7")
    assert keyed.select(QUEUES, m1) == keyed.select(QUEUES, Message.create("t", "y", keys="order-7"))
    import random

    rnd = RandomSelector(random.Random(1))
    assert all(rnd.select(QUEUES, m1, frozenset({"a"})).broker_name == "b" for _ in range(20))
    first = FunctionSelector(lambda queues, msg: queues[0])
    assert first.select(QUEUES, m1) == QUEUES[0]
    with pytest.raises(ValueError):
        FunctionSelector(lambda queues, msg: MessageQueue("t", "zzz", 9)).select(QUEUES, m1)
