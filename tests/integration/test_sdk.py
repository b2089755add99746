"""The SDK against real processes.

- One ``pocketmq serve`` (embedded name server) for the module: sync and batch sends read back intact, in
  per-queue order; committed offsets; offset by timestamp.
- (slow) A standalone ``pocketmq namesrv`` and two brokers: the route lists both; 10,000 sends spread over
  8 queues and both brokers and all read back in per-queue order; a broker that stops heartbeating (frozen
  with SIGSTOP) leaves the route within the name server's expiry and later sends all go to the other broker.
- (slow) ``kill -9`` of a SYNC_FLUSH broker while a producer sends: every send that returned OK is read back
  after the restart.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time

import pytest

from pocketmq.client import (
    Admin,
    AsyncAdmin,
    AsyncProducer,
    AsyncPullConsumer,
    ClientConfig,
    Message,
    MessageQueue,
    Producer,
    ProducerOptions,
    PullConsumer,
    PullStatus,
    SendResult,
    SendStatus,
)
from pocketmq.common.errors import PocketMQError
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process, namesrv_process


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("sdk"), "broker-sdk").start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def config(broker) -> ClientConfig:
    return ClientConfig(namesrv_addr=broker.namesrv)


def read_queue(consumer: PullConsumer, queue: MessageQueue, start: int = 0) -> list:
    """Every message of ``queue`` from ``start`` to its max offset, pulled in batches."""
    messages, offset = [], start
    end = consumer.max_offset(queue)
    while offset < end:
        result = consumer.pull(queue, offset, 64)
        assert result.status is PullStatus.FOUND, result
        messages += result.messages
        offset = result.next_begin_offset
    return messages


def test_sync_and_batch_sends_read_back_intact_in_queue_order(config):
    with Admin(config) as admin:
        assert admin.create_topic("sdk_roundtrip", queues=4) == ["broker-sdk"]
    sent = {}
    with Producer(config) as producer:
        for i in range(40):
            msg = Message.create(
                "sdk_roundtrip",
                f"single-{i}",
                tags=f"tag{i % 3}",
                keys=[f"k{i}", "common"],
                properties={"seq": str(i), "emoji": "✓"},
            )
            result = producer.send(msg)
            assert result.status is SendStatus.SEND_OK
            sent[result.msg_id] = (msg, result)
        batch = [
            Message.create("sdk_roundtrip", bytes([0xFF, i]), tags="batch", properties={"seq": str(100 + i)})
            for i in range(10)
        ]
        batch_result = producer.send_batch(batch)
        assert len(batch_result.message_ids) == 10
        for msg, msg_id in zip(batch, batch_result.message_ids):
            sent[msg_id] = (msg, batch_result)
    assert len({r.queue_id for _, r in sent.values()}) == 4  # round robin used every queue

    received = {}
    with PullConsumer("sdk-roundtrip", config) as consumer:
        queues = consumer.fetch_queues("sdk_roundtrip")
        assert len(queues) == 4
        for queue in queues:
            messages = read_queue(consumer, queue)
            assert [m.queue_offset for m in messages] == list(range(len(messages)))
            seqs = [int(m.properties["seq"]) for m in messages]
            assert seqs == sorted(seqs), f"queue {queue} out of order: {seqs}"
            received.update({m.msg_id: m for m in messages})
    assert received.keys() == sent.keys()
    for msg_id, (msg, result) in sent.items():
        got = received[msg_id]
        assert (got.body, got.tags, got.keys, got.user_properties()) == (
            msg.body,
            msg.tags,
            msg.keys,
            msg.user_properties(),
        )
        assert got.queue_id == result.queue_id
    batch_offsets = sorted(m.queue_offset for m in received.values() if m.tags == "batch")
    assert batch_offsets == list(range(batch_result.queue_offset, batch_result.queue_offset + 10))


def test_commit_min_max_and_offset_by_timestamp(config):
    with Admin(config) as admin:
        admin.create_topic("sdk_offsets", queues=1)
    with Producer(config) as producer, PullConsumer("sdk-offsets", config) as consumer:
        queue = consumer.fetch_queues("sdk_offsets")[0]
        first = [producer.send(Message.create("sdk_offsets", f"early-{i}"), queue=queue) for i in range(5)]
        boundary_ms = int(time.time() * 1000) + 5
        wait_until(
            lambda: int(time.time() * 1000) > boundary_ms, 2.0, "the clock passing the boundary", interval_s=0.001
        )
        later = [producer.send(Message.create("sdk_offsets", f"late-{i}"), queue=queue) for i in range(3)]
        assert [r.queue_offset for r in first + later] == list(range(8))

        assert (consumer.min_offset(queue), consumer.max_offset(queue)) == (0, 8)
        assert consumer.offset_for_timestamp(queue, boundary_ms) == 5
        assert consumer.offset_for_timestamp(queue, 0) == 0

        assert consumer.committed(queue) in (None, 0)  # never committed: RocketMQ answers 0 (BROKER notes)
        consumer.commit(queue, 6)
        assert consumer.committed(queue) == 6
        result = consumer.pull(queue, consumer.committed(queue), 10)
        assert [m.body for m in result.messages] == [b"late-1", b"late-2"]
        assert result.next_begin_offset == 8
        assert consumer.pull(queue, 8, 10).status is PullStatus.NO_NEW_MSG


def test_threads_share_one_sync_producer_each_on_a_channel_of_its_own(config):
    """Sync sends do their I/O in the calling thread (client/blocking_channel.py): threads sending at once on one
    producer each get their own reply, and every message lands exactly once."""
    with Admin(config) as admin:
        admin.create_topic("sdk_threads", queues=2)
    results: dict[int, list] = {}
    with Producer(config) as producer:

        def send_from(thread: int) -> None:
            results[thread] = [producer.send(Message.create("sdk_threads", f"{thread}-{i}")) for i in range(50)]

        threads = [threading.Thread(target=send_from, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(results) == [0, 1, 2, 3]
        with pytest.raises(RuntimeError, match="client loop itself"):  # it would block the loop it waits for
            producer._loop.run(_send_on_the_loop(producer))
    placed = [(r.queue_id, r.queue_offset) for sends in results.values() for r in sends]
    assert len(set(placed)) == 200
    with PullConsumer("sdk-threads", config) as consumer:
        bodies = [
            m.body.decode() for queue in consumer.fetch_queues("sdk_threads") for m in read_queue(consumer, queue)
        ]
    assert sorted(bodies) == sorted(f"{t}-{i}" for t in range(4) for i in range(50))


async def test_auto_batch_stores_concurrent_sends_as_batches_each_with_its_own_result(config):
    """``ProducerOptions(auto_batch=True)``: 120 concurrent sends travel as a few batches (each batch lands at
    consecutive offsets of one queue); every send's result names its own message; a delayed send and a message
    group's send still go alone (a batch refuses delayed messages; the group keeps its queue)."""
    async with AsyncAdmin(config) as admin:
        await admin.create_topic("sdk_auto_batch", queues=4)
    async with AsyncProducer(config, ProducerOptions(auto_batch=True)) as producer:
        plain = [Message.create("sdk_auto_batch", f"plain-{i}", keys=[f"k{i}"]) for i in range(120)]
        grouped = Message.create("sdk_auto_batch", "grouped", message_group="g1")
        delayed = Message.create("sdk_auto_batch", "delayed")
        results = await asyncio.gather(
            *(producer.send(m) for m in plain), producer.send(grouped), producer.send(delayed, delay_level=1)
        )
    placed = {(r.queue_id, r.queue_offset): r for r in results[:121]}  # the delayed one waits in the timer topic
    assert len(placed) == 121
    runs = sum(1 for (queue, offset) in placed if (queue, offset - 1) not in placed)
    assert runs < 40, f"{runs} runs of consecutive offsets: the sends were not batched"
    async with AsyncPullConsumer("sdk-auto-batch", config) as consumer:
        stored = {}
        for queue in await consumer.fetch_queues("sdk_auto_batch"):
            result = await consumer.pull(queue, 0, 200)
            stored.update({(m.queue_id, m.queue_offset): m for m in result.messages})
    for message, result in zip(plain + [grouped], results):
        got = stored[(result.queue_id, result.queue_offset)]
        assert (got.body, got.msg_id, got.keys) == (message.body, result.msg_id, message.keys)
    async with AsyncProducer(config) as alone:
        again = await alone.send(Message.create("sdk_auto_batch", "grouped again", message_group="g1"))
    assert again.queue_id == results[120].queue_id


