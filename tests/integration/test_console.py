"""The web console of a real ``pocketmq serve --console-port`` with real traffic: its JSON API reports what the
CLI reports (cluster, topics, groups, messages, dead letters, config), changes what it is asked to change (a
topic, an offset reset, a resend to one group, a setting), answers bad input with a JSON error that changed
nothing, and its pages and ``/metrics`` are served from the same port."""

from __future__ import annotations

import json
import os
import ssl
import threading
import urllib.error
import urllib.request

import pytest

from pocketmq.client import ClientConfig, Message, Producer
from pocketmq.client.listener import ConsumeConcurrentlyStatus
from pocketmq.client.push_consumer import PushConsumer, PushConsumerOptions
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import FAST_DELAY_LEVEL_ARGS, PocketProcess, broker_process, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(
        tmp_path_factory.mktemp("console"), "broker-con", extra_args=["--console-port", "0", *FAST_DELAY_LEVEL_ARGS]
    ).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def call(url: str, method: str = "GET", body: object = None, auth: str | None = None) -> tuple[int, object]:
    """(status, decoded JSON answer) of one API request."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    if auth is not None:
        request.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def cli_json(broker, *args: str) -> list[dict]:
    done = run_cli(*args, "--json", namesrv=broker.namesrv)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture(scope="module")
def api(broker):
    base = broker.address("console")

    def request(path: str, method: str = "GET", body: object = None, auth: str | None = None):
        return call(base + path, method, body, auth)

    return request


def test_cluster_and_topics_match_the_cli(broker, api):
    status, created = api("/api/topics", "POST", {"topic": "con_orders", "queues": 3, "type": "normal"})
    assert status == 201 and created["brokers"] == ["broker-con"]
    with Producer(ClientConfig(namesrv_addr=broker.namesrv, instance_name="con-p1")) as producer:
        for i in range(7):
            producer.send(Message.create("con_orders", f"m{i}"))

    status, cluster = api("/api/cluster")
    [status_row] = cli_json(broker, "broker", "status")
    [row] = cluster["brokers"]
    assert status == 200 and cluster["namesrv"] == broker.namesrv
    assert (row["broker"], row["address"], row["role"], row["version"]) == (
        status_row["broker"], status_row["address"], status_row["role"], status_row["version"]
    )  # fmt: skip
    assert row["put"] >= 7 and 0 <= row["disk"]["used_ratio"] <= 1 and row["disk"]["commit_log_bytes"] > 0

    status, topics = api("/api/topics")
    listed = {t["topic"]: t for t in topics["topics"]}
    assert {r["topic"] for r in cli_json(broker, "topic", "list")} == set(listed)
    assert (listed["con_orders"]["type"], listed["con_orders"]["queues"]) == ("NORMAL", 3)

    status, detail = api("/api/topics/con_orders")
    cli_rows = cli_json(broker, "topic", "describe", "con_orders")
    assert status == 200 and detail["messages"] == 7
    assert [(q["queue_id"], q["min_offset"], q["max_offset"]) for q in detail["queues"]] == [
        (r["queue_id"], r["min_offset"], r["max_offset"]) for r in cli_rows
    ]

    status, updated = api("/api/topics/con_orders", "PUT", {"queues": 4})
    assert status == 200 and updated["queues"] == 4
    wait_until(lambda: len(api("/api/topics/con_orders")[1]["queues"]) == 4, timeout_s=10, message="4 queues")
    status, _ = api("/api/topics/con_orders", "DELETE")
    assert status == 200
    assert "con_orders" not in {r["topic"] for r in cli_json(broker, "topic", "list")}


def test_groups_messages_dead_letters_and_a_resend_to_one_group(broker, api):
    config = ClientConfig(namesrv_addr=broker.namesrv, instance_name="con-c")
    assert api("/api/topics", "POST", {"topic": "con_pay", "queues": 2})[0] == 201
    assert run_cli("group", "create", "con-fail", "--retry-max-times", "1", namesrv=broker.namesrv).returncode == 0
    received: list[tuple[str, int]] = []
    fail_first = threading.Event()
    fail_first.set()

    def listener(msgs, ctx):
        for msg in msgs:
            received.append((msg.body.decode(), msg.reconsume_times))
        # every delivery fails until the test says otherwise: retried once, then dead-lettered
        return (
            ConsumeConcurrentlyStatus.RECONSUME_LATER
            if fail_first.is_set()
            else ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        )

    consumer = PushConsumer(PushConsumerOptions("con-fail", persist_interval_ms=200, long_poll_ms=500), config)
    consumer.subscribe("con_pay")
    consumer.register_listener(listener)
    consumer.start()
    try:
        with Producer(ClientConfig(namesrv_addr=broker.namesrv, instance_name="con-p2")) as producer:
            sent = producer.send(Message.create("con_pay", b'{"amount": 12}', keys="pay-12"))
        # messages: by key, by id, at its offset; the body pretty-printed
        status, found = api("/api/messages?topic=con_pay&key=pay-12")
        assert status == 200 and [m["message_id"] for m in found["messages"]] == [sent.msg_id]
        cli_found = cli_json(broker, "message", "query", "con_pay", "--key", "pay-12")
        assert found["messages"] == cli_found
        spot = f"{sent.message_queue.queue_id}:{sent.queue_offset}"
        assert [m["message_id"] for m in api(f"/api/messages?topic=con_pay&offset={spot}")[1]["messages"]] == [
            sent.msg_id
        ]
        status, shown = api(f"/api/messages/{sent.msg_id}?topic=con_pay")
        assert status == 200 and shown["body_format"] == "json" and shown["body_view"] == '{\n  "amount": 12\n}'

        wait_until(lambda: api("/api/dead-letters/con-fail")[1]["messages"], timeout_s=30, message="dead-lettered")
        status, dead = api("/api/dead-letters/con-fail")
        assert [d["message_id"] for d in dead["messages"]] == [
            d["message_id"] for d in cli_json(broker, "dlq", "list", "con-fail")
        ]
        status, group = api("/api/groups/con-fail")
        assert status == 200 and group["dlq_messages"] == 1 and group["retry_messages"] >= 1
        assert [c["client_id"] for c in group["consumers"]][0].endswith("@con-c")
        described = cli_json(broker, "group", "describe", "con-fail")
        offsets = [r for r in described if "consumer_offset" in r]
        assert [(r["topic"], r["queue_id"], r["consumer_offset"], r["lag"]) for r in group["offsets"]] == [
            (r["topic"], r["queue_id"], r["consumer_offset"], r["lag"]) for r in offsets
        ]

        # resend: to the group's retry topic, consumed by that group once more
        fail_first.clear()
        before = len(received)
        dead_id = dead["messages"][0]["message_id"]
        status, resent = api(f"/api/dead-letters/con-fail/{dead_id}/resend", "POST")
        assert status == 200 and resent["topic"] == "%RETRY%con-fail"
        wait_until(lambda: len(received) > before, timeout_s=20, message="the resent message consumed")
        assert received[-1][0] == '{"amount": 12}'
        assert api("/api/dead-letters/con-fail/NO_SUCH_ID/resend", "POST")[0] == 404
    finally:
        consumer.shutdown()

    # offline: a reset moves the stored offsets, as the CLI then reports them
    status, reset = api("/api/groups/con-fail/reset-offset", "POST", {"topic": "con_pay", "to": "earliest"})
    assert status == 200 and {r["offset"] for r in reset["offsets"]} == {0}
    rows = [
        r for r in cli_json(broker, "group", "describe", "con-fail", "--topic", "con_pay") if "consumer_offset" in r
    ]
    assert {r["consumer_offset"] for r in rows} == {0}


def test_config_is_read_and_changed_in_place(broker, api):
    status, config = api("/api/config")
    [row] = config["brokers"]
    assert status == 200 and "default_topic_queue_nums" in config["dynamic"]
    status, changed = api("/api/config", "PUT", {"key": "default_topic_queue_nums", "value": 5})
    assert status == 200 and changed == {"key": "default_topic_queue_nums", "value": "5", "brokers": ["broker-con/0"]}
    [got] = cli_json(broker, "config", "get", "default_topic_queue_nums")
    assert got["value"] == "5" and api("/api/config")[1]["brokers"][0]["settings"][got["key"]] == "5"
    assert row["settings"][got["key"]] != "5"  # it was changed, not already so


BAD_REQUESTS = [
    ("GET", "/api/topics/no_such_topic", None, 404),
    ("GET", "/api/topics/bad topic!", None, 400),
    ("POST", "/api/topics", {"topic": "con_bad", "queues": 0}, 400),
    ("POST", "/api/topics", {"topic": "con_bad", "queues": "many"}, 400),
    ("POST", "/api/topics", {"topic": "con_bad", "type": "weird"}, 400),
    ("POST", "/api/topics", {"topic": "bad/name"}, 400),
    ("POST", "/api/topics", ["not", "an", "object"], 400),
    ("PUT", "/api/topics/no_such_topic", {"queues": 2}, 404),
    ("PUT", "/api/topics/con_keep", {}, 400),
    ("DELETE", "/api/topics/no_such_topic", None, 404),
    ("GET", "/api/groups/no-such-group", None, 404),
    ("POST", "/api/groups/no-such-group/reset-offset", {"topic": "con_keep", "to": "earliest"}, 404),
    ("POST", "/api/groups/con-keep/reset-offset", {"topic": "no_such_topic", "to": "earliest"}, 404),
    ("POST", "/api/groups/con-keep/reset-offset", {"topic": "con_keep", "time": "yesterday"}, 400),
    ("POST", "/api/groups/con-keep/reset-offset", {"topic": "con_keep", "to": "middle"}, 400),
    ("POST", "/api/groups/con-keep/reset-offset", {"topic": "con_keep"}, 400),
    ("GET", "/api/messages?topic=no_such_topic&key=k", None, 404),
    ("GET", "/api/messages?topic=con_keep&offset=0:-1", None, 400),
    ("GET", "/api/messages?topic=con_keep&offset=abc", None, 400),
    ("GET", "/api/messages?topic=con_keep&time=2026-13-45..", None, 400),
    ("GET", "/api/messages?topic=con_keep&time=200..100", None, 400),
    ("GET", "/api/messages?topic=con_keep&key=k&max=0", None, 400),
    ("GET", "/api/messages?topic=con_keep", None, 400),
    ("GET", "/api/messages?key=k", None, 400),
    ("GET", "/api/messages/not-a-message-id", None, 400),
    ("GET", "/api/dead-letters/no-such-group", None, 404),
    ("GET", "/api/dead-letters/con-keep?max=-3", None, 400),
    ("PUT", "/api/config", {"key": "no_such_setting", "value": "1"}, 400),
    ("PUT", "/api/config", {"key": "data_dir", "value": "/tmp/elsewhere"}, 400),
    ("PUT", "/api/config", {"key": "default_topic_queue_nums", "value": "-4"}, 400),
    ("PUT", "/api/config", {"key": "default_topic_queue_nums"}, 400),
    ("GET", "/api/nothing-here", None, 404),
    ("PATCH", "/api/topics", None, 405),
]


def test_bad_input_is_a_json_error_and_changes_nothing(broker, api):
    assert api("/api/topics", "POST", {"topic": "con_keep", "queues": 2})[0] == 201
    assert run_cli("group", "create", "con-keep", namesrv=broker.namesrv).returncode == 0
    before = (api("/api/topics")[1], api("/api/config")[1], cli_json(broker, "group", "describe", "con-keep"))
    for method, path, body, expected in BAD_REQUESTS:
        status, answer = api(path.replace(" ", "%20").replace("!", "%21"), method, body)
        assert status == expected, (method, path, body, answer)
        assert set(answer["error"]) == {"type", "message"} and answer["error"]["message"], (method, path)
    after = (api("/api/topics")[1], api("/api/config")[1], cli_json(broker, "group", "describe", "con-keep"))
    assert after == before


def test_pages_and_metrics_share_the_port(broker, api):
    base = broker.address("console")
    for path, marker in [
        ("/cluster", 'id="cluster-live"'),
        ("/fragments/cluster", 'id="brokers"'),
        ("/topics", 'id="topic-create"'),
        ("/fragments/topics", 'id="topics"'),
        ("/groups", 'id="groups-live"'),
        ("/messages", 'id="message-search"'),
        ("/dead-letters", 'id="dead-letters-pick"'),
        ("/config", 'id="config-set"'),
        ("/static/htmx.min.js", "htmx"),
        ("/metrics", "pocketmq_"),
    ]:
        with urllib.request.urlopen(base + path, timeout=15) as response:
            assert response.status == 200 and marker in response.read().decode(), path


def test_the_topics_page_filters_by_name(broker, api):
    assert api("/api/topics", "POST", {"topic": "con_filtered_one", "queues": 1})[0] == 201
    with urllib.request.urlopen(broker.address("console") + "/fragments/topics?q=filtered_one", timeout=15) as r:
        html = r.read().decode()
    assert 'data-count="1"' in html and 'data-key="con_filtered_one"' in html


def test_a_broker_serving_tls_serves_the_console_over_https(tmp_path):
    proc = broker_process(tmp_path, "broker-con-tls", extra_args=["--console-port", "0", "--tls-mode", "permissive"])
    proc.start()
    try:
        url = proc.address("console")
        assert url.startswith("https://")
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the broker's self-signed certificate of this run
        with urllib.request.urlopen(url + "/api/cluster", timeout=15, context=context) as response:
            assert json.loads(response.read())["brokers"][0]["broker"] == "broker-con-tls"
    finally:
        assert proc.stop() == 0, proc.log_tail()


def test_a_standalone_console_shows_the_cluster_behind_a_name_server(broker, tmp_path):
    console = PocketProcess(
        args=["console", "--namesrv", broker.namesrv, "--port", "0"],
        workdir=tmp_path,
        log_path=tmp_path / "console.log",
        ready_file=tmp_path / "console.ready.json",
        env=dict(os.environ),
    ).start()
    try:
        status, cluster = call(console.address("console") + "/api/cluster")
        assert status == 200 and [b["address"] for b in cluster["brokers"]] == [broker.remoting]
        status, _ = call(console.address("console") + "/api/topics/no_such_topic")
        assert status == 404
    finally:
        assert console.stop() == 0, console.log_tail()
