"""Every status code of the reference table (grpc-v2-protocol.md §4) for SendMessage and QueryRoute, from a
real ``pocketmq serve`` (auto-creation off), through a raw stub: the official client refuses some of these
requests on its own side before they reach a server.

TOO_MANY_REQUESTS needs more sends in flight than the front end admits; it is driven in-process in
tests/unit/grpc/test_grpc_servicer.py.
"""

from __future__ import annotations

import time

import pytest
from grpc_support import route_request, stub
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.client.admin import Admin
from pocketmq.client.config import ClientConfig
from pocketmq.common.topic import MessageType
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.testing.processes import broker_process

MAX_BODY_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(
        tmp_path_factory.mktemp("grpc-codes"),
        extra_args=["--set", "auto_create_topic_enable=false", "--set", f"max_message_bytes={MAX_BODY_BYTES}"],
    ).start()
    with Admin(ClientConfig(namesrv_addr=proc.namesrv)) as admin:
        admin.create_topic("codes_mixed", queues=2)
        admin.create_topic("codes_normal", queues=2, message_type=MessageType.NORMAL)
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def v2(broker):
    channel, messaging = stub(broker.grpc)
    yield messaging
    channel.close()


def send(
    v2, *, topic="codes_mixed", body=b"body", message_id="0102FC00AB", message_type=pb.NORMAL, properties=None, **system
):
    request = spb.SendMessageRequest()
    m = request.messages.add(body=body)
    m.topic.name = topic
    m.user_properties.update(properties or {})
    m.system_properties.message_id = message_id
    m.system_properties.message_type = message_type
    for name, value in system.items():
        if name == "keys":
            m.system_properties.keys.extend(value)
        elif name == "delivery_timestamp_s":
            m.system_properties.delivery_timestamp.seconds = value
        else:
            setattr(m.system_properties, name, value)
    reply = v2.SendMessage(request, timeout=5)
    assert [e.status.code for e in reply.entries] == [reply.status.code]  # Node reads the entry, Python the top
    return reply


# -- QueryRoute ------------------------------------------------------------------------------------------------
def test_route_ok(v2, broker):
    reply = v2.QueryRoute(route_request("codes_normal", broker.grpc), timeout=5)
    assert reply.status.code == V2StatusCode.OK and [q.id for q in reply.message_queues] == [0, 1]
    assert [list(q.accept_message_types) for q in reply.message_queues] == [[pb.NORMAL]] * 2


def test_route_topic_not_found(v2, broker):
    assert (
        v2.QueryRoute(route_request("codes_absent", broker.grpc), timeout=5).status.code == V2StatusCode.TOPIC_NOT_FOUND
    )


@pytest.mark.parametrize("topic", ["bad topic", "x" * 128, "", "rmq_sys_secret"])
def test_route_illegal_topic(v2, broker, topic):
    assert v2.QueryRoute(route_request(topic, broker.grpc), timeout=5).status.code == V2StatusCode.ILLEGAL_TOPIC


# -- SendMessage -----------------------------------------------------------------------------------------------
def test_send_ok_keeps_the_message_id(v2):
    reply = send(v2, message_id="MY-OWN-ID")
    assert reply.status.code == V2StatusCode.OK and reply.entries[0].message_id == "MY-OWN-ID"


def test_send_topic_not_found(v2):
    assert send(v2, topic="codes_absent").status.code == V2StatusCode.TOPIC_NOT_FOUND


def test_send_illegal_topic(v2):
    assert send(v2, topic="bad/topic").status.code == V2StatusCode.ILLEGAL_TOPIC


def test_send_message_body_empty(v2):
    assert send(v2, body=b"").status.code == V2StatusCode.MESSAGE_BODY_EMPTY


def test_send_message_body_too_large(v2):
    assert send(v2, body=b"x" * (MAX_BODY_BYTES + 1)).status.code == V2StatusCode.MESSAGE_BODY_TOO_LARGE


@pytest.mark.parametrize("tag", ["a|b", "  ", "bad\x01tag"])
def test_send_illegal_message_tag(v2, tag):
    assert send(v2, tag=tag).status.code == V2StatusCode.ILLEGAL_MESSAGE_TAG


def test_send_illegal_message_key(v2):
    assert send(v2, keys=["ok", " "]).status.code == V2StatusCode.ILLEGAL_MESSAGE_KEY


def test_send_illegal_message_group(v2):
    reply = send(v2, message_type=pb.FIFO, message_group="g" * 64)
    assert reply.status.code == V2StatusCode.ILLEGAL_MESSAGE_GROUP


def test_send_illegal_message_property_key(v2):
    assert send(v2, properties={"UNIQ_KEY": "x"}).status.code == V2StatusCode.ILLEGAL_MESSAGE_PROPERTY_KEY


@pytest.mark.parametrize("properties", [{f"k{i}": "v" for i in range(129)}, {"big": "v" * (16 * 1024 + 1)}])
def test_send_message_properties_too_large(v2, properties):
    assert send(v2, properties=properties).status.code == V2StatusCode.MESSAGE_PROPERTIES_TOO_LARGE


@pytest.mark.parametrize("message_id", ["", "has space", "x" * 129])
def test_send_illegal_message_id(v2, message_id):
    assert send(v2, message_id=message_id).status.code == V2StatusCode.ILLEGAL_MESSAGE_ID


def test_send_illegal_delivery_time(v2):
    four_days_s = 4 * 24 * 3600  # beyond the broker's timer horizon (3 days)
    reply = send(v2, message_type=pb.DELAY, delivery_timestamp_s=int(time.time()) + four_days_s)
    assert reply.status.code == V2StatusCode.ILLEGAL_DELIVERY_TIME


def test_send_message_property_conflict_with_type(v2):
    assert (
        send(v2, topic="codes_normal", message_type=pb.FIFO, message_group="g").status.code
        == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    )
    # a type that contradicts the message's own properties
    assert (
        send(v2, message_type=pb.NORMAL, message_group="g").status.code
        == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    )


def test_transaction_to_a_normal_topic_is_a_type_conflict(v2):
    reply = send(v2, topic="codes_normal", message_type=pb.TRANSACTION)
    assert reply.status.code == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
