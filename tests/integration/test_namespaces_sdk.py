"""The SDK's ``ClientConfig(namespace=...)`` against a real ``pocketmq serve``: producers, push, pull and simple
consumers and the admin client of namespaces ``a`` and ``b`` use the same topic and group names and stay apart;
the broker holds their names as RocketMQ's remoting clients of a namespace send them (``a%orders``,
``%RETRY%a%g``, ``%DLQ%a%g``) while the SDK hands back the user's names; and a message the SDK sends in
namespace ``a`` reaches the official Python client of namespace ``a`` by the same topic name."""

from __future__ import annotations

import json
import threading

import pytest
from test_namespaces import run_script

from pocketmq.client import (
    Admin,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LocalTransactionState,
    Message,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    PushConsumerOptions,
    SimpleConsumer,
    TransactionProducer,
)
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process, run_cli

pytestmark = pytest.mark.slow
NAMESPACES = ("a", "b")


def send_all(config: ClientConfig, ns: str) -> list[str]:
    """Sync, batch and async sends of namespace ``ns``; every result names the user's topic."""
    with Producer(config) as producer:
        results = [producer.send(Message.create("orders", f"{ns}-{i}")) for i in range(2)]
        results.append(producer.send_batch([Message.create("orders", f"{ns}-batch-{i}") for i in range(2)]))
        results.append(producer.send_async(Message.create("orders", f"{ns}-async")).result(timeout=10))
        results.append(producer.send(Message.create("orders", f"{ns}-retry-me")))
        results.append(producer.send(Message.create("orders", f"{ns}-dead")))
    assert {r.message_queue.topic for r in results} == {"orders"}
    return sorted(
        [f"{ns}-0", f"{ns}-1", f"{ns}-batch-0", f"{ns}-batch-1", f"{ns}-async", f"{ns}-retry-me", f"{ns}-dead"]
    )


def push_consume(config: ClientConfig, expected: int) -> tuple[list[tuple[str, str]], list[str]]:
    """(topic, body) of every delivery to push group ``g``: ``*-retry-me`` fails once (back through the group's
    retry topic), ``*-dead`` goes straight to its DLQ."""
    seen: list[tuple[str, str]] = []
    queues: list[str] = []
    lock = threading.Lock()

    def listener(msgs, context):
        with lock:
            queues.append(context.message_queue.topic)
            for msg in msgs:
                body = msg.body.decode()
                seen.append((msg.topic, body))
                if body.endswith("-dead"):
                    context.delay_level_when_next_consume = -1
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
                if body.endswith("-retry-me") and msg.reconsume_times == 0:
                    context.delay_level_when_next_consume = 1  # 1 s
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        PushConsumerOptions("g", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, long_poll_ms=1000),
        config,
    )
    consumer.subscribe("orders")
    consumer.register_listener(listener)
    consumer.start()
    try:
        wait_until(lambda: len(seen) >= expected, 30, message="every push delivery")
        assert {mq.topic for mq in consumer.assignment} == {"orders", "%RETRY%g"}
    finally:
        consumer.shutdown()
    return seen, queues


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("ns")).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.mark.timeout(150)
def test_sdk_namespaces_stay_apart_and_meet_the_official_client(broker, tmp_path):
    configs = {ns: ClientConfig(namesrv_addr=broker.namesrv, namespace=ns) for ns in NAMESPACES}
    for ns in NAMESPACES:
        with Admin(configs[ns]) as admin:
            admin.create_topic("orders", queues=2)
    sent = {ns: send_all(configs[ns], ns) for ns in NAMESPACES}

    for ns in NAMESPACES:
        # push: its own namespace's messages only, the user's topic on messages and queues, one retry
        seen, queues = push_consume(configs[ns], len(sent[ns]) + 1)
        assert {topic for topic, _ in seen} == {"orders"} and set(queues) <= {"orders", "%RETRY%g"}
        bodies = [body for _, body in seen]
        assert sorted(set(bodies)) == sent[ns] and bodies.count(f"{ns}-retry-me") == 2

        # pull: queues, messages and offsets by the user's names
        with PullConsumer("pg", configs[ns]) as pull:
            queues_of_topic = pull.fetch_queues("orders")
            assert {q.topic for q in queues_of_topic} == {"orders"}
            pulled = []
            for queue in queues_of_topic:
                result = pull.pull(queue, 0, 32)
                if result.status is PullStatus.FOUND:
                    pulled += result.messages
                    pull.commit(queue, result.next_begin_offset)
                    assert pull.committed(queue) == result.next_begin_offset
            assert {m.topic for m in pulled} == {"orders"} and sorted(m.body.decode() for m in pulled) == sent[ns]

        # simple (POP): receive and ack by the user's names
        with SimpleConsumer("sg", {"orders": "*"}, configs[ns], await_duration_ms=1000) as simple:
            received = []
            while len(received) < len(sent[ns]):
                batch = simple.receive(32)
                received += batch
                for msg in batch:
                    simple.ack(msg)
            assert {m.topic for m in received} == {"orders"}
            assert sorted(m.body.decode() for m in received) == sent[ns]

        with Admin(configs[ns]) as admin:
            # the namespace's own names only; the pull and simple groups' retry topics, made as they consume,
            # reach the name server's list with the broker's next registration
            topics = set(admin.list_topics())
            assert {"%DLQ%g", "orders"} <= topics <= {"%DLQ%g", "%RETRY%g", "%RETRY%pg", "%RETRY%sg", "orders"}
            assert set(admin.list_groups()) == {"g", "pg", "sg"}
            status = admin.describe_topic("%DLQ%g")
            assert status.message_count == 1 and {q.queue.topic for q in status.queues} == {"%DLQ%g"}

    # The broker holds the names a RocketMQ client of each namespace sends.
    with Admin(ClientConfig(namesrv_addr=broker.namesrv)) as admin:
        topics, groups = set(admin.list_topics()), set(admin.list_groups())
    for ns in NAMESPACES:
        assert {f"{ns}%orders", f"%RETRY%{ns}%g", f"%DLQ%{ns}%g"} <= topics
        assert {f"{ns}%g", f"{ns}%pg", f"{ns}%sg"} <= groups
    assert "orders" not in topics and "g" not in groups

    # The official client of namespace a gets what the SDK sent in namespace a, by the same topic name.
    spec = {"endpoint": broker.grpc, "topic": "orders", "group": "og", "namespace": "a", "deadline_s": 30}
    received = run_script("receive_official_client.py", {**spec, "count": len(sent["a"])}, tmp_path / "rcv")
    assert sorted(received["bodies"]) == sent["a"]


