"""Delayed messages through a real ``pocketmq serve``: 1,000 messages at mixed delays are all delivered, none
earlier than due (how late is speed: bench/timer.py); a broker restart in the middle loses and duplicates none.

Visibility time is the delivered record's store timestamp (the timer appends the real message when it fires;
a pull sees it from then on); due times are computed by the producer before sending, so they are never later
than the broker's own due time.
"""

from __future__ import annotations

import asyncio
import json
import random
import time

import pytest

from pocketmq.client import Admin, AsyncProducer, ClientConfig, Message, PullConsumer, PullStatus
from pocketmq.common.message import MessageQueue
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.transport import RemotingClient
from pocketmq.runtime.ports import free_port
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.slow


def timer_outstanding(broker_addr: str) -> int:
    """The broker's count of timers that may still fire (GET_BROKER_RUNTIME_INFO ``timerOutstanding``)."""

    async def ask() -> int:
        client = RemotingClient()
        try:
            reply = await client.invoke(broker_addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        finally:
            await client.close()
        return int(json.loads(reply.body)["table"]["timerOutstanding"])

    return asyncio.run(ask())


def read_all(consumer: PullConsumer, queue: MessageQueue) -> list:
    messages, offset = [], 0
    while offset < consumer.max_offset(queue):
        result = consumer.pull(queue, offset, 256)
        assert result.status is PullStatus.FOUND, result
        messages += result.messages
        offset = result.next_begin_offset
    return messages


async def send_delayed(config: ClientConfig, topic: str, delays_ms: list[int], tag: str) -> None:
    async with AsyncProducer(config) as producer:

        async def one(i: int, delay_ms: int) -> None:
            due_ms = int(time.time() * 1000) + delay_ms
            await producer.send(
                Message.create(topic, f"{tag}-{i}", properties={"TIMER_DELAY_MS": str(delay_ms), "due": str(due_ms)})
            )

        for start in range(0, len(delays_ms), 100):
            await asyncio.gather(*(one(i, d) for i, d in enumerate(delays_ms[start : start + 100], start)))


def test_thousand_mixed_delays_all_delivered_and_never_early(tmp_path):
    proc = broker_process(tmp_path, "broker-delay").start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv, instance_name="delay-test")
        with Admin(config) as admin:
            admin.create_topic("delayed", queues=1)
        rng = random.Random(7)
        delays = [rng.choice((200, 500, 1000, 1500, 2500)) + rng.randrange(100) for _ in range(1000)]
        asyncio.run(send_delayed(config, "delayed", delays, "m"))
        queue = MessageQueue("delayed", "broker-delay", 0)
        with PullConsumer("delay_reader", config) as reader:
            wait_until(lambda: reader.max_offset(queue) >= 1000, timeout_s=15, message="1000 deliveries")
            messages = read_all(reader, queue)
        assert sorted(m.body.decode() for m in messages) == sorted(f"m-{i}" for i in range(1000))
        lateness = [m.store_timestamp_ms - int(m.properties["due"]) for m in messages]
        # How late they are is a matter of speed, measured by bench/timer.py (docs/benchmarks.md), not here.
        assert min(lateness) >= 0, "a message became visible before it was due"
    finally:
        proc.stop()


def test_restart_in_the_middle_loses_and_duplicates_none(tmp_path):
    ports = ["--remoting-port", str(free_port()), "--port", str(free_port()), "--namesrv-port", str(free_port())]
    proc = broker_process(tmp_path, "broker-restart", extra_args=ports).start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv, instance_name="restart-test")
        with Admin(config) as admin:
            admin.create_topic("delayed_restart", queues=1)
        delays = [300 + (i * 37) % 2500 for i in range(300)]
        asyncio.run(send_delayed(config, "delayed_restart", delays, "r"))
        queue = MessageQueue("delayed_restart", "broker-restart", 0)
        with PullConsumer("restart_reader", config) as reader:
            wait_until(lambda: reader.max_offset(queue) >= 50, timeout_s=10, message="some deliveries")
        proc.kill()  # kill -9 in the middle: some delivered, most pending
        proc.restart()
        with PullConsumer("restart_reader2", config) as reader:
            wait_until(lambda: reader.max_offset(queue) >= 300, timeout_s=20, message="all deliveries")
            # Nothing left that could fire: a duplicate delivery would already be in the queue.
            wait_until(lambda: timer_outstanding(proc.remoting) == 0, timeout_s=10, message="no timer outstanding")
            messages = read_all(reader, queue)
        bodies = [m.body.decode() for m in messages]
        assert sorted(bodies) == sorted(f"r-{i}" for i in range(300)), "lost or duplicated"
        assert all(m.store_timestamp_ms >= int(m.properties["due"]) for m in messages)
    finally:
        proc.stop()


def test_official_client_delay_message_is_visible_at_its_delivery_time(tmp_path):
    """A DELAY message from the unmodified official client (``delivery_timestamp``) becomes visible at its
    delivery time: not before, within 1 s after."""
    from grpc_support import run_official_client

    from pocketmq.common.topic import MessageType

    proc = broker_process(tmp_path, "broker-odelay").start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv, instance_name="official-delay-test")
        with Admin(config) as admin:
            admin.create_topic("odelayed", queues=1, message_type=MessageType.DELAY)
        outcomes = run_official_client(
            {"endpoint": proc.grpc, "topic": "odelayed", "count": 5, "prefix": "od", "delay_s": 2}, tmp_path / "home"
        )
        assert [o["ok"] for o in outcomes] == [True] * 5, outcomes
        due_ms = {o["message_id"]: o["due_ms"] for o in outcomes}
        queue = MessageQueue("odelayed", "broker-odelay", 0)
        with PullConsumer("odelay_reader", config) as reader:
            wait_until(lambda: reader.max_offset(queue) >= 5, timeout_s=15, message="5 deliveries")
            messages = read_all(reader, queue)
        assert sorted(m.body.decode() for m in messages) == sorted(f"od-{i}" for i in range(5))
        for m in messages:
            lateness_ms = m.store_timestamp_ms - due_ms[m.properties["UNIQ_KEY"]]
            assert 0 <= lateness_ms <= 1000, f"{m.body!r} visible {lateness_ms} ms after its delivery time"
    finally:
        proc.stop()
