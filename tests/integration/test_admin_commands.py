"""The operator's commands against a real broker: finding and showing messages (``pocketmq message
query|show``), the topic's route and the broker's status, and a group's online push consumers: listed with
their running info, following an offset reset, and consuming one message directly."""

from __future__ import annotations

import json
import queue
import threading
from datetime import UTC, datetime

import pytest
from grpc_support import CLIENT_ID, consumer_settings, stub
from rocketmq.grpc_protocol import definition_pb2 as pb

from pocketmq.cli.main import main as pocketmq_main
from pocketmq.client import Admin, ClientConfig, Message, Producer, PullConsumer, SimpleConsumer
from pocketmq.client.listener import ConsumeConcurrentlyStatus
from pocketmq.client.push_consumer import PushConsumer, PushConsumerOptions
from pocketmq.common.message import MessageQueue
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process
from pocketmq.testing.processes import run_cli as pocketmq

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("admin"), "broker-adm").start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture
def cli(broker, capsys):
    """``pocketmq ARGS -n NAMESRV`` in this process (a process start per command is slow): (status, stdout,
    stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        status = pocketmq_main([*args, "-n", broker.namesrv])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.timeout(90)
def test_messages_are_found_by_key_id_offset_and_time_and_shown_in_full(broker, cli):
    config = ClientConfig(namesrv_addr=broker.namesrv, instance_name="adm-producer")
    with Admin(config) as admin:
        admin.create_topic("adm_orders", queues=2)
    with Producer(config) as producer:
        as_json = producer.send(Message.create("adm_orders", b'{"id": 42, "items": [1, 2]}', keys="order-42"))
        binary = producer.send(Message.create("adm_orders", bytes(range(250, 256)) + b"xyz", keys="bin-1"))
        plain = [producer.send(Message.create("adm_orders", f"plain-{i}", keys="plain")) for i in range(3)]
        big_body = json.dumps({"lines": [f"line {i}" for i in range(1000)]}).encode()  # compressed when sent
        big = producer.send(Message.create("adm_orders", big_body, keys="big"))

    status, out, _ = cli("message", "query", "adm_orders", "--key", "order-42", "--json")
    assert status == 0
    [found] = json_lines(out)
    assert (found["message_id"], found["keys"], found["queue_id"]) == (
        as_json.msg_id,
        ["order-42"],
        as_json.message_queue.queue_id,
    )
    status, out, _ = cli("message", "query", "adm_orders", "--key", "plain")
    assert status == 0 and out.splitlines()[0].split()[:3] == ["BROKER", "QUEUE_ID", "QUEUE_OFFSET"]
    assert sorted(line.split()[3] for line in out.splitlines()[1:]) == sorted(r.msg_id for r in plain)

    # the broker's offset id and the producer's id (with the topic) name the same message
    for msg_id in (binary.offset_msg_id, binary.msg_id):
        status, out, _ = cli("message", "query", "adm_orders", "--id", msg_id, "--json")
        assert status == 0 and [m["message_id"] for m in json_lines(out)] == [binary.msg_id]
    queue = plain[1].message_queue
    spot = f"{queue.broker_name}:{queue.queue_id}:{plain[1].queue_offset}"
    status, out, _ = cli("message", "query", "adm_orders", "--offset", spot, "--json")
    assert status == 0 and [m["body"] for m in json_lines(out)] == ["plain-1"]
    stored = {
        m["message_id"]: m["store_timestamp_ms"]
        for m in json_lines(cli("message", "query", "adm_orders", "--key", "plain", "--json")[1])
    }
    first, last = min(stored.values()), max(stored.values())
    status, out, _ = cli("message", "query", "adm_orders", "--time", f"{first}..{last}", "--json")
    assert status == 0 and set(stored) <= {m["message_id"] for m in json_lines(out)}
    status, out, _ = cli("message", "query", "adm_orders", "--time", f"{last + 60_000}..{last + 120_000}", "--json")
    assert (status, out) == (0, "")

    status, out, _ = cli("message", "show", as_json.offset_msg_id)
    assert status == 0
    assert '{\n  "id": 42,\n  "items": [\n    1,' in out  # pretty-printed JSON
    assert "keys:" in out and "order-42" in out and "(json)" in out
    status, out, _ = cli("message", "show", binary.msg_id, "--topic", "adm_orders")
    assert status == 0 and "fa fb fc fd fe ff 78 79 7a" in out and "......xyz" in out
    status, out, _ = cli("message", "show", big.offset_msg_id, "--json")
    assert status == 0 and json.loads(out)["body"] == big_body.decode()
    status, out, _ = cli("message", "show", binary.offset_msg_id, "--json")
    shown = json.loads(out)
    assert (shown["body_format"], shown["body_encoding"], shown["offset_msg_id"]) == (
        "hex",
        "base64",
        binary.offset_msg_id,
    )
    assert shown["system_properties"]["KEYS"] == "bin-1"

    status, out, _ = cli("topic", "route", "adm_orders", "--json")
    assert status == 0
    [route] = json_lines(out)
    assert (route["broker"], route["broker_id"], route["read_queues"], route["perm"]) == ("broker-adm", 0, 2, "rw")
    status, out, _ = cli("broker", "status", "--json")
    [row] = json_lines(out)
    assert status == 0 and row["broker"] == "broker-adm" and int(row["put"]) >= 5
    assert row["runtime_info"]["brokerAddr"] == row["address"]

    # failures: one line on stderr, status 1 (one real process: the exit status as a shell sees it)
    unknown = pocketmq(
        "message", "show", "00000000000000000000000000000000", "--topic", "adm_orders", namesrv=broker.namesrv
    )
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert len(unknown.stderr.strip().splitlines()) == 1 and "no message" in unknown.stderr
    status, _, err = cli("topic", "route", "adm_no_such_topic")
    assert status == 1 and len(err.strip().splitlines()) == 1
    status, _, err = cli("message", "query", "adm_orders", "--time", "yesterday..")
    assert status == 1 and "ISO-8601" in err


@pytest.mark.timeout(120)
def test_push_consumer_lists_follows_a_reset_and_consumes_directly(broker, cli):
    topic, group = "adm_reset", "adm_group"
    config = ClientConfig(namesrv_addr=broker.namesrv, instance_name="adm-app")
    consumed: list[str] = []
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            consumed.extend(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    with Admin(config) as admin:
        admin.create_topic(topic, queues=2)
    consumer = PushConsumer(
        PushConsumerOptions(group, persist_interval_ms=200, long_poll_ms=500),
        ClientConfig(namesrv_addr=broker.namesrv, instance_name="adm-consumer"),
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    consumer.start()
    try:
        with Producer(config) as producer:
            first = [producer.send(Message.create(topic, f"m{i}")) for i in range(6)]
            wait_until(lambda: len(consumed) >= 6, timeout_s=15, message="first delivery")
            later = [producer.send(Message.create(topic, f"later{i}")) for i in range(4)]
        wait_until(lambda: len(consumed) >= 10, timeout_s=15, message="second delivery")

        status, out, _ = cli("group", "consumers", group, "--json")
        assert status == 0
        [row] = json_lines(out)
        client_id = row["client_id"]
        assert client_id.endswith("@adm-consumer") and row["language"] == "PYTHON" and row["model"] == "CLUSTERING"
        info = row["running_info"]
        assert {(q["topic"], q["queueId"]) for q in info["mqTable"]} >= {(topic, 0), (topic, 1)}
        assert {s["topic"] for s in info["subscriptionSet"]} == {topic, f"%RETRY%{group}"}
        assert row["queues"] == len(info["mqTable"]) and int(row["consumed"]) >= 10

        # online, to the time of the later batch (ISO-8601): the consumer is told, and consumes that batch again
        status, out, _ = cli("message", "query", topic, "--id", later[0].msg_id, "--json")
        stored_ms = json_lines(out)[0]["store_timestamp_ms"]
        at = datetime.fromtimestamp(stored_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
        status, out, _ = cli("group", "reset-offset", group, topic, "--to-time", at, "--json")
        assert status == 0 and {r["consumers_notified"] for r in json_lines(out)} == {1}
        wait_until(lambda: len(consumed) >= 14, timeout_s=15, message="consumed again after the reset")
        assert sorted(consumed[10:14]) == sorted(f"later{i}" for i in range(4))

        status, out, _ = cli(
            "message", "consume-directly", first[3].offset_msg_id, "--group", group, "--client", client_id, "--json"
        )
        assert status == 0, out
        assert json.loads(out)["result"] == "CR_SUCCESS"
        wait_until(lambda: consumed.count("m3") == 2, timeout_s=5, message="handed to the listener once more")
        status, _, err = cli(
            "message", "consume-directly", first[3].offset_msg_id, "--group", group, "--client", "nobody@x"
        )
        assert status == 1 and "not online" in err
    finally:
        consumer.shutdown()

    # offline: the stored offset moves, and the consumer would start there
    status, out, _ = cli("group", "reset-offset", group, topic, "--to-earliest", "--json")
    assert status == 0
    assert sorted((r["queue_id"], r["offset"], r["consumers_notified"]) for r in json_lines(out)) == [
        (0, 0, 0),
        (1, 0, 0),
    ]
    with PullConsumer(group, config) as reader:
        queues = [MessageQueue(topic, "broker-adm", q) for q in (0, 1)]
        assert [reader.committed(q) for q in queues] == [0, 0]
    status, _, err = cli("group", "consumers", group)
    assert status == 1 and "no consumer" in err


@pytest.mark.timeout(60)
def test_grpc_consumers_are_listed_with_their_address_and_filter(broker, cli):
    topic, group = "adm_grpc_listed", "adm_grpc_listed_g"
    with Admin(ClientConfig(namesrv_addr=broker.namesrv)) as admin:
        admin.create_topic(topic, queues=1)
    channel, v2 = stub(broker.grpc)
    outgoing: queue.Queue = queue.Queue()
    outgoing.put(consumer_settings(group, topic, pb.SQL, "region = 'eu'"))
    replies = v2.Telemetry(iter(outgoing.get, None), metadata=CLIENT_ID)
    try:
        assert next(replies).status.code == V2StatusCode.OK  # the settings are taken
        status, out, err = cli("group", "consumers", group, "--json")
        assert status == 0, err
        [row] = json_lines(out)
        assert (row["client_id"], row["protocol"]) == (CLIENT_ID[0][1], "grpc")
        assert row["address"].startswith("127.0.0.1:") and "running_info_error" not in row
        assert row["subscriptions"] == {topic: {"type": "SQL92", "expression": "region = 'eu'"}}
    finally:
        outgoing.put(None)
        replies.cancel()
        channel.close()


@pytest.mark.timeout(90)
def test_pop_consumers_pop_from_a_reset_offset(broker, cli):
    topic, group = "adm_pop", "adm_pop_group"
    config = ClientConfig(namesrv_addr=broker.namesrv, instance_name="adm-pop")
    with Admin(config) as admin:
        admin.create_topic(topic, queues=2)
    with Producer(config) as producer:
        for i in range(4):
            producer.send(Message.create(topic, f"p{i}"))

    def receive_all(consumer: SimpleConsumer) -> list[str]:
        bodies: list[str] = []

        def more() -> bool:
            for msg in consumer.receive(32, 30_000, await_duration_ms=500):
                bodies.append(msg.body.decode())
                consumer.ack(msg)
            return len(bodies) >= 4

        wait_until(more, timeout_s=20, message="all four popped")
        return sorted(bodies)

    with SimpleConsumer(group, {topic: "*"}, config) as consumer:
        assert receive_all(consumer) == ["p0", "p1", "p2", "p3"]
        status, out, _ = cli("group", "reset-offset", group, topic, "--to-earliest", "--json")
        assert status == 0 and {r["offset"] for r in json_lines(out)} == {0}
        assert receive_all(consumer) == ["p0", "p1", "p2", "p3"]