async def test_auto_batch_fails_only_the_message_the_broker_refuses(config):
    """A message the broker refuses (properties over its 32 KiB limit) makes it refuse the whole batch, which is
    then sent message by message: only that send fails, the others are stored once."""
    async with AsyncAdmin(config) as admin:
        await admin.create_topic("sdk_auto_batch_refused", queues=1)
    async with AsyncProducer(config, ProducerOptions(auto_batch=True)) as producer:
        messages = [Message.create("sdk_auto_batch_refused", f"ok-{i}") for i in range(5)]
        messages.insert(2, Message.create("sdk_auto_batch_refused", "too big", properties={"big": "x" * 40_000}))
        outcomes = await asyncio.gather(*(producer.send(m) for m in messages), return_exceptions=True)
    assert isinstance(outcomes[2], PocketMQError)
    assert all(isinstance(o, SendResult) for i, o in enumerate(outcomes) if i != 2)
    async with AsyncPullConsumer("sdk-auto-batch-refused", config) as consumer:
        [queue] = await consumer.fetch_queues("sdk_auto_batch_refused")
        stored = (await consumer.pull(queue, 0, 32)).messages
    assert sorted(m.body for m in stored) == [f"ok-{i}".encode() for i in range(5)]


async def _send_on_the_loop(producer: Producer):
    return producer.send(Message.create("sdk_threads", "from the loop"))


