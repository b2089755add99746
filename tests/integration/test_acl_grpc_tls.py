"""Source address ranges of ACL entries apply to gRPC calls that come through the TLS front (real processes,
docs/security.md): the front tells the gRPC server which client each connection stands for, so a policy that
allows or denies by address decides by the client's real address, over TLS and over plaintext on the same port."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import service_pb2 as spb
from tests.integration.remoting_calls import call

from pocketmq.auth.signature import GRPC_AUTHORIZATION_KEY, GRPC_DATE_TIME_KEY, Credentials, grpc_authorization
from pocketmq.cli.main import main as cli_main
from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.codes import AUTH_CREATE_ACL, AUTH_CREATE_USER, RequestCode, ResponseCode, V2StatusCode
from pocketmq.protocol.grpc_codec import MessagingServiceStub
from pocketmq.protocol.route import create_topic_fields
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.timeout(90)
ROOT, ROOT_SECRET = "root", "root-secret-1"
ALICE, ALICE_SECRET = "alice", "alice-secret-1"
ALICE_ACL = {
    "subject": f"User:{ALICE}",
    "policies": [
        {
            "policyType": "Custom",
            "entries": [
                {"resource": "Topic:near_allowed", "actions": ["Pub"], "sourceIps": ["127.0.0.1"], "decision": "Allow"},
                {"resource": "Topic:far_allowed", "actions": ["Pub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"},
                {"resource": "Topic:ip_*", "actions": ["Pub"], "decision": "Allow"},
                {"resource": "Topic:ip_denied", "actions": ["Pub"], "sourceIps": ["127.0.0.0/8"], "decision": "Deny"},
            ],
        }
    ],
}
# topic -> what alice's send from 127.0.0.1 gets. Were the address unknown, near_allowed would be refused (no
# entry matches) and ip_denied allowed (the Deny would not match, the prefix's Allow would).
EXPECTED = {
    "near_allowed": V2StatusCode.OK,
    "far_allowed": V2StatusCode.UNAUTHORIZED,
    "ip_denied": V2StatusCode.UNAUTHORIZED,
    "ip_other": V2StatusCode.OK,
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    assert cli_main(["tls", "dev-cert", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certs):
    proc = broker_process(
        tmp_path_factory.mktemp("acl-grpc-tls"),
        "broker-acl-tls",
        extra_args=[
            *("--tls-cert-file", str(certs / "server.pem"), "--tls-key-file", str(certs / "server-key.pem")),
            *("--set", "authentication_enabled=true", "--set", "authorization_enabled=true"),
        ],
    )
    proc.env.update(
        POCKETMQ_ACL_ROOT_USER=ROOT,
        POCKETMQ_ACL_ROOT_PASSWORD=ROOT_SECRET,
        POCKETMQ_INNER_ACCESS_KEY="inner",
        POCKETMQ_INNER_SECRET_KEY="inner-secret-1",
    )
    proc.start()
    asyncio.run(topics_and_alice(proc.remoting))
    yield proc
    assert proc.stop() == 0, proc.log_tail()


async def topics_and_alice(addr: str) -> None:
    root = RemotingClient(credentials=Credentials(ROOT, ROOT_SECRET))
    user = {"username": ALICE, "password": ALICE_SECRET, "userType": "Normal", "userStatus": "enable"}
    try:
        for topic in EXPECTED:
            created = await call(
                root, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields(TopicConfig(topic, 1, 1))
            )
            assert created.code == ResponseCode.SUCCESS, created.remark
        for code, fields, body in (
            (AUTH_CREATE_USER, {"username": ALICE}, user),
            (AUTH_CREATE_ACL, {"subject": f"User:{ALICE}"}, ALICE_ACL),
        ):
            reply = await call(root, addr, code, fields, json.dumps(body).encode())
            assert reply.code == ResponseCode.SUCCESS, reply.remark
    finally:
        await root.close()


def alice_sends(channel: grpc.Channel, topic: str) -> int:
    request = spb.SendMessageRequest()
    message = request.messages.add(body=b"from 127.0.0.1")
    message.topic.name = topic
    message.system_properties.message_id = f"01{time.time_ns():X}"
    date_time = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    metadata = (
        (GRPC_DATE_TIME_KEY, date_time),
        (GRPC_AUTHORIZATION_KEY, grpc_authorization(ALICE, ALICE_SECRET, date_time)),
    )
    return MessagingServiceStub(channel).SendMessage(request, timeout=10, metadata=metadata).status.code


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plaintext"])
def test_source_address_ranges_decide_by_the_client_address_behind_the_tls_front(broker, certs, tls):
    credentials = grpc.ssl_channel_credentials(root_certificates=(certs / "ca.pem").read_bytes())
    with grpc.secure_channel(broker.grpc, credentials) if tls else grpc.insecure_channel(broker.grpc) as channel:
        got = {topic: alice_sends(channel, topic) for topic in EXPECTED}
    assert got == EXPECTED
