"""``pocketmq group describe GROUP`` shows a POP group's state per queue, against a real broker.

10 messages in 2 queues; a SimpleConsumer (SDK, remoting POP) receives them all, acks 4 and drops 6: those
come back from the pop retry topic (retried 6); of the 6 it keeps 3 in flight and drops 3 again, which the
group's retryMaxTimes 1 sends to the DLQ (dead-lettered 3).
"""

from __future__ import annotations

import pytest
from tests.integration.test_cli import json_lines, pocketmq

from pocketmq.client import Admin, ClientConfig, Message, Producer, SimpleConsumer
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

GROUP, TOPIC = "describe_group", "describe_topic"
RETRY_TOPIC = f"%RETRY%{GROUP}_{TOPIC}"


def totals(admin: Admin) -> dict[str, int]:
    sums = {"popInFlight": 0, "popRetried": 0, "popDeadLettered": 0}
    for stats in admin.consume_stats(GROUP).values():
        for entry in stats["offsetTable"]:
            for name in sums:
                sums[name] += entry.get(name, 0)
    return sums


def receive(consumer: SimpleConsumer, want: int, invisible_ms: int) -> list:
    got: list = []
    wait_until(
        lambda: len(got) >= want or got.extend(consumer.receive(32, invisible_ms, await_duration_ms=500)),
        timeout_s=15,
        message=f"{want} messages",
    )
    return got


@pytest.mark.slow
def test_group_describe_shows_pop_state_per_queue(tmp_path):
    proc = broker_process(tmp_path, "broker-describe", extra_args=["--set", "pop_revive_interval_ms=100"]).start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        with Admin(config) as admin:
            admin.create_topic(TOPIC, queues=2)
            admin.create_group(GROUP, retry_max_times=1)
            with Producer(config) as producer:
                producer.send_batch([Message.create(TOPIC, str(i)) for i in range(10)])
            with SimpleConsumer(GROUP, {TOPIC: "*"}, config) as consumer:
                first = receive(consumer, 10, 1_000)
                consumer.ack_batch(first[:4])
                again = receive(consumer, 6, 60_000)
                assert {m.reconsume_times for m in again} == {1}
                keep, drop = again[:3], again[3:]
                for msg in drop:
                    consumer.change_invisible_duration(msg, 1_000)
                wait_until(lambda: totals(admin)["popDeadLettered"] == 3, timeout_s=15, message="3 dead letters")
                assert totals(admin) == {"popInFlight": 3, "popRetried": 6, "popDeadLettered": 3}

                described = pocketmq("group", "describe", GROUP, "--json", "-n", proc.namesrv)
                assert described.returncode == 0, described.stderr
                lines = json_lines(described.stdout)
                rows = {(r["topic"], r["queue_id"]): r for r in lines if "queue_id" in r}
                [client] = [r for r in lines if "client_id" in r]  # the SimpleConsumer, not gray, its POP share
                assert not client["gray"] and client["assigned_by"] == "broker"
                assert [TOPIC, 0] in client["queues"] and [TOPIC, 1] in client["queues"]
                business = [rows[(TOPIC, q)] for q in (0, 1)]
                assert sum(r["consumer_offset"] for r in business) == 10
                assert sum(r["retried"] for r in business) == 6
                retry_row = rows[(RETRY_TOPIC, 0)]
                assert (retry_row["in_flight"], retry_row["dead_lettered"]) == (3, 3)
                assert all(r["waiting_to_revive"] == 0 for r in rows.values())

                table = pocketmq("group", "describe", GROUP, "-n", proc.namesrv).stdout.lower()
                assert "in_flight" in table and "dead_lettered" in table and RETRY_TOPIC.lower() in table
                consumer.ack_batch(keep)
    finally:
        assert proc.stop() == 0, proc.log_tail()
