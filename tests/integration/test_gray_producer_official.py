"""Gray placement of the unmodified official RocketMQ 5 Python producer's sends (gRPC) by ``pocketmq serve``.

The official client has no gray selector and the broker picks the queue of every gRPC send; a topic with
8 queues and ``gray.queue.ratio`` 0.25 (set with the CLI, kept by an update that does not mention it): messages
with the property ``PMQ_GRAY`` land only in queues 6 and 7, the others only in 0-5, FIFO groups keep one queue
(and their order) within their kind.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from tests.integration.grpc_support import read_topic, run_official_client
from tests.integration.test_cli import pocketmq

from pocketmq.testing.processes import broker_process

TOPIC = "gray_send"
GRAY = {"PMQ_GRAY": "v2"}

pytestmark = pytest.mark.slow


def test_official_producer_gray_messages_only_in_gray_queues_normal_only_in_the_others(tmp_path):
    proc = broker_process(tmp_path, "broker-gray-send").start()
    try:
        for args in (
            ["create", TOPIC, "--queues", "8", "--gray-queue-ratio", "0.25"],
            ["update", TOPIC, "--queues", "8"],
        ):  # an update that does not mention the ratio keeps it
            done = pocketmq("topic", *args, "-n", proc.namesrv)
            assert done.returncode == 0, done.stderr
        assert (
            "gray queue ratio 0.25"
            in pocketmq("topic", "create", "other", "--gray-queue-ratio", "0.25", "-n", proc.namesrv).stdout
        )
        bad = pocketmq("topic", "update", TOPIC, "--gray-queue-ratio", "1.5", "-n", proc.namesrv)
        assert bad.returncode != 0 and "[0, 1]" in bad.stderr

        runs = {"gray": (10, 0, GRAY), "normal": (12, 0, {}), "grayfifo": (6, 2, GRAY), "normalfifo": (6, 2, {})}
        for prefix, (count, groups, properties) in runs.items():
            spec = {
                "endpoint": proc.grpc,
                "topic": TOPIC,
                "count": count,
                "prefix": prefix,
                "groups": groups,
                "properties": properties,
            }
            outcomes = run_official_client(spec, tmp_path / prefix)
            assert [o["ok"] for o in outcomes] == [True] * count, outcomes

        queues_of: dict[str, set[int]] = defaultdict(set)
        group_queues: dict[str, set[int]] = defaultdict(set)
        group_order: dict[str, list[int]] = defaultdict(list)
        for (_, queue_id), messages in read_topic(proc.namesrv, TOPIC).items():
            for msg in messages:
                prefix = msg.properties["run"]
                queues_of[prefix].add(queue_id)
                assert ("PMQ_GRAY" in msg.properties) == prefix.startswith("gray")
                if msg.message_group:
                    group_queues[msg.message_group].add(queue_id)
                    group_order[msg.message_group].append(int(msg.properties["idx"]))
        assert queues_of["gray"] == {6, 7}  # only gray queues, and both of them
        assert queues_of["normal"] == set(range(6))  # only normal queues, and every one of them
        assert queues_of["grayfifo"] <= {6, 7} and queues_of["normalfifo"] <= set(range(6))
        assert len(group_queues) == 4 and all(len(q) == 1 for q in group_queues.values())  # a group: one queue
        assert all(order == sorted(order) for order in group_order.values())  # in send order
    finally:
        assert proc.stop() == 0, proc.log_tail()
