"""The broker's check of every remoting request (server/remoting_access.py, server/access_contexts.py): who, then
what; refusals answer NO_PERMISSION with RocketMQ's words and are counted; remembered decisions end with a
policy change."""

from __future__ import annotations

import json
import time
import types

import pytest

from pocketmq.auth.model import Acl, Action, PolicyType, Resource, ResourceType, User
from pocketmq.auth.signature import Credentials
from pocketmq.broker.access import METRIC_DENIED, AccessControl
from pocketmq.broker.config import BrokerConfig
from pocketmq.metrics.registry import MetricsRegistry
from pocketmq.protocol.codes import HA_PULL_COMMIT_LOG, RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.server.access_contexts import request_contexts
from pocketmq.server.remoting_access import RemotingAccessGate

ALICE = Credentials("alice", "alice-secret")


@pytest.fixture
def access(tmp_path):
    config = BrokerConfig(
        data_dir=tmp_path,
        authentication_enabled=True,
        authorization_enabled=True,
        acl_root_user="root",
        acl_root_password="root-secret",
        inner_access_key="inner",
        inner_secret_key="inner-secret",
    )
    metrics = MetricsRegistry()
    control = AccessControl(config, metrics)
    control.metrics = metrics  # type: ignore[attr-defined]
    control.bootstrap()
    control.table.create_user(User("alice", "alice-secret"))
    control.table.put_acl(
        Acl.from_json(
            {
                "subject": "User:alice",
                "policies": [{"entries": [{"resource": "Topic:orders", "actions": ["Pub"], "decision": "Allow"}]}],
            }
        )
    )
    return control


def conn():
    return types.SimpleNamespace(attributes={}, remote_host="127.0.0.1")


def send(topic: str, credentials: Credentials | None = ALICE) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": topic, "e": "0"}, b"body")
    if credentials is not None:
        credentials.sign(request.ext_fields, request.body)
    return request


def test_who_then_what(access):
    gate, c = RemotingAccessGate(access, "DefaultCluster"), conn()
    assert gate.refusal(c, send("orders")) is None
    unsigned = gate.refusal(c, send("orders", None))
    assert (unsigned.code, unsigned.remark) == (ResponseCode.NO_PERMISSION, "username cannot be null.")
    assert gate.refusal(c, send("orders", Credentials("alice", "guess"))).remark == "check signature failed."
    assert gate.refusal(c, send("orders", Credentials("bob", "x"))).remark == "User:bob is not found."
    other = gate.refusal(c, send("payments"))
    assert other.remark == "User:alice has no permission to access Topic:payments from 127.0.0.1, no matched policies."
    tampered = send("orders")
    tampered.body = b"other body"
    assert gate.refusal(c, tampered).remark == "check signature failed."
    root = gate.refusal(c, send("payments", Credentials("root", "root-secret")))
    assert root is None  # Super
    assert access.metrics.value(METRIC_DENIED, user="alice", resource="Topic:payments", protocol="remoting") == 1


def test_a_remembered_decision_ends_when_the_policy_changes(access):
    gate, c = RemotingAccessGate(access, "DefaultCluster"), conn()
    assert gate.refusal(c, send("orders")) is None
    access.table.delete_acl("User:alice", PolicyType.CUSTOM)
    assert gate.refusal(c, send("orders")).code == ResponseCode.NO_PERMISSION


def test_admin_and_cluster_codes_need_cluster_rights():
    cluster = Resource(ResourceType.CLUSTER, "c1")
    for code in (RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_BROKER_CONFIG, HA_PULL_COMMIT_LOG, 3001):
        ((resource, actions),) = request_contexts(RemotingCommand.request(code, {"topic": "t"}), "c1")
        assert resource == cluster and Action.GET not in actions
    heartbeat = RemotingCommand.request(
        RequestCode.HEART_BEAT,
        body=json.dumps(
            {"consumerDataSet": [{"groupName": "g", "subscriptionDataSet": [{"topic": "t"}, {"topic": "%RETRY%g"}]}]}
        ).encode(),
    )
    assert [str(r) for r, _ in request_contexts(heartbeat, "c1")] == ["Group:g", "Topic:t"]
    retry_send = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "%RETRY%g"})
    assert request_contexts(retry_send, "c1") == [(Resource(ResourceType.GROUP, "g"), frozenset({Action.SUB}))]


def test_the_check_costs_little(access):
    """What access control adds to a send on the broker: a signature check and a remembered decision."""
    gate, c = RemotingAccessGate(access, "DefaultCluster"), conn()
    request = send("orders")
    body = b"x" * 1024
    request.body = body
    ALICE.sign(request.ext_fields, body)
    assert gate.refusal(c, request) is None
    rounds = 2000
    start = time.process_time()
    for _ in range(rounds):
        gate.refusal(c, request)
    per_check_us = (time.process_time() - start) / rounds * 1e6
    print(f"gate check: {per_check_us:.1f} us per send")
    assert per_check_us < 1000  # a loose bound for a loaded CI machine; docs/benchmarks.md has the measure
