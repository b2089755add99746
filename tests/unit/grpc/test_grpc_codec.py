"""v2 protobuf <-> domain conversions (pocketmq.protocol.grpc_codec)."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.common import properties as props
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import MessageType
from pocketmq.protocol import grpc_codec as codec
from pocketmq.protocol.codes import V2StatusCode


def test_v2_status_codes_are_the_wire_enum():
    assert {c.name: int(c) for c in V2StatusCode} == dict(pb.Code.items())


def test_send_request_decodes_every_system_field():
    req = spb.SendMessageRequest()
    m = req.messages.add(body=b"payload")
    m.topic.name = "orders"
    m.user_properties["color"] = "red"
    sp = m.system_properties
    sp.tag, sp.message_id, sp.message_type, sp.message_group = "TagA", "01ABC", pb.FIFO, "g1"
    sp.keys.extend(["k1", "k2"])
    sp.born_timestamp.seconds = 1_700_000_000
    sp.born_host = "10.0.0.1"
    sp.body_encoding = pb.IDENTITY
    [decoded] = codec.decode_send_request(req)
    assert decoded == codec.InboundMessage(
        topic="orders",
        body=b"payload",
        message_id="01ABC",
        message_type="FIFO",
        tag="TagA",
        keys=["k1", "k2"],
        message_group="g1",
        delivery_timestamp_ms=None,
        born_timestamp_ms=1_700_000_000_000,
        born_host="10.0.0.1",
        body_encoding="IDENTITY",
        user_properties={"color": "red"},
    )
    assert decoded.domain_type is MessageType.FIFO


def test_absent_and_empty_optionals_decode_as_none():
    m = pb.Message(body=b"x")
    m.system_properties.tag = ""
    decoded = codec.decode_message(m)
    assert decoded.tag is None and decoded.message_group is None and decoded.delivery_timestamp_ms is None
    assert decoded.message_type == "MESSAGE_TYPE_UNSPECIFIED"
    m.system_properties.message_type = 77  # proto3 enums are open: an unknown number survives as digits
    assert codec.decode_message(m).message_type == "77"


def test_to_domain_maps_system_fields_to_rocketmq_properties():
    inbound = codec.InboundMessage(
        topic="t", body=b"b", message_id="ID-1", tag="T", keys=["a", "b"], message_group="g", user_properties={"u": "1"}
    )
    m = inbound.to_domain()
    assert m.topic == "t" and m.body == b"b" and m.tags == "T" and m.keys == ["a", "b"]
    assert m.uniq_key == "ID-1" and m.message_group == "g" and m.user_properties() == {"u": "1"}


def test_route_response_fills_what_the_clients_filter_on():
    queues = [codec.RouteQueue("t", i, "broker-a", (("127.0.0.1", 8081),)) for i in range(2)]
    queues.append(codec.RouteQueue("t", 0, "broker-b", (("localhost", 9091),), message_type=MessageType.FIFO))
    resp = codec.route_response(queues)
    assert resp.status.code == V2StatusCode.OK and len(resp.message_queues) == 3
    q0 = resp.message_queues[0]
    assert (q0.id, q0.broker.id, q0.permission) == (0, 0, pb.READ_WRITE)
    assert q0.broker.endpoints.scheme == pb.IPv4 and q0.broker.endpoints.addresses[0].port == 8081
    assert list(q0.accept_message_types) == [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION, pb.PRIORITY]
    qb = resp.message_queues[2]
    assert qb.broker.name == "broker-b" and qb.broker.endpoints.scheme == pb.DOMAIN_NAME
    assert list(qb.accept_message_types) == [pb.FIFO]


def test_send_response_sets_entry_and_top_level_status():
    resp = codec.send_response([codec.SendEntry(V2StatusCode.OK, message_id="m1", queue_offset=7)])
    assert resp.status.code == V2StatusCode.OK and resp.entries[0].message_id == "m1" and resp.entries[0].offset == 7
    assert resp.entries[0].status.code == V2StatusCode.OK
    mixed = codec.send_response([codec.SendEntry(V2StatusCode.OK), codec.SendEntry(V2StatusCode.INTERNAL_SERVER_ERROR)])
    assert mixed.status.code == V2StatusCode.MULTIPLE_RESULTS
    refused = codec.send_error_response(V2StatusCode.ILLEGAL_TOPIC, "bad", 2)
    assert refused.status.code == V2StatusCode.ILLEGAL_TOPIC and [e.status.code for e in refused.entries] == [40002] * 2


def _settings_command(client_type, **kwargs):
    cmd = spb.TelemetryCommand()
    cmd.settings.client_type = client_type
    cmd.settings.request_timeout.seconds = 3
    for key, value in kwargs.items():
        getattr(cmd.settings, key).CopyFrom(value)
    return cmd


def test_producer_settings_reply_has_what_clients_require():
    publishing = pb.Publishing(topics=[pb.Resource(name="t")], max_body_size=0)
    reply = codec.settings_reply(_settings_command(pb.PRODUCER, publishing=publishing), max_body_bytes=4194304)
    assert reply.status.code == V2StatusCode.OK
    s = reply.settings
    assert s.client_type == pb.PRODUCER and s.request_timeout.seconds == 3  # echoed
    assert [t.name for t in s.publishing.topics] == ["t"]
    assert s.publishing.max_body_size == 4194304 and s.publishing.validate_message_type
    assert s.backoff_policy.max_attempts == 3
    exp = s.backoff_policy.exponential_backoff
    assert (exp.initial.ToMilliseconds(), exp.max.ToMilliseconds(), exp.multiplier) == (10, 1000, 2.0)
    assert s.HasField("metric") and not s.metric.on


def test_consumer_settings_reply_has_what_clients_require():
    sub = pb.Subscription(
        group=pb.Resource(name="g"),
        subscriptions=[
            pb.SubscriptionEntry(
                topic=pb.Resource(name="t"), expression=pb.FilterExpression(type=pb.TAG, expression="*")
            )
        ],
    )
    reply = codec.settings_reply(_settings_command(pb.PUSH_CONSUMER, subscription=sub), max_body_bytes=1, fifo=True)
    s = reply.settings
    assert reply.status.code == V2StatusCode.OK and s.subscription.fifo and s.subscription.receive_batch_size == 32
    assert s.subscription.long_polling_timeout.seconds == 20 and s.subscription.long_polling_timeout.nanos == 0
    assert s.backoff_policy.max_attempts == 17
    assert s.backoff_policy.customized_backoff.next[0].seconds == 1
    assert s.backoff_policy.customized_backoff.next[-1].seconds == 7200
    assert len(s.backoff_policy.customized_backoff.next) == 18
    assert codec.decode_client_settings(_settings_command(pb.PUSH_CONSUMER, subscription=sub)) == codec.ClientSettings(
        "PUSH_CONSUMER", "g", ("t",), (("t", "TAG", "*"),)
    )


def test_delivered_message_always_carries_an_md5_upper_case_digest():
    stored = MessageExt(
        topic="t",
        body=b"hello world",
        properties={props.TAGS: "T", props.KEYS: "a b", props.UNIQ_KEY: "ID", props.SHARDING_KEY: "g", "user": "v"},
        queue_id=3,
        queue_offset=9,
        born_timestamp_ms=1_000,
        store_timestamp_ms=2_000,
        born_host=("10.0.0.1", 5),
        store_host=("127.0.0.1", 10911),
        reconsume_times=2,
    )
    out = codec.encode_delivered_message(stored, receipt_handle="rh", invisible_duration_ms=30_000)
    sp = out.system_properties
    assert sp.body_digest.type == pb.MD5
    assert sp.body_digest.checksum == hashlib.md5(b"hello world").hexdigest().upper()
    assert (sp.tag, list(sp.keys), sp.message_id, sp.message_group) == ("T", ["a", "b"], "ID", "g")
    assert sp.message_type == pb.FIFO and sp.delivery_attempt == 3 and sp.receipt_handle == "rh"
    assert (sp.queue_id, sp.queue_offset, sp.store_host) == (3, 9, "127.0.0.1:10911")
    assert sp.invisible_duration.ToMilliseconds() == 30_000 and dict(out.user_properties) == {"user": "v"}
    assert not codec.encode_delivered_message(MessageExt(topic="t", body=b"")).system_properties.HasField("tag")
    assert (
        codec.encode_delivered_message(MessageExt(topic="t", body=b"")).system_properties.body_digest.checksum
        == "D41D8CD98F00B204E9800998ECF8427E"
    )


@given(
    st.binary(max_size=200),
    st.text(min_size=1, max_size=20),
    st.dictionaries(st.text(alphabet="abcxyz", min_size=1, max_size=5), st.text(max_size=10), max_size=4),
)
def test_a_sent_message_comes_back_as_sent(body, tag, user_properties):
    inbound = codec.InboundMessage(
        topic="t", body=body, message_id="MID", tag=tag, keys=["k"], user_properties=user_properties
    )
    domain = inbound.to_domain()
    stored = MessageExt(topic=domain.topic, body=domain.body, properties=domain.properties)
    back = codec.decode_message(codec.encode_delivered_message(stored))
    assert (back.body, back.tag, back.keys, back.message_id) == (body, tag, ["k"], "MID")
    assert back.user_properties == user_properties
