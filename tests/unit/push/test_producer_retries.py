"""Producer retry and fault-avoidance decisions against a fake client instance (virtual clock) whose two brokers
are fake remoting peers: retries go to another broker, at most ``retry_times`` of them (the async count for
``send_async``), never past the send's deadline, never for one-way sends or sends to an explicit queue; with
``send_latency_fault_enable`` a failing broker sits out for its duration and is then tried again; non-OK store
statuses retry only when asked."""

import asyncio

import pytest

from pocketmq.client.message_id import MessageIdGenerator
from pocketmq.client.producer import AsyncProducer, ProducerOptions, SendStatus
from pocketmq.client.queue_select import FunctionSelector, KeyHashSelector, RandomSelector, RoundRobinSelector
from pocketmq.client.route_view import TopicRouteView
from pocketmq.common.errors import RemotingError
from pocketmq.common.message import Message, MessageQueue
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.fakes import FakePeer, hang_up
from pocketmq.testing.polling import eventually

QUEUES = tuple(MessageQueue("t", b, q) for q in range(2) for b in ("a", "b"))


def stored(code: int = ResponseCode.SUCCESS):
    """A broker's answer to a send: stored in the queue asked for, with ``code``."""
    return lambda request: request.response(code, {"msgId": "X", "queueId": request.ext_fields["e"], "queueOffset": 0})


BEHAVIOURS = {"ok": stored(), "down": hang_up, "flush-timeout": stored(ResponseCode.FLUSH_DISK_TIMEOUT)}


class FakeInstance:
    """A producer's client instance (route, clock, message ids) whose brokers "a" and "b" are fake peers."""

    def __init__(self, remoting, brokers: dict[str, FakePeer]):
        self.clock = ManualClock()
        self.message_ids = MessageIdGenerator("127.0.0.1", 1, 2)
        self.remoting = remoting
        self.brokers = brokers
        addrs = {name: peer.addr for name, peer in brokers.items()}
        self.route_view = TopicRouteView("t", addrs, addrs, QUEUES, QUEUES)
        for name in brokers:
            self.behave(name, "ok")

    def behave(self, broker_name: str, behaviour: str) -> None:
        """How broker ``broker_name`` answers sends: ok, down (it hangs up) or flush-timeout."""
        self.brokers[broker_name].on(RequestCode.SEND_MESSAGE_V2, BEHAVIOURS[behaviour])

    def sends(self, broker_name: str) -> int:
        return len(self.brokers[broker_name].requests)

    def cached_route(self, topic):
        return self.route_view

    async def route(self, topic, refresh=False):
        return self.route_view

    def broker_addr(self, name):
        return self.route_view.master_addrs[name]

    def register_producer(self, group):
        pass

    def unregister_producer(self, group):
        pass


@pytest.fixture
def producer(remoting, peers):
    async def start(**options):
        instance = FakeInstance(remoting, {"a": await peers(), "b": await peers()})
        p = AsyncProducer(options=ProducerOptions(**options), instance=instance, selector=RoundRobinSelector(start=0))
        await p.start()
        return p, instance

    return start


async def test_a_failed_send_is_retried_on_the_other_broker(producer):
    p, instance = await producer()
    instance.behave("a", "down")
    result = await p.send(Message.create("t", "x"))
    assert result.message_queue.broker_name == "b" and (instance.sends("a"), instance.sends("b")) == (1, 1)


async def test_at_most_retry_times_retries(producer):
    p, instance = await producer(retry_times_when_send_failed=2)
    instance.behave("a", "down")
    instance.behave("b", "down")
    with pytest.raises(RemotingError):
        await p.send(Message.create("t", "x"))
    assert instance.sends("a") + instance.sends("b") == 3


async def test_retries_stop_at_the_send_deadline(producer):
    p, instance = await producer(retry_times_when_send_failed=5, send_timeout_s=3)

    def slow_then_down(request):  # each attempt costs 1.2 s of the send's 3 s
        instance.clock.advance(1_200)
        return hang_up(request)

    for name in ("a", "b"):
        instance.brokers[name].on(RequestCode.SEND_MESSAGE_V2, slow_then_down)
    with pytest.raises(RemotingError):
        await p.send(Message.create("t", "x"))
    assert instance.sends("a") + instance.sends("b") == 3  # at 0, 1.2 and 2.4 s; none at 3.6 s, not 6 retries


async def test_async_sends_retry_their_own_count(producer):
    p, instance = await producer(retry_times_when_send_failed=3, retry_times_when_send_async_failed=1)
    instance.behave("a", "down")
    instance.behave("b", "down")
    errors = []
    task = p.send_async(Message.create("t", "x"), on_exception=errors.append)
    with pytest.raises(RemotingError):
        await task
    assert instance.sends("a") + instance.sends("b") == 2 and len(errors) == 1  # 1 + 1 retry, not 1 + 3
    instance.behave("b", "ok")
    result = await p.send_async(Message.create("t", "y"))
    assert result.message_queue.broker_name == "b"


