"""Gray release for POP with the unmodified official RocketMQ 5 Python client (gRPC) against ``pocketmq serve``.

8 queues, ratio 0.25 (queues 6 and 7 gray). One official SimpleConsumer is made gray by the group's
``gray.clients`` attribute (the operator's rule; its client id is the client's own ``hostname@pid@...``), one
stays normal; an SDK gray producer and a normal one with the gray selector. The broker splits the queues
(QueryAssignment and every receive), failed gray messages come back only to the gray consumer, the gray
consumer's un-acked messages and new gray messages go to the normal consumer once it stops (none lost), and
the gray queues go back to a gray consumer that starts again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from tests.integration.grpc_support import client_env, stub
from tests.integration.test_cli import json_lines, pocketmq

from pocketmq.client import Admin, ClientConfig, Message, Producer, SimpleConsumer
from pocketmq.client.queue_select import GraySelector
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

SCRIPT = Path(__file__).with_name("gray_official_client.py")
TOPIC, GROUP, RATIO = "gray_pop", "g_gray_pop", 0.25
GRAY_QUEUE_IDS, NORMAL_QUEUE_IDS = [6, 7], list(range(6))

pytestmark = pytest.mark.slow


class OfficialConsumer:
    """An official SimpleConsumer process; what it received, as it arrives."""

    def __init__(self, endpoint: str, home: Path):
        spec = {"endpoint": endpoint, "topic": TOPIC, "group": GROUP, "invisible_s": 2}
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), json.dumps(spec)],
            env=client_env(home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[dict] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.client_id = wait_until(lambda: self._first("client_id"), timeout_s=20, message="official client up")

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self.lock:
                    self.lines.append(json.loads(line))

    def _first(self, key: str):
        with self.lock:
            return next((line[key] for line in self.lines if key in line), None)

    def received(self) -> list[tuple[str, int]]:
        with self.lock:
            return [(line["body"], line["attempt"]) for line in self.lines if "body" in line]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
            wait_until(lambda: self._first("stopped"), timeout_s=15, message="official client stopped")
        self.proc.wait(timeout=10)


def assigned_queue_ids(grpc_addr: str, client_id: str) -> list[int]:
    host, port = grpc_addr.rsplit(":", 1)
    channel, messaging = stub(grpc_addr)
    try:
        response = messaging.QueryAssignment(
            spb.QueryAssignmentRequest(
                topic=pb.Resource(name=TOPIC),
                group=pb.Resource(name=GROUP),
                endpoints=pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=int(port))]),
            ),
            metadata=(("x-mq-client-id", client_id),),
            timeout=5,
        )
    finally:
        channel.close()
    return sorted(a.message_queue.id for a in response.assignments)


def bodies(consumer: OfficialConsumer) -> set[str]:
    return {body for body, _ in consumer.received()}


def test_official_pop_consumers_split_retry_and_fall_back(tmp_path):
    proc = broker_process(tmp_path, "broker-gray-pop", extra_args=["--set", "pop_revive_interval_ms=100"]).start()
    consumers: list[OfficialConsumer] = []
    config = ClientConfig(namesrv_addr=proc.namesrv, gray_queue_ratio=RATIO)
    gray_producer = Producer(
        ClientConfig(
            namesrv_addr=proc.namesrv, instance_name="gray-producer", enable_gray_switch=True, gray_queue_ratio=RATIO
        )
    ).start()
    normal_producer = Producer(config, selector=GraySelector(RATIO)).start()

    def send(producer, names):
        for name in names:
            producer.send(Message.create(TOPIC, name))

    try:
        with Admin(config) as admin:
            admin.create_topic(TOPIC, queues=8)
            gray = OfficialConsumer(proc.grpc, tmp_path / "gray")
            normal = OfficialConsumer(proc.grpc, tmp_path / "normal")
            consumers += [gray, normal]
            gray_pid = gray.client_id.split("@")[1]  # the operator's rule: this host-and-process is the canary
            admin.create_group(GROUP, attributes={"gray.clients": f"*@{gray_pid}@*", "gray.queue.ratio": "0.25"})
        wait_until(
            lambda: (
                assigned_queue_ids(proc.grpc, gray.client_id) == GRAY_QUEUE_IDS
                and assigned_queue_ids(proc.grpc, normal.client_id) == NORMAL_QUEUE_IDS
            ),
            timeout_s=10,
            message="QueryAssignment splits gray and normal",
        )
        described = pocketmq("group", "describe", GROUP, "--json", "-n", proc.namesrv)
        assert described.returncode == 0, described.stderr
        clients = {r["client_id"]: r for r in json_lines(described.stdout) if "client_id" in r}
        assert (clients[gray.client_id]["gray"], clients[normal.client_id]["gray"]) == (True, False)
        assert clients[gray.client_id]["queues"] == [[TOPIC, q] for q in GRAY_QUEUE_IDS]  # the broker's share
        assert clients[normal.client_id]["queues"] == [[TOPIC, q] for q in NORMAL_QUEUE_IDS]
        table = pocketmq("group", "describe", GROUP, "-n", proc.namesrv).stdout
        assert f"{TOPIC}:6,7" in table and f"{TOPIC}:0,1,2,3,4,5" in table, table

        gray_names = [f"gray-{i}" + ("-fail" if i % 3 == 0 else "") for i in range(12)]
        normal_names = [f"normal-{i}" + ("-fail" if i % 3 == 0 else "") for i in range(12)]
        send(gray_producer, gray_names)
        send(normal_producer, normal_names)
        retried = {n for n in gray_names + normal_names if n.endswith("-fail")}
        wait_until(
            lambda: (
                {(n, 2) for n in retried if n.startswith("gray")} <= set(gray.received())
                and {(n, 2) for n in retried if n.startswith("normal")} <= set(normal.received())
            ),
            timeout_s=15,
            message="failed messages retried",
        )
        assert set(gray_names) <= bodies(gray) and not bodies(gray) & set(normal_names)
        assert set(normal_names) <= bodies(normal) and not bodies(normal) & set(gray_names)

        held = [f"hold-{i}" for i in range(4)]  # the gray consumer takes these and never acks them
        send(gray_producer, held)
        wait_until(lambda: set(held) <= bodies(gray), timeout_s=10, message="gray consumer holds messages")
        gray.stop()  # shut down: the broker drops its session, normal consumers get every queue at once
        assert assigned_queue_ids(proc.grpc, normal.client_id) == [-1]
        orphans = [f"orphan-{i}" for i in range(6)]
        send(gray_producer, orphans)
        wait_until(
            lambda: set(orphans + held) <= bodies(normal),
            timeout_s=15,
            message="normal consumer takes the gray consumer's messages over",
        )

        again = OfficialConsumer(proc.grpc, tmp_path / "gray-again")
        consumers.append(again)
        refused = pocketmq("group", "create", GROUP, "--gray-queue-ratio", "2", "-n", proc.namesrv)
        assert refused.returncode != 0 and "gray.queue.ratio" in refused.stderr
        created = pocketmq(
            "group",
            "create",
            GROUP,
            "--gray-clients",
            f"*@{again.client_id.split('@')[1]}@*",
            "--gray-queue-ratio",
            "0.25",
            "-n",
            proc.namesrv,
        )  # the new canary process's rule
        assert created.returncode == 0, created.stderr
        wait_until(
            lambda: assigned_queue_ids(proc.grpc, again.client_id) == GRAY_QUEUE_IDS,
            timeout_s=10,
            message="gray queues back with the gray consumer",
        )
        returned = [f"back-{i}" for i in range(6)]
        send(gray_producer, returned)
        wait_until(lambda: set(returned) <= bodies(again), timeout_s=10, message="gray messages after the return")
        assert not bodies(normal) & set(returned)
    finally:
        for consumer in consumers:
            consumer.stop()
        gray_producer.shutdown()
        normal_producer.shutdown()
        assert proc.stop() == 0, proc.log_tail()


def test_sdk_pop_consumers_over_remoting_split_and_fall_back(tmp_path):
    """The same split on the remoting front end (POP_MESSAGE): SDK SimpleConsumers, gray by ``@gray[0.25]``."""
    proc = broker_process(tmp_path, "broker-gray-pop-sdk").start()
    gray_config = ClientConfig(
        namesrv_addr=proc.namesrv, instance_name="gray", enable_gray_switch=True, gray_queue_ratio=RATIO
    )
    normal_config = ClientConfig(namesrv_addr=proc.namesrv, instance_name="normal")
    try:
        with Admin(normal_config) as admin:
            admin.create_topic(TOPIC, queues=8)
        with Producer(normal_config) as producer:  # round robin: 2 messages in each queue, gray ones too
            for i in range(16):
                producer.send(Message.create(TOPIC, f"m{i}"))
        normal = SimpleConsumer(GROUP, {TOPIC: "*"}, normal_config).start()
        try:
            with SimpleConsumer(GROUP, {TOPIC: "*"}, gray_config) as gray:
                got = {"gray": [], "normal": []}
                for name, consumer in (("gray", gray), ("normal", normal)):
                    wait_until(
                        lambda: got[name].extend(consumer.receive(32, 30_000)) or len(got[name]) >= 4,
                        timeout_s=10,
                        message=f"{name} receives",
                    )
                assert {m.queue_id for m in got["gray"]} == {6, 7} and len(got["gray"]) == 4
                assert {m.queue_id for m in got["normal"]} <= set(range(6))
            with Producer(gray_config) as producer:  # the gray consumer is gone: its queues are the normal's
                assert producer.send(Message.create(TOPIC, "after")).queue_id in GRAY_QUEUE_IDS
            wait_until(
                lambda: any(m.body == b"after" for m in normal.receive(32, 30_000)),
                timeout_s=10,
                message="the normal consumer pops the gray queue once the gray consumer left",
            )
        finally:
            normal.shutdown()
    finally:
        assert proc.stop() == 0, proc.log_tail()
