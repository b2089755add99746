"""The v2 SendMessage / QueryRoute validation table (pocketmq.server.grpc_validation)."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.errors import PocketMQError
from pocketmq.common.topic import MessageType
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.error_codes import v2_code_of
from pocketmq.protocol.grpc_codec import InboundMessage
from pocketmq.server.grpc_validation import (
    SendLimits,
    check_send_request,
    check_topic,
    has_control_character,
    validate_message,
)

NOW_MS = 1_700_000_000_000
LIMITS = SendLimits()


def msg(**overrides) -> InboundMessage:
    fields = dict(topic="orders", body=b"hello", message_id="01AABBCCDDEEFF0011000000010000000A", message_type="NORMAL")
    fields.update(overrides)
    return InboundMessage(**fields)


def code_of(fn, *args, **kwargs) -> int:
    with pytest.raises(PocketMQError) as info:
        fn(*args, **kwargs)
    return v2_code_of(info.value)


def validate(m: InboundMessage, topic_type: MessageType = MessageType.MIXED, limits: SendLimits = LIMITS):
    return validate_message(m, topic_type=topic_type, limits=limits, now_ms=NOW_MS)


@pytest.mark.parametrize("topic", ["", "  ", "a" * 128, "has space", "bad/slash", "TBW102", "rmq_sys_x"])
def test_illegal_topics_are_40002(topic):
    assert code_of(check_topic, topic) == V2StatusCode.ILLEGAL_TOPIC


def test_legal_topic_names_pass():
    for topic in ("a", "A-b_c%d|e", "x" * 127):
        check_topic(topic)


def test_empty_request_and_mixed_topics_are_message_corrupted():
    assert code_of(check_send_request, []) == V2StatusCode.MESSAGE_CORRUPTED
    assert code_of(check_send_request, [msg(), msg(topic="other")]) == V2StatusCode.MESSAGE_CORRUPTED
    assert check_send_request([msg(), msg()]) == "orders"


def test_a_valid_normal_message_passes_unchanged():
    out = validate(msg(tag="TagA", keys=["k1", "k2"], user_properties={"a": "1"}))
    assert out.body == b"hello" and out.message_type == "NORMAL" and out.tag == "TagA"


@pytest.mark.parametrize(
    "body,code", [(b"", V2StatusCode.MESSAGE_BODY_EMPTY), (b"x" * 11, V2StatusCode.MESSAGE_BODY_TOO_LARGE)]
)
def test_body_empty_and_too_large(body, code):
    assert code_of(validate, msg(body=body), limits=SendLimits(max_body_bytes=10)) == code


def test_body_at_the_max_passes():
    assert validate(msg(body=b"x" * 10), limits=SendLimits(max_body_bytes=10)).body == b"x" * 10


def test_gzip_body_is_inflated_and_bounded():
    assert validate(msg(body=gzip.compress(b"plain text"), body_encoding="GZIP")).body == b"plain text"
    bomb = gzip.compress(b"\0" * 1000)
    assert (
        code_of(validate, msg(body=bomb, body_encoding="GZIP"), limits=SendLimits(max_body_bytes=100))
        == V2StatusCode.MESSAGE_BODY_TOO_LARGE
    )
    assert code_of(validate, msg(body=b"not gzip", body_encoding="GZIP")) == V2StatusCode.MESSAGE_CORRUPTED
    assert (
        code_of(validate, msg(body=gzip.compress(b"abcdef" * 50)[:-12], body_encoding="GZIP"))
        == V2StatusCode.MESSAGE_CORRUPTED
    )
    assert code_of(validate, msg(body_encoding="7")) == V2StatusCode.MESSAGE_CORRUPTED


@pytest.mark.parametrize("tag", [" ", "a|b", "a\x01b", "tab\there", "x\x9f"])
def test_illegal_tags_are_40004(tag):
    assert code_of(validate, msg(tag=tag)) == V2StatusCode.ILLEGAL_MESSAGE_TAG


@pytest.mark.parametrize("key", ["", "  ", "a\x02"])
def test_illegal_keys_are_40005(key):
    assert code_of(validate, msg(keys=["ok", key])) == V2StatusCode.ILLEGAL_MESSAGE_KEY


@pytest.mark.parametrize("group", [" ", "g" * 64, "é" * 32, "a\nb"])
def test_illegal_message_groups_are_40006(group):
    assert code_of(validate, msg(message_type="FIFO", message_group=group)) == V2StatusCode.ILLEGAL_MESSAGE_GROUP


def test_message_group_of_63_bytes_passes():
    assert validate(msg(message_type="FIFO", message_group="g" * 63)).message_group == "g" * 63


@pytest.mark.parametrize(
    "props", [{"TAGS": "x"}, {"UNIQ_KEY": "x"}, {"__SHARDINGKEY": "g"}, {"": "v"}, {"a\x01": "v"}, {"k": "v\x02"}]
)
def test_reserved_or_control_property_keys_are_40007(props):
    assert code_of(validate, msg(user_properties=props)) == V2StatusCode.ILLEGAL_MESSAGE_PROPERTY_KEY


def test_too_many_or_too_large_properties_are_43101():
    many = {f"k{i}": "v" for i in range(129)}
    assert code_of(validate, msg(user_properties=many)) == V2StatusCode.MESSAGE_PROPERTIES_TOO_LARGE
    validate(msg(user_properties={f"k{i}": "v" for i in range(128)}))
    big = {"k": "v" * (16 * 1024)}
    assert code_of(validate, msg(user_properties=big)) == V2StatusCode.MESSAGE_PROPERTIES_TOO_LARGE
    # Tag and keys count towards the 16 KiB.
    assert (
        code_of(validate, msg(user_properties={"k": "v" * 16000}, keys=["x" * 400]))
        == V2StatusCode.MESSAGE_PROPERTIES_TOO_LARGE
    )


@pytest.mark.parametrize("message_id", ["", "   ", "a b", "x" * 129, "id\x01"])
def test_missing_or_illegal_message_ids_are_40009(message_id):
    assert code_of(validate, msg(message_id=message_id)) == V2StatusCode.ILLEGAL_MESSAGE_ID


def test_message_id_is_kept_exactly():
    assert validate(msg(message_id="Anything-goes_0123")).message_id == "Anything-goes_0123"


def test_delivery_time_more_than_a_day_ahead_is_40012():
    far = NOW_MS + 24 * 3600 * 1000 + 1
    assert code_of(validate, msg(message_type="DELAY", delivery_timestamp_ms=far)) == V2StatusCode.ILLEGAL_DELIVERY_TIME


@pytest.mark.parametrize(
    "overrides",
    [
        dict(message_type="FIFO"),  # no group
        dict(message_type="NORMAL", message_group="g"),
        dict(message_type="NORMAL", delivery_timestamp_ms=NOW_MS + 10),
        dict(message_type="DELAY"),  # no delivery time
        dict(message_type="TRANSACTION", message_group="g"),
    ],
)
def test_properties_that_contradict_the_type_are_40014(overrides):
    assert code_of(validate, msg(**overrides)) == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


@pytest.mark.parametrize(
    "topic_type,overrides",
    [
        (MessageType.NORMAL, dict(message_type="FIFO", message_group="g")),
        (MessageType.FIFO, dict(message_type="NORMAL")),
        (MessageType.TRANSACTION, dict(message_type="NORMAL")),
    ],
)
def test_a_type_the_topic_does_not_accept_is_40014(topic_type, overrides):
    assert code_of(validate, msg(**overrides), topic_type) == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_a_type_the_protocol_does_not_know_is_not_implemented():
    assert code_of(validate, msg(message_type="42")) == V2StatusCode.NOT_IMPLEMENTED


@pytest.mark.parametrize(
    ("topic_type", "overrides"),
    [
        (MessageType.LITE, dict(message_type="LITE")),  # no lite topic
        (MessageType.MIXED, dict(message_type="LITE", lite_topic="s1")),  # a lite message needs a LITE parent
        (MessageType.LITE, dict(message_type="NORMAL", lite_topic="s1")),
        (MessageType.LITE, dict(message_type="NORMAL")),
    ],
)
def test_lite_messages_need_a_lite_topic_and_a_lite_parent(topic_type, overrides):
    assert code_of(validate, msg(**overrides), topic_type) == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_lite_messages_are_accepted_and_an_unspecified_type_with_a_lite_topic_is_lite():
    assert validate(msg(message_type="LITE", lite_topic="s1"), MessageType.LITE).message_type == "LITE"
    unspecified = msg(message_type="MESSAGE_TYPE_UNSPECIFIED", lite_topic="s1")
    assert validate(unspecified, MessageType.LITE).to_domain().lite_topic == "s1"


def test_transaction_messages_are_accepted():
    assert validate(msg(message_type="TRANSACTION")).message_type == "TRANSACTION"


def test_priority_messages_are_accepted_and_need_their_priority():
    assert validate(msg(message_type="PRIORITY", priority=3), MessageType.PRIORITY).message_type == "PRIORITY"
    assert validate(msg(message_type="MESSAGE_TYPE_UNSPECIFIED", priority=0)).message_type == "PRIORITY"
    assert code_of(validate, msg(message_type="PRIORITY")) == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert code_of(validate, msg(message_type="NORMAL", priority=1)) == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    conflict = msg(message_type="PRIORITY", priority=1)
    assert code_of(validate, conflict, MessageType.NORMAL) == V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_delay_messages_are_accepted():
    assert validate(msg(message_type="DELAY", delivery_timestamp_ms=NOW_MS + 1000)).message_type == "DELAY"


def test_unspecified_type_is_inferred_from_the_properties():
    assert validate(msg(message_type="MESSAGE_TYPE_UNSPECIFIED")).message_type == "NORMAL"
    out = validate(msg(message_type="MESSAGE_TYPE_UNSPECIFIED", message_group="g"))
    assert out.message_type == "FIFO"


def test_control_characters_are_the_iso_ranges():
    assert has_control_character("\x00") and has_control_character("\x1f") and has_control_character("\x7f")
    assert has_control_character("\x85") and not has_control_character("é日本 ~")


@given(
    st.text(max_size=20),
    st.lists(st.text(max_size=8), max_size=3),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4),
)
def test_validation_never_fails_with_anything_but_a_coded_error(tag, keys, user_properties):
    m = msg(tag=tag or None, keys=keys, user_properties=user_properties)
    try:
        out = validate(m)
    except PocketMQError as exc:
        assert 40000 <= v2_code_of(exc) < 60000
    else:
        assert out.tag == m.tag and out.keys == keys


@pytest.mark.parametrize(
    "overrides,code",
    [
        ({"born_timestamp_ms": 2**70}, V2StatusCode.BAD_REQUEST),
        ({"born_timestamp_ms": -1}, V2StatusCode.BAD_REQUEST),
        ({"delivery_timestamp_ms": -1000, "message_type": "DELAY"}, V2StatusCode.ILLEGAL_DELIVERY_TIME),
    ],
)
def test_timestamps_outside_a_java_long_of_milliseconds_are_refused(overrides, code):
    assert code_of(validate, msg(**overrides)) == code


def test_receive_and_change_invisible_numbers():
    from pocketmq.server.grpc_validation import check_invisible_ms, check_receive_numbers

    assert code_of(check_invisible_ms, -1, 1000, zero_ok=True) == V2StatusCode.ILLEGAL_INVISIBLE_TIME
    assert code_of(check_invisible_ms, 0, 1000, zero_ok=False) == V2StatusCode.ILLEGAL_INVISIBLE_TIME
    assert code_of(check_invisible_ms, 1001, 1000, zero_ok=True) == V2StatusCode.ILLEGAL_INVISIBLE_TIME
    check_invisible_ms(0, 1000, zero_ok=True)
    assert code_of(check_receive_numbers, -1, None) == V2StatusCode.BAD_REQUEST
    assert code_of(check_receive_numbers, 32, -5) == V2StatusCode.ILLEGAL_POLLING_TIME
    check_receive_numbers(0, None)  # proto3's unset batch size: the default