def test_a_busy_polling_broker_and_producer_send_and_read_back(tmp_path):
    """``serve --busy-poll-us`` and ``ClientConfig(sync_reply_busy_poll_us=...)``: the polling loop serves sends,
    pulls and admin calls like the sleeping one."""
    proc = broker_process(tmp_path, "broker-poll", extra_args=["--busy-poll-us", "300"]).start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv, sync_reply_busy_poll_us=300)
        with Admin(config) as admin:
            admin.create_topic("sdk_busy_poll", queues=1)
        with Producer(config) as producer, PullConsumer("sdk-busy-poll", config) as consumer:
            results = [producer.send(Message.create("sdk_busy_poll", f"m{i}")) for i in range(20)]
            assert [r.queue_offset for r in results] == list(range(20))
            queue = consumer.fetch_queues("sdk_busy_poll")[0]
            assert [m.body for m in read_queue(consumer, queue)] == [f"m{i}".encode() for i in range(20)]
    finally:
        assert proc.stop() == 0, proc.log_tail()


def test_send_to_an_illegal_topic_fails_before_the_wire(config):
    with Producer(config) as producer, pytest.raises(PocketMQError, match="characters"):
        producer.send(Message.create("bad topic", "x"))


# -- two brokers and a standalone name server -------------------------------------------------------------------
BROKER_EXPIRE_MS = 3_000
REGISTER_INTERVAL_MS = 500


@pytest.fixture
def two_brokers(tmp_path):
    conf = tmp_path / "namesrv.toml"
    conf.write_text(f"[namesrv]\nbroker_expire_ms = {BROKER_EXPIRE_MS}\nscan_interval_ms = 200\n")
    namesrv = namesrv_process(tmp_path / "ns", extra_args=["--config", str(conf)]).start()
    brokers = [
        broker_process(
            tmp_path / name,
            name,
            namesrv=namesrv.namesrv,
            extra_args=["--register-interval-ms", str(REGISTER_INTERVAL_MS)],
        ).start()
        for name in ("broker-a", "broker-b")
    ]
    yield namesrv, brokers
    for proc in [*brokers, namesrv]:
        if proc.proc.poll() is None:
            os.kill(proc.proc.pid, signal.SIGCONT)  # a test may have frozen it
        proc.stop()


@pytest.mark.slow
async def test_a_topic_created_in_one_cluster_stays_out_of_the_other(tmp_path):
    """The admin's wait for the new route must not make the name server auto-create the topic elsewhere."""
    namesrv = namesrv_process(tmp_path / "ns").start()
    brokers = [
        broker_process(
            tmp_path / name,
            name,
            namesrv=namesrv.namesrv,
            extra_args=["--cluster", cluster, "--register-interval-ms", str(REGISTER_INTERVAL_MS)],
        ).start()
        for name, cluster in (("broker-a", "cluster-a"), ("broker-b", "cluster-b"))
    ]
    try:
        config = ClientConfig(namesrv_addr=namesrv.namesrv)
        async with AsyncAdmin(config) as admin:
            assert await admin.create_topic("sdk_one_cluster", queues=2, cluster="cluster-a") == ["broker-a"]
            route = await admin.instance.fetch_route_data("sdk_one_cluster", auto_create=False)
            assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
            # a lookup that created the topic would have done so before the route above showed it
            reply = await admin.instance.remoting.invoke(
                brokers[1].remoting, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), 5
            )
            assert "sdk_one_cluster" not in json.loads(reply.body)["topicConfigTable"]
    finally:
        for proc in [*brokers, namesrv]:
            proc.stop()


async def send_many(producer: AsyncProducer, topic: str, count: int, in_flight: int = 64) -> dict:
    """Send ``count`` messages with ``in_flight`` concurrent sends; message id -> SendResult."""
    results, next_index = {}, iter(range(count))

    async def worker() -> None:
        for i in next_index:
            result = await producer.send(Message.create(topic, f"m-{i}"))
            results[result.msg_id] = result

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return results


