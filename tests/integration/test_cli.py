"""The client commands (``pocketmq topic|send|tail|cluster|group``) as scripts use them: real processes,
JSON lines on stdout, one error line and exit status 1 on failure."""

from __future__ import annotations

import json

import pytest

from pocketmq.testing.processes import broker_process
from pocketmq.testing.processes import run_cli as pocketmq


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("cli"), "broker-cli").start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_send_json_then_tail_from_beginning_reads_the_same_messages(broker):
    created = pocketmq("topic", "create", "cli_orders", "--queues", "3", "--type", "normal", "-n", broker.namesrv)
    assert created.returncode == 0, created.stderr
    assert "cli_orders" in created.stdout and "3 queues" in created.stdout

    sent = pocketmq(
        "send",
        "cli_orders",
        "--body",
        "hello",
        "--tag",
        "created",
        "--keys",
        "k1 k2",
        "--property",
        "color=red",
        "--count",
        "5",
        "--json",
        namesrv=broker.namesrv,
    )
    assert sent.returncode == 0, sent.stderr
    acks = json_lines(sent.stdout)
    assert len(acks) == 5
    assert all({"message_id", "queue_id", "queue_offset", "broker"} <= ack.keys() for ack in acks)
    assert {ack["queue_id"] for ack in acks} == {0, 1, 2}

    tailed = pocketmq("tail", "cli_orders", "--from-beginning", "--json", "--max", "5", "-n", broker.namesrv)
    assert tailed.returncode == 0, tailed.stderr
    messages = json_lines(tailed.stdout)
    assert sorted(m["message_id"] for m in messages) == sorted(a["message_id"] for a in acks)
    by_id = {m["message_id"]: m for m in messages}
    for i, ack in enumerate(acks):
        m = by_id[ack["message_id"]]
        assert (m["topic"], m["queue_id"], m["queue_offset"]) == ("cli_orders", ack["queue_id"], ack["queue_offset"])
        assert (m["tag"], m["keys"], m["properties"], m["body"]) == (
            "created",
            ["k1", "k2"],
            {"color": "red"},
            f"hello-{i}",
        )


def test_tail_stops_after_the_idle_timeout_and_prints_queue_order(broker):
    for i in range(3):
        assert (
            pocketmq("send", "cli_idle", "--body", f"b{i}", "--message-group", "g1", "-n", broker.namesrv).returncode
            == 0
        )
    tailed = pocketmq("tail", "cli_idle", "--from-beginning", "--json", "--timeout", "1", "-n", broker.namesrv)
    assert tailed.returncode == 0, tailed.stderr
    messages = json_lines(tailed.stdout)
    assert [m["body"] for m in messages] == ["b0", "b1", "b2"]  # one message group: one queue, in order
    assert [m["queue_offset"] for m in messages] == [0, 1, 2]


def test_topic_list_describe_and_cluster(broker):
    assert pocketmq("topic", "create", "cli_listed", "--queues", "2", "-n", broker.namesrv).returncode == 0
    assert pocketmq("send", "cli_listed", "-n", broker.namesrv).returncode == 0
    listed = pocketmq("topic", "list", "--json", "-n", broker.namesrv)
    assert listed.returncode == 0, listed.stderr
    topics = {row["topic"] for row in json_lines(listed.stdout)}
    assert "cli_listed" in topics and "TBW102" not in topics and "broker-cli" not in topics
    assert "TBW102" in {
        row["topic"] for row in json_lines(pocketmq("topic", "list", "--all", "--json", "-n", broker.namesrv).stdout)
    }

    described = pocketmq("topic", "describe", "cli_listed", "--json", "-n", broker.namesrv)
    rows = json_lines(described.stdout)
    assert [(r["broker"], r["queue_id"]) for r in rows] == [("broker-cli", 0), ("broker-cli", 1)]
    assert sum(r["messages"] for r in rows) == 1
    table = pocketmq("topic", "describe", "cli_listed", "-n", broker.namesrv).stdout
    assert table.splitlines()[0].split() == ["BROKER", "QUEUE_ID", "MIN_OFFSET", "MAX_OFFSET", "MESSAGES"]

    cluster = pocketmq("cluster", "--json", "-n", broker.namesrv)
    assert json_lines(cluster.stdout) == [
        {
            "cluster": "DefaultCluster",
            "broker": "broker-cli",
            "broker_id": 0,
            "role": "master",
            "address": broker.remoting,
            "grpc": broker.grpc,
            "lag_bytes": None,
            "lag_s": None,
            "breakers": {},
            "epoch": None,  # the failover fields: none without a controller
            "master": None,
            "in_sync": None,
            "lease": None,
        }
    ]


def test_looking_at_a_topic_or_a_dead_letter_queue_creates_nothing(broker):
    described = pocketmq("topic", "describe", "cli_never_created", "-n", broker.namesrv)
    assert described.returncode == 1
    assert len(described.stderr.strip().splitlines()) == 1 and "cli_never_created" in described.stderr
    assert pocketmq("group", "create", "cli-quiet-group", "-n", broker.namesrv).returncode == 0
    listed = pocketmq("dlq", "list", "cli-quiet-group", "--json", "-n", broker.namesrv)
    assert listed.returncode == 0 and listed.stdout == ""
    stats = pocketmq("retry", "stats", "cli-quiet-group", "--json", "-n", broker.namesrv)
    assert stats.returncode == 0
    topics = pocketmq("topic", "list", "--json", "-n", broker.namesrv)
    names = {row["topic"] for row in json_lines(topics.stdout)}
    assert not names & {"cli_never_created", "%DLQ%cli-quiet-group", "%RETRY%cli-quiet-group"}


def test_group_create_list_describe(broker):
    created = pocketmq("group", "create", "cli-group", "--retry-max-times", "3", "--fifo", "-n", broker.namesrv)
    assert created.returncode == 0, created.stderr
    groups = {g["group"]: g for g in json_lines(pocketmq("group", "list", "--json", "-n", broker.namesrv).stdout)}
    assert (groups["cli-group"]["retry_max_times"], groups["cli-group"]["fifo"]) == (3, True)
    described = pocketmq("group", "describe", "cli-group", "-n", broker.namesrv)
    assert described.returncode == 0 and "FIFO" in described.stdout


def test_unreachable_name_server_is_one_error_line_and_exit_1():
    result = pocketmq("cluster", "-n", "127.0.0.1:1")
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "127.0.0.1:1" in result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["send", "bad topic!"],
        ["topic", "create", "bad/topic"],
        ["tail", "x", "--max", "0"],
        ["send", "t", "--property", "nokey"],
    ],
)
def test_bad_input_is_one_error_line_and_exit_1(broker, argv):
    result = pocketmq(*argv, "-n", broker.namesrv)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("pocketmq ")
