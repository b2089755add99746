"""The console of a broker with access control on: every request needs a user of the brokers (HTTP basic auth),
and each user sees and does only what the brokers' policies allow that user; a refused change changes
nothing."""

from __future__ import annotations

import base64

import pytest
from tests.integration.test_acl import ROOT, ROOT_SECRET, acl_broker_process
from tests.integration.test_console import call

from pocketmq.testing.processes import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

BOB, BOB_SECRET = "bob", "bob-secret-1"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = acl_broker_process(tmp_path_factory.mktemp("console-acl"), "broker-cacl", ["--console-port", "0"])
    proc.start()
    as_root = ("-n", proc.namesrv, "--access-key", ROOT, "--secret-key", ROOT_SECRET)
    for args in (
        ("topic", "create", "acl_orders", "--queues", "2"),
        ("acl", "user", "create", BOB, "--password", BOB_SECRET),
        ("acl", "policy", "create", BOB, "--resource", "Topic:acl_orders", "--actions", "Pub,Sub"),
    ):
        done = run_cli(*args, *as_root)
        assert done.returncode == 0, done.stderr
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def test_the_console_asks_for_a_user_and_the_brokers_policies_decide(broker):
    base = broker.address("console")
    for auth in (None, basic(ROOT, "wrong"), basic("nobody", "x"), "Bearer abc"):
        status, answer = call(base + "/api/cluster", auth=auth)
        assert status == 401 and answer["error"]["message"], auth
    status, cluster = call(base + "/api/cluster", auth=basic(ROOT, ROOT_SECRET))
    assert status == 200 and cluster["brokers"][0]["broker"] == "broker-cacl"

    # bob may publish to and read acl_orders, nothing else: no topic changes, no settings
    for method, path, body in [
        ("POST", "/api/topics", {"topic": "bob_topic"}),
        ("DELETE", "/api/topics/acl_orders", None),
        ("PUT", "/api/config", {"key": "default_topic_queue_nums", "value": "3"}),
    ]:
        status, answer = call(base + path, method, body, auth=basic(BOB, BOB_SECRET))
        assert status == 403, (path, answer)
    status, topics = call(base + "/api/topics", auth=basic(ROOT, ROOT_SECRET))
    assert {t["topic"] for t in topics["topics"]} >= {"acl_orders"} and "bob_topic" not in {
        t["topic"] for t in topics["topics"]
    }
    status, config = call(base + "/api/config", auth=basic(ROOT, ROOT_SECRET))
    assert status == 200 and config["brokers"][0]["settings"].get("defaultTopicQueueNums") != "3"

    # root may change them
    status, _ = call(base + "/api/topics", "POST", {"topic": "root_topic"}, auth=basic(ROOT, ROOT_SECRET))
    assert status == 201
    # the pages ask the browser for a login
    status, _ = call(base + "/api/topics/acl_orders")
    assert status == 401
