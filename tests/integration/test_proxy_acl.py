"""Access control at the gRPC proxy (docs/grpc.md, "Proxy"): a broker with authentication and authorization on,
a proxy started with the same switches and the brokers' inner Super user, and the unmodified official RocketMQ 5
client (tests/integration/acl_official_client.py) through the proxy: what the policy allows works, a wrong
secret and a call outside the policy are refused with UNAUTHORIZED, a user created after the proxy started is
known at once, and a policy change reaches the proxy within its users' time to live. Only a Super user reads the
users' secrets (what the proxy's own user does)."""

from __future__ import annotations

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from tests.integration.test_acl import (
    ALICE,
    ALICE_SECRET,
    INNER,
    INNER_SECRET,
    ROOT,
    ROOT_SECRET,
    as_user,
    official_client,
    start_acl_broker,
)

from pocketmq.auth.signature import GRPC_AUTHORIZATION_KEY, GRPC_DATE_TIME_KEY, grpc_authorization
from pocketmq.client import Admin, ClientConfig
from pocketmq.common.errors import PocketMQError
from pocketmq.protocol.codes import AUTH_LIST_USER, V2StatusCode
from pocketmq.protocol.grpc_codec import MessagingServiceStub
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import proxy_process

pytestmark = pytest.mark.timeout(120)

BOB, BOB_SECRET = "bob", "bob-secret-1"
USERS_TTL_MS = 1_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("proxy-acl")
    broker = start_acl_broker(workdir / "broker", "broker-pxacl")
    proxy = proxy_process(
        workdir / "proxy",
        broker.namesrv,
        workers=1,
        extra_args=["--authentication-enabled", "--authorization-enabled", "--users-ttl-ms", str(USERS_TTL_MS)],
    )
    proxy.env.update(POCKETMQ_ACCESS_KEY=INNER, POCKETMQ_SECRET_KEY=INNER_SECRET)  # out of the process list
    proxy.start(timeout_s=90)
    yield {"broker": broker, "proxy": proxy}
    try:
        assert proxy.stop() == 0, proxy.log_tail()
        log = proxy.log_tail(100_000)
        assert all(secret not in log for secret in (INNER_SECRET, ALICE_SECRET, BOB_SECRET))
    finally:
        assert broker.stop() == 0, broker.log_tail()


def as_root(broker, *args: str):
    return as_user(ROOT, ROOT_SECRET, *args, broker=broker)


def through_proxy(cluster, tmp_path, access_key: str, secret_key: str, topic: str) -> dict[str, dict]:
    return official_client(cluster["proxy"], tmp_path, access_key, secret_key, topic)


def route_code(cluster, access_key: str, secret_key: str, topic: str) -> int:
    """The v2 status of a QueryRoute signed as ``access_key`` with ``secret_key``, straight to the proxy."""
    date_time = "20260101T000000Z"
    metadata = [
        (GRPC_DATE_TIME_KEY, date_time),
        (GRPC_AUTHORIZATION_KEY, grpc_authorization(access_key, secret_key, date_time)),
        ("x-mq-client-id", "pxacl-probe"),
    ]
    with grpc.insecure_channel(cluster["proxy"].grpc) as channel:
        request = spb.QueryRouteRequest(topic=pb.Resource(name=topic))
        return MessagingServiceStub(channel).QueryRoute(request, metadata=metadata, timeout=10).status.code


def test_the_official_client_sends_receives_and_acks_as_its_policy_allows(cluster, tmp_path):
    steps = through_proxy(cluster, tmp_path, ALICE, ALICE_SECRET, "orders")
    assert steps["send"]["ok"] and steps["receive"]["ok"] and steps["ack"]["ok"], steps


def test_a_wrong_secret_and_a_call_outside_the_policy_are_refused(cluster, tmp_path):
    steps = through_proxy(cluster, tmp_path / "wrong", ALICE, "not-the-secret", "orders")
    assert not steps["send"]["ok"], steps
    steps = through_proxy(cluster, tmp_path / "outside", ALICE, ALICE_SECRET, "secret_topic")
    assert not steps["send"]["ok"], steps
    assert route_code(cluster, ALICE, "not-the-secret", "orders") == V2StatusCode.UNAUTHORIZED
    assert route_code(cluster, ALICE, ALICE_SECRET, "secret_topic") == V2StatusCode.UNAUTHORIZED
    assert route_code(cluster, ALICE, ALICE_SECRET, "orders") == V2StatusCode.OK


def test_a_new_user_is_known_at_once_and_a_policy_change_takes_effect(cluster, tmp_path):
    broker = cluster["broker"]
    assert route_code(cluster, BOB, BOB_SECRET, "orders") == V2StatusCode.UNAUTHORIZED  # no such user yet
    assert as_root(broker, "acl", "user", "create", BOB, "--password", BOB_SECRET).returncode == 0
    assert route_code(cluster, BOB, BOB_SECRET, "orders") == V2StatusCode.UNAUTHORIZED  # known, with no policy
    granted = as_root(
        broker,
        "acl",
        "policy",
        "create",
        BOB,
        "--resource",
        "Topic:orders",
        "--resource",
        "Group:g1",
        "--actions",
        "Pub,Sub",
    )
    assert granted.returncode == 0, granted.stderr
    wait_until(lambda: route_code(cluster, BOB, BOB_SECRET, "orders") == V2StatusCode.OK, timeout_s=10)
    steps = through_proxy(cluster, tmp_path, BOB, BOB_SECRET, "orders")
    assert steps["send"]["ok"] and steps["receive"]["ok"] and steps["ack"]["ok"], steps
    assert as_root(broker, "acl", "policy", "delete", BOB).returncode == 0
    wait_until(lambda: route_code(cluster, BOB, BOB_SECRET, "orders") == V2StatusCode.UNAUTHORIZED, timeout_s=10)


def test_only_a_super_user_reads_the_users_secrets(cluster):
    broker, with_secret = cluster["broker"], {"withSecret": "true"}
    for args in (
        ("acl", "user", "create", "auditor", "--password", "auditor-secret-1"),
        ("acl", "policy", "create", "auditor", "--resource", "Cluster:*", "--actions", "Get"),
    ):
        assert as_root(broker, *args).returncode == 0
    auditor = ClientConfig(namesrv_addr=broker.namesrv, access_key="auditor", secret_key="auditor-secret-1")
    with Admin(auditor) as admin:
        assert all("password" not in user for user in admin.auth_read(AUTH_LIST_USER, {}))
        with pytest.raises(PocketMQError, match="only an authenticated Super user"):
            admin.auth_read(AUTH_LIST_USER, with_secret)
    with Admin(ClientConfig(namesrv_addr=broker.namesrv, access_key=INNER, secret_key=INNER_SECRET)) as admin:
        users = {user["username"]: user for user in admin.auth_read(AUTH_LIST_USER, with_secret)}
    assert users[ALICE]["password"] == ALICE_SECRET
