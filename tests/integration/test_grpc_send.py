"""The unmodified official RocketMQ 5 Python client against real ``pocketmq serve`` processes.

Sends are read back with the pocketmq SDK over remoting: bodies, tags, keys, user properties and message ids
intact; each FIFO message group in one queue, in send order; NORMAL sends spread over the queues. Cluster:
QueryRoute on either broker gives both brokers' queues with each one's own gRPC endpoint. ``kill -9`` during
SYNC_FLUSH sends loses no send that returned OK.
"""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict

import pytest
from grpc_official_client import expected_message
from grpc_support import client_env, official_client_command, read_topic, route_request, run_official_client, stub

from pocketmq.client.admin import Admin
from pocketmq.client.config import ClientConfig
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process, namesrv_process

pytestmark = pytest.mark.slow
KILL_AFTER_SENDS = 30  # one sync sender under SYNC_FLUSH is slow: keep the test short


def check_intact(stored: dict, outcomes: list[dict], prefix: str, groups: int) -> dict[str, list[int]]:
    """Every OK send is stored once, as sent; returns the send indexes found in each queue, in queue order."""
    sent_ids = {o["message_id"]: o["i"] for o in outcomes if o["ok"]}
    by_queue: dict[str, list[int]] = {}
    seen = set()
    for queue, messages in stored.items():
        indexes = []
        for msg in messages:
            i = sent_ids[msg.uniq_key]  # the id is the one the client made and got back
            expected = expected_message(prefix, i, groups)
            assert msg.body == expected["body"] and msg.tags == expected["tag"]
            assert sorted(msg.keys) == sorted(expected["keys"])
            assert msg.user_properties() == expected["properties"]
            assert msg.message_group == expected["group"]
            assert msg.uniq_key not in seen
            seen.add(msg.uniq_key)
            indexes.append(i)
        by_queue[f"{queue[0]}/{queue[1]}"] = indexes
    assert seen == set(sent_ids)
    return by_queue


def test_normal_and_fifo_sends_are_stored_intact_and_fifo_groups_keep_their_queue_and_order(tmp_path):
    broker = broker_process(tmp_path / "b").start()
    try:
        specs = {"n": {"topic": "grpc_normal", "groups": 0}, "f": {"topic": "grpc_fifo", "groups": 10}}
        procs = {
            prefix: subprocess.Popen(
                official_client_command({"endpoint": broker.grpc, "count": 1000, "prefix": prefix, **spec}),
                env=client_env(tmp_path / prefix),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for prefix, spec in specs.items()
        }
        outcomes = {}
        for prefix, proc in procs.items():
            out, err = proc.communicate(timeout=100)
            assert proc.returncode == 0, err[-3000:]
            outcomes[prefix] = [json.loads(line) for line in out.splitlines()]
            assert [o["ok"] for o in outcomes[prefix]] == [True] * 1000, outcomes[prefix][:3]

        normal = check_intact(read_topic(broker.namesrv, "grpc_normal"), outcomes["n"], "n", 0)
        assert len([q for q, idx in normal.items() if idx]) == 8  # round robin used every queue

        fifo = check_intact(read_topic(broker.namesrv, "grpc_fifo"), outcomes["f"], "f", 10)
        queue_of_group = defaultdict(set)
        for queue, indexes in fifo.items():
            for group in range(10):
                in_group = [i for i in indexes if i % 10 == group]
                if in_group:
                    queue_of_group[group].add(queue)
                    assert in_group == sorted(in_group)  # send order kept within the queue
        assert all(len(queues) == 1 for queues in queue_of_group.values()) and len(queue_of_group) == 10
    finally:
        broker.stop()


def test_cluster_routes_carry_each_brokers_own_endpoint_and_sends_spread_over_both(tmp_path):
    namesrv = namesrv_process(tmp_path / "ns").start()
    brokers = [
        broker_process(tmp_path / name, name, namesrv=namesrv.namesrv).start() for name in ("broker-a", "broker-b")
    ]
    try:
        with Admin(ClientConfig(namesrv_addr=namesrv.namesrv)) as admin:
            wait_until(lambda: len(admin.cluster_info().broker_addr_table) == 2, 20, message="both brokers registered")
            assert sorted(admin.create_topic("grpc_cluster", queues=4)) == ["broker-a", "broker-b"]
        grpc_of = {b.args[b.args.index("--broker-name") + 1]: b.grpc for b in brokers}

        def endpoints_by_broker(answer) -> dict[str, set[str]]:
            found = defaultdict(set)
            for q in answer.message_queues:
                found[q.broker.name].update(f"{a.host}:{a.port}" for a in q.broker.endpoints.addresses)
            return found

        for broker in brokers:
            channel, v2 = stub(broker.grpc)
            with channel:
                # the name server's route has the 4 + 4 queues once both brokers registered the topic
                answer = wait_until(
                    lambda: (lambda r: r if len(r.message_queues) == 8 else None)(
                        v2.QueryRoute(route_request("grpc_cluster", broker.grpc), timeout=5)
                    ),
                    20,
                    message="route over both brokers",
                )
            assert answer.status.code == V2StatusCode.OK
            assert endpoints_by_broker(answer) == {name: {addr} for name, addr in grpc_of.items()}

        outcomes = run_official_client(
            {"endpoint": brokers[0].grpc, "topic": "grpc_cluster", "count": 200, "prefix": "c"}, tmp_path / "home"
        )
        assert all(o["ok"] for o in outcomes)
        stored = read_topic(namesrv.namesrv, "grpc_cluster")
        per_broker = defaultdict(int)
        for (broker_name, _), messages in stored.items():
            per_broker[broker_name] += len(messages)
        assert sum(per_broker.values()) == 200 and min(per_broker["broker-a"], per_broker["broker-b"]) >= 50
    finally:
        for broker in brokers:
            broker.stop()
        namesrv.stop()


def test_kill_9_during_sync_flush_sends_loses_no_acknowledged_message(tmp_path):
    broker = broker_process(tmp_path / "b", extra_args=["--flush", "sync"]).start()
    home = tmp_path / "home"
    proc = subprocess.Popen(
        official_client_command(
            {
                "endpoint": broker.grpc,
                "topic": "grpc_durable",
                "count": 100_000,
                "prefix": "d",
                "timeout_s": 2,
                "stop_after_failures": 3,
            }
        ),
        env=client_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    outcomes = []
    try:
        for line in proc.stdout:
            outcomes.append(json.loads(line))
            if len(outcomes) == KILL_AFTER_SENDS:
                broker.kill()  # kill -9 while the client keeps sending
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        broker.kill()
    acknowledged = [o for o in outcomes if o["ok"]]
    assert len(acknowledged) >= KILL_AFTER_SENDS and not outcomes[-1]["ok"]
    broker.restart()
    try:
        stored = read_topic(broker.namesrv, "grpc_durable")
        stored_ids = {m.uniq_key for messages in stored.values() for m in messages}
        assert {o["message_id"] for o in acknowledged} <= stored_ids
    finally:
        broker.stop()