async def read_all(consumer: AsyncPullConsumer, topic: str) -> dict[MessageQueue, list]:
    by_queue = {}
    for queue in await consumer.fetch_queues(topic):
        messages, offset, end = [], 0, await consumer.max_offset(queue)
        while offset < end:
            result = await consumer.pull(queue, offset, 256)
            messages += result.messages
            offset = result.next_begin_offset
        by_queue[queue] = messages
    return by_queue


@pytest.mark.slow
async def test_two_brokers_share_the_sends_and_a_dead_broker_leaves_the_route(two_brokers):
    namesrv, (broker_a, broker_b) = two_brokers
    config = ClientConfig(namesrv_addr=namesrv.namesrv, poll_name_server_interval_ms=200)
    async with (
        AsyncAdmin(config) as admin,
        AsyncProducer(config) as producer,
        AsyncPullConsumer("sdk-two-brokers", config) as consumer,
    ):
        assert await admin.create_topic("sdk_spread", queues=4) == ["broker-a", "broker-b"]
        route = await admin.instance.fetch_route_data("sdk_spread")
        assert sorted((q.broker_name, q.write_queue_nums) for q in route.queue_datas) == [
            ("broker-a", 4),
            ("broker-b", 4),
        ]
        sent = await send_many(producer, "sdk_spread", 10_000)
        assert len(sent) == 10_000
        assert {(r.message_queue.broker_name, r.queue_id) for r in sent.values()} == {
            (b, q) for b in ("broker-a", "broker-b") for q in range(4)
        }

        by_queue = await read_all(consumer, "sdk_spread")
        assert len(by_queue) == 8
        expected = {}
        for msg_id, result in sent.items():
            expected.setdefault(result.message_queue, {})[result.queue_offset] = msg_id
        for queue, messages in by_queue.items():
            # per-queue order: the queue holds exactly the ids sent to it, each at the offset its send returned
            assert [m.queue_offset for m in messages] == list(range(len(messages)))
            assert [m.msg_id for m in messages] == [expected[queue][o] for o in sorted(expected[queue])]

        # Frozen, not killed: its connections stay open, so only the missing heartbeats can drop it (a closed
        # connection drops a broker at once, as in RocketMQ).
        os.kill(broker_b.proc.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()

        async def route_brokers() -> set[str]:
            data = await admin.instance.fetch_route_data("sdk_spread")
            return {q.broker_name for q in data.queue_datas}

        while await route_brokers() != {"broker-a"}:
            assert time.monotonic() - frozen_at < BROKER_EXPIRE_MS / 1000 + 3, "broker-b still in the route"
            await asyncio.sleep(0.1)
        assert time.monotonic() - frozen_at > BROKER_EXPIRE_MS / 1000 - REGISTER_INTERVAL_MS / 1000
        while producer.instance.cached_route("sdk_spread").broker_names != ["broker-a"]:
            assert time.monotonic() - frozen_at < BROKER_EXPIRE_MS / 1000 + 6, "the client kept broker-b"
            await asyncio.sleep(0.05)
        after = await send_many(producer, "sdk_spread", 200, in_flight=8)
        assert {r.message_queue.broker_name for r in after.values()} == {"broker-a"}


@pytest.mark.slow
def test_kill_minus_9_under_sync_flush_loses_no_acknowledged_message(tmp_path):
    broker = broker_process(tmp_path / "b", "broker-k", extra_args=["--flush", "sync"]).start()
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv)
        with Admin(config) as admin:
            admin.create_topic("sdk_crash", queues=4)
        acked: list[str] = []
        stop = threading.Event()
        failures: list[Exception] = []

        def produce() -> None:
            with Producer(config) as producer:
                i = 0
                while not stop.is_set():
                    try:
                        acked.append(producer.send(Message.create("sdk_crash", f"c-{i}"), timeout_s=1.0).msg_id)
                    except PocketMQError as exc:
                        failures.append(exc)
                        return  # the broker is gone
                    i += 1

        sender = threading.Thread(target=produce)
        sender.start()
        wait_until(lambda: len(acked) >= 500, 30, message="500 acknowledged sends")
        broker.kill()
        sender.join(30)
        stop.set()
        assert not sender.is_alive()
        assert failures, "the producer never noticed the broker die"
        acked_ids = set(acked)

        broker.restart()
        config = ClientConfig(namesrv_addr=broker.namesrv)
        with PullConsumer("sdk-crash", config) as consumer:
            stored = {m.msg_id for q in consumer.fetch_queues("sdk_crash") for m in read_queue(consumer, q)}
        missing = acked_ids - stored
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:3]}"
    finally:
        broker.stop()