async def test_async_sends_join_automatic_batches_with_their_own_retry_count(remoting, peers):
    """With ``auto_batch`` the ``send_async`` calls of one loop turn travel as one batch, retried the async count
    of times; the plain sends of that turn make another batch with the sync count."""
    instance = FakeInstance(remoting, {"a": await peers(), "b": await peers()})
    options = ProducerOptions(auto_batch=True, retry_times_when_send_failed=3, retry_times_when_send_async_failed=1)
    p = AsyncProducer(options=options, instance=instance)
    await p.start()

    def batches():
        return [r for peer in instance.brokers.values() for r in peer.requests_of(RequestCode.SEND_BATCH_MESSAGE)]

    for peer in instance.brokers.values():
        peer.on(RequestCode.SEND_BATCH_MESSAGE, hang_up)
    errors = []
    outcomes = await asyncio.gather(
        *(p.send_async(Message.create("t", f"async-{i}"), on_exception=errors.append) for i in range(3)),
        return_exceptions=True,
    )
    assert [type(o) for o in outcomes] == [RemotingError] * 3 and len(errors) == 3
    assert len(batches()) == 2  # one batch of three, sent 1 + 1 times
    outcomes = await asyncio.gather(
        *(p.send(Message.create("t", f"sync-{i}")) for i in range(2)), return_exceptions=True
    )
    assert [type(o) for o in outcomes] == [RemotingError] * 2
    assert len(batches()) == 2 + 4  # one batch of two, sent 1 + 3 times

    for peer in instance.brokers.values():
        peer.on(RequestCode.SEND_BATCH_MESSAGE, stored())
    before = len(batches())
    results = await asyncio.gather(
        *(p.send_async(Message.create("t", f"a{i}")) for i in range(3)),
        *(p.send(Message.create("t", f"s{i}")) for i in range(2)),
    )
    assert [r.status for r in results] == [SendStatus.SEND_OK] * 5
    assert len(batches()) - before == 2  # the async sends' batch and the plain sends' batch
    assert not any(peer.requests_of(RequestCode.SEND_MESSAGE_V2) for peer in instance.brokers.values())


async def test_a_send_to_an_explicit_queue_is_not_retried(producer):
    p, instance = await producer(retry_times_when_send_failed=2)
    instance.behave("a", "down")
    with pytest.raises(RemotingError):
        await p.send(Message.create("t", "x"), queue=MessageQueue("t", "a", 1))
    with pytest.raises(RemotingError):
        await p.send_async(Message.create("t", "y"), queue=MessageQueue("t", "a", 0))
    assert (instance.sends("a"), instance.sends("b")) == (2, 0)


async def test_a_oneway_send_is_not_retried(producer):
    p, instance = await producer(retry_times_when_send_failed=2)
    instance.behave("a", "down")
    instance.behave("b", "down")
    await p.send_oneway(Message.create("t", "x"))  # no answer awaited, no error, no retry
    await eventually(lambda: instance.sends("a") + instance.sends("b") == 1 or None, 5, "the one-way send arrived")
    instance.behave("a", "ok")
    instance.behave("b", "ok")
    await p.send(Message.create("t", "y"))  # a round trip after the one-way send: a retry would be here by now
    assert instance.sends("a") + instance.sends("b") == 2


async def test_fault_avoidance_skips_a_failing_broker_for_its_duration(producer):
    p, instance = await producer(send_latency_fault_enable=True)
    instance.behave("a", "down")
    await p.send(Message.create("t", "first"))  # a fails once: it sits out 10 s (RocketMQ 5's isolation)
    sent_before = (instance.sends("a"), instance.sends("b"))
    for i in range(10):
        await p.send(Message.create("t", f"m{i}"))
    assert (instance.sends("a"), instance.sends("b")) == (sent_before[0], sent_before[1] + 10)
    instance.clock.advance(10_001)
    instance.behave("a", "ok")
    for i in range(4):
        await p.send(Message.create("t", f"late{i}"))
    assert instance.sends("a") > sent_before[0]


async def test_without_fault_avoidance_the_failing_broker_is_tried_again(producer):
    p, instance = await producer()
    instance.behave("a", "down")
    for i in range(10):
        await p.send(Message.create("t", f"m{i}"))
    assert instance.sends("a") >= 4


async def test_not_store_ok_is_a_result_unless_asked_to_retry(producer):
    p, instance = await producer()
    instance.behave("a", "flush-timeout")
    assert (await p.send(Message.create("t", "x"))).status is SendStatus.FLUSH_DISK_TIMEOUT
    p, instance = await producer(retry_another_broker_when_not_store_ok=True)
    instance.behave("a", "flush-timeout")
    result = await p.send(Message.create("t", "x"))
    assert result.status is SendStatus.SEND_OK and result.message_queue.broker_name == "b"


async def test_async_callback_oneway_and_delay(producer):
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


async def test_an_async_send_on_open_connections_runs_no_task_and_retries_from_its_first_attempt(producer):
    """With the route cached and the connections open, ``send_async`` sends its first attempt at once (its
    future is no task); a failed first attempt is retried on the other broker within the async count."""
    p, instance = await producer(retry_times_when_send_async_failed=1)
    await p.send(Message.create("t", "to a"))  # the connections open; round robin: a, b, then a again
    await p.send(Message.create("t", "to b"))
    first = p.send_async(Message.create("t", "at once"))
    assert not isinstance(first, asyncio.Task)
    assert (await first).message_queue.broker_name == "a"
    await p.send(Message.create("t", "to b again"))
    instance.behave("a", "down")
    result = await p.send_async(Message.create("t", "retried"))
    assert result.message_queue.broker_name == "b" and (instance.sends("a"), instance.sends("b")) == (3, 3)
    instance.behave("b", "down")  # a is down too, its connection gone: the retry count is the async one
    with pytest.raises(RemotingError):
        await p.send_async(Message.create("t", "lost"))
    assert instance.sends("a") + instance.sends("b") == 8
