"""Lenient header reading and the admin request parsers of the remoting front end."""

import pytest

from pocketmq.common.errors import BadRequestError, IllegalTopicError
from pocketmq.common.topic import MessageType
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.error_codes import response_code_of
from pocketmq.protocol.remoting_headers import HeaderFields, host_port
from pocketmq.server.heartbeat_body import consumer_group_info
from pocketmq.server.remoting_admin import parse_properties_text, parse_topic_attributes, topic_config_from_header


@pytest.mark.parametrize("raw,expected", [("7", 7), ("-1", -1), ("3.0", 3), (" 12 ", 12)])
def test_int_fields_accept_numbers_in_any_json_form(raw, expected):
    assert HeaderFields({"n": raw}).int("n") == expected


@pytest.mark.parametrize(
    "raw,expected", [("true", True), ("True", True), ("1", True), ("false", False), ("0", False), ("FALSE", False)]
)
def test_bool_fields_accept_strings_numbers_and_booleans(raw, expected):
    assert HeaderFields({"b": raw}).bool("b") is expected


def test_missing_required_field_is_invalid_parameter_naming_the_field():
    with pytest.raises(BadRequestError) as info:
        HeaderFields({}).int("queueId")
    assert "queueId" in str(info.value)
    assert response_code_of(info.value) == ResponseCode.INVALID_PARAMETER


@pytest.mark.parametrize("raw", ["x", "1.5", "0x10"])
def test_bad_integer_is_refused(raw):
    with pytest.raises(BadRequestError, match="not an integer"):
        HeaderFields({"n": raw}).int("n")


def test_defaults_apply_to_absent_and_blank_fields():
    h = HeaderFields({"blank": ""})
    assert h.int("blank", 5) == 5
    assert h.str("absent", None) is None
    assert h.bool("absent", True) is True


def test_host_port_falls_back_for_non_ipv4():
    assert host_port("10.1.2.3:4567") == ("10.1.2.3", 4567)
    assert host_port("::1:80") == ("127.0.0.1", 0)
    assert host_port("") == ("127.0.0.1", 0)


def test_topic_attributes_parse_message_type_and_skip_removals():
    assert parse_topic_attributes("+message.type=FIFO, -other,+k=v") == {"message.type": "FIFO", "k": "v"}
    with pytest.raises(BadRequestError):
        parse_topic_attributes("+novalue")


def test_create_topic_header_message_type_field_wins_over_attribute():
    h = HeaderFields(
        {
            "topic": "orders",
            "readQueueNums": "4",
            "writeQueueNums": "4",
            "perm": "6",
            "attributes": "+message.type=DELAY",
            "messageType": "fifo",
        }
    )
    config = topic_config_from_header(h, current=None, default_queue_nums=8)
    assert (config.name, config.read_queue_nums, config.write_queue_nums, config.message_type) == (
        "orders",
        4,
        4,
        MessageType.FIFO,
    )


def test_create_topic_header_defaults_to_mixed_and_broker_queue_nums():
    config = topic_config_from_header(HeaderFields({"topic": "t1"}), current=None, default_queue_nums=3)
    assert (config.read_queue_nums, config.write_queue_nums, config.message_type) == (3, 3, MessageType.MIXED)


def test_create_topic_header_refuses_illegal_names_and_types():
    with pytest.raises(IllegalTopicError):
        topic_config_from_header(HeaderFields({"topic": "bad topic"}), current=None, default_queue_nums=8)
    with pytest.raises(BadRequestError, match="unknown message type"):
        topic_config_from_header(
            HeaderFields({"topic": "t", "messageType": "weird"}), current=None, default_queue_nums=8
        )


def test_properties_text_parses_lines_and_refuses_garbage():
    assert parse_properties_text(b"# comment\na=1\n\nautoCreateTopicEnable = false\n") == {
        "a": "1",
        "autoCreateTopicEnable": "false",
    }
    with pytest.raises(BadRequestError):
        parse_properties_text(b"no equals sign")


def test_heartbeat_consumer_data_accepts_enum_ordinals_and_string_versions():
    info = consumer_group_info(
        {
            "groupName": "g1",
            "consumeType": 1,
            "messageModel": "0",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
            "subscriptionDataSet": [{"topic": "t", "subString": "a || b", "subVersion": "123"}],
        }
    )
    assert info.consume_type == "CONSUME_PASSIVELY"
    assert info.message_model == "BROADCASTING"
    assert info.consume_from_where == "CONSUME_FROM_FIRST_OFFSET"
    assert info.subscriptions["t"].sub_version == 123
    assert info.subscriptions["t"].expression == "a || b"


def test_heartbeat_consumer_data_refuses_bad_group_names():
    with pytest.raises(BadRequestError):
        consumer_group_info({"groupName": "bad group"})
