"""Access control with real processes (docs/security.md): a broker with authentication and authorization on, a
Super user from the environment, a normal user made with ``pocketmq acl``; the SDK and the CLI with right and
wrong credentials; a user without admin rights cannot delete a topic or set config; the attacks a raw socket
could make on an open broker are each refused, counted, and change nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.acl_attacks import ATTACKS, attempt
from tests.integration.grpc_support import client_env
from tests.integration.test_cli import json_lines, pocketmq

from pocketmq.auth.signature import Credentials
from pocketmq.client.config import ClientConfig
from pocketmq.client.producer import Producer
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import Message
from pocketmq.protocol.codes import ResponseCode
from pocketmq.testing.processes import broker_process
from pocketmq.testing.scrape import metric

pytestmark = pytest.mark.timeout(120)

ROOT, ROOT_SECRET = "root", "root-secret-1"
INNER, INNER_SECRET = "cluster-inner", "inner-secret-1"
ALICE, ALICE_SECRET = "alice", "alice-secret-1"
OFFICIAL_ACL_CLIENT = Path(__file__).with_name("acl_official_client.py")


def acl_broker_process(workdir: Path, broker_name: str, extra_args: list[str]):
    """A broker with authentication and authorization on and the root and inner Super users, not started."""
    proc = broker_process(
        workdir,
        broker_name,
        extra_args=[*extra_args, "--set", "authentication_enabled=true", "--set", "authorization_enabled=true"],
    )
    proc.env.update(
        POCKETMQ_ACL_ROOT_USER=ROOT,
        POCKETMQ_ACL_ROOT_PASSWORD=ROOT_SECRET,
        POCKETMQ_INNER_ACCESS_KEY=INNER,
        POCKETMQ_INNER_SECRET_KEY=INNER_SECRET,
    )
    return proc


def start_acl_broker(workdir: Path, broker_name: str):
    """A started broker with authentication and authorization on, the root and inner Super users, the topics
    ``orders`` and ``secret_topic``, and alice, allowed Pub and Sub on ``orders``, ``g1`` and ``TOOLS_CONSUMER``."""
    proc = acl_broker_process(workdir, broker_name, ["--metrics-port", "0"])
    proc.start()
    ns = proc.namesrv
    for args in (
        ("topic", "create", "orders", "--queues", "2"),
        ("topic", "create", "secret_topic", "--queues", "1"),
        ("acl", "user", "create", ALICE, "--password", ALICE_SECRET),
        (
            "acl",
            "policy",
            "create",
            ALICE,
            "--resource",
            "Topic:orders",
            "--resource",
            "Group:g1",
            "--resource",
            "Group:TOOLS_CONSUMER",
            "--actions",
            "Pub,Sub",
        ),
    ):
        done = pocketmq(*args, "-n", ns, "--access-key", ROOT, "--secret-key", ROOT_SECRET)
        assert done.returncode == 0, done.stderr
    return proc


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = start_acl_broker(tmp_path_factory.mktemp("acl"), "broker-acl")
    yield proc
    assert proc.stop() == 0, proc.log_tail()
    assert ROOT_SECRET not in proc.log_tail(10_000) and ALICE_SECRET not in proc.log_tail(10_000)


def as_user(user: str, secret: str, *args: str, broker) -> object:
    return pocketmq(*args, "-n", broker.namesrv, "--access-key", user, "--secret-key", secret)


def test_sdk_sends_as_its_policy_allows_and_refuses_the_rest(broker):
    alice = ClientConfig(namesrv_addr=broker.namesrv, access_key=ALICE, secret_key=ALICE_SECRET, instance_name="alice")
    with Producer(alice) as producer:
        assert producer.send(Message("orders", b"allowed")).msg_id
        with pytest.raises(PocketMQError, match="no permission to access Topic:secret_topic"):
            producer.send(Message("secret_topic", b"refused"))
    wrong = ClientConfig(namesrv_addr=broker.namesrv, access_key=ALICE, secret_key="wrong", instance_name="mallory")
    with Producer(wrong) as producer, pytest.raises(PocketMQError, match="check signature failed"):
        producer.send(Message("orders", b"refused"))
    assert metric(broker, "pocketmq_access_denied_total", user=ALICE, resource="Topic:secret_topic") >= 1


def test_cli_send_and_tail_follow_the_policy(broker):
    sent = as_user(ALICE, ALICE_SECRET, "send", "orders", "--body", "hi", "--json", broker=broker)
    assert sent.returncode == 0, sent.stderr
    tailed = as_user(ALICE, ALICE_SECRET, "tail", "orders", "--from-beginning", "--max", "1", "--json", broker=broker)
    assert tailed.returncode == 0 and json_lines(tailed.stdout)[0]["topic"] == "orders", tailed.stderr
    refused = as_user(ALICE, ALICE_SECRET, "send", "secret_topic", "--body", "no", broker=broker)
    assert refused.returncode == 1 and "no permission" in refused.stderr, refused
    anonymous = pocketmq("send", "orders", "--body", "no", "-n", broker.namesrv)
    assert anonymous.returncode == 1 and "username cannot be null" in anonymous.stderr, anonymous


def test_a_user_without_admin_rights_cannot_delete_a_topic_or_set_config(broker):
    deleted = as_user(ALICE, ALICE_SECRET, "topic", "delete", "orders", broker=broker)
    assert deleted.returncode == 1 and "Cluster:DefaultCluster" in deleted.stderr, deleted
    configured = as_user(ALICE, ALICE_SECRET, "config", "set", "auto_create_topic_enable", "false", broker=broker)
    assert configured.returncode == 1 and "no permission" in configured.stderr, configured
    super_user = as_user(
        ALICE, ALICE_SECRET, "acl", "user", "create", "evil", "--password", "x", "--super", broker=broker
    )
    assert super_user.returncode == 1, super_user
    listed = as_user(ROOT, ROOT_SECRET, "topic", "list", "--json", broker=broker)
    assert "orders" in listed.stdout, listed.stderr
    users = as_user(ROOT, ROOT_SECRET, "acl", "user", "list", "--json", broker=broker)
    assert {u["username"] for u in json_lines(users.stdout)} == {ROOT, INNER, ALICE}
    assert ALICE_SECRET not in users.stdout and ROOT_SECRET not in users.stdout


@pytest.mark.parametrize("attacker", [None, Credentials(ALICE, ALICE_SECRET)], ids=["anonymous", "normal-user"])
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda attack: attack.__name__)
async def test_attacks_from_a_raw_socket_are_refused(broker, attack, attacker):
    outcome = await attempt(attack, broker, Credentials(ROOT, ROOT_SECRET), attacker)
    assert outcome.reply.code == ResponseCode.NO_PERMISSION, (outcome.reply.code, outcome.reply.remark)
    assert not outcome.harmed  # test_acl_open.py: the same attack harms an open broker


def official_client(broker, tmp_path, access_key: str, secret_key: str, topic: str) -> dict[str, dict]:
    spec = {
        "endpoint": broker.grpc,
        "access_key": access_key,
        "secret_key": secret_key,
        "topic": topic,
        "group": "g1",
        "deadline_s": 15,
    }
    out = subprocess.run(
        [sys.executable, str(OFFICIAL_ACL_CLIENT), json.dumps(spec)],
        env=client_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return {line["step"]: line for line in map(json.loads, out.stdout.splitlines()) if "step" in line}


def test_official_client_with_right_credentials_sends_receives_and_acks(broker, tmp_path):
    steps = official_client(broker, tmp_path, ALICE, ALICE_SECRET, "orders")
    assert steps["send"]["ok"] and steps["receive"]["ok"] and steps["ack"]["ok"], steps


def test_official_client_is_refused_with_a_wrong_secret_or_outside_its_policy(broker, tmp_path):
    steps = official_client(broker, tmp_path / "wrong", ALICE, "not-the-secret", "orders")
    assert not steps["send"]["ok"], steps
    steps = official_client(broker, tmp_path / "outside", ALICE, ALICE_SECRET, "secret_topic")
    assert not steps["send"]["ok"], steps  # its route is refused already (QueryRoute needs Pub or Sub)
    assert metric(broker, "pocketmq_access_denied_total", protocol="grpc", resource="Topic:secret_topic") >= 1
    assert metric(broker, "pocketmq_access_denied_total", protocol="grpc", resource="-") >= 1  # the wrong secret