def pocketmq_cli(namesrv: str, *args: str, namespace_env: str | None = None) -> str:
    out = run_cli(*args, namesrv=namesrv, env={"POCKETMQ_NAMESPACE": namespace_env} if namespace_env else None)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.timeout(60)
def test_transactions_and_the_cli_in_a_namespace(broker):
    config = ClientConfig(namesrv_addr=broker.namesrv, namespace="a")
    with Admin(config) as admin:
        admin.create_topic("tx", queues=1)
    executed: list[str] = []

    def execute(message, arg):
        executed.append(message.topic)
        return arg

    with TransactionProducer(config, executor=execute, checker=lambda m: LocalTransactionState.UNKNOWN) as producer:
        for body, state in (("commit", LocalTransactionState.COMMIT), ("rollback", LocalTransactionState.ROLLBACK)):
            result = producer.send_in_transaction(Message.create("tx", body), state)
            assert result.send_result.message_queue.topic == "tx"
    assert executed == ["tx", "tx"]

    sent = json.loads(pocketmq_cli(broker.namesrv, "send", "tx", "--body", "cli", "--namespace", "a", "--json"))
    assert sent["topic"] == "tx"
    listed = [
        json.loads(line)["topic"]
        for line in pocketmq_cli(broker.namesrv, "topic", "list", "--json", namespace_env="a").splitlines()
    ]
    assert "tx" in listed and not any(t.startswith("a%") for t in listed)

    def committed_bodies() -> list[str]:
        with PullConsumer("tx-reader", config) as pull:
            (queue,) = pull.fetch_queues("tx")
            return sorted(m.body.decode() for m in pull.pull(queue, 0, 32).messages)

    wait_until(lambda: committed_bodies() == ["cli", "commit"], 10, message="the commit and the CLI's message")
    with Admin(ClientConfig(namesrv_addr=broker.namesrv)) as admin:
        assert "a%tx" in admin.list_topics() and "tx" not in admin.list_topics()
