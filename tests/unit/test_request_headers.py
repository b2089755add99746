"""Request headers built by senders and parsed by the broker from one declaration (protocol.request_headers)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.errors import BadRequestError
from pocketmq.protocol.codes import HA_PULL_COMMIT_LOG
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.headers import INT64_MAX, INT64_MIN, RequestHeader, boolean, int32, text
from pocketmq.protocol.request_headers import (
    HaPullRequestHeader,
    PopMessageRequestHeader,
    PullMessageRequestHeader,
    PullSysFlag,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
)
from pocketmq.server.broker_headers import BrokerPopMessageHeader


class Sample(RequestHeader):
    count: int = int32("count")
    on: bool = boolean("on")
    name: str | None = text("name", None)


def test_fields_are_sent_as_text_in_declaration_order_and_none_is_left_out():
    fields = Sample.ext_fields(name="n", on=True, count=3)
    assert list(fields.items()) == [("count", "3"), ("on", "true"), ("name", "n")]
    assert Sample.ext_fields(count=-1, on=False) == {"count": "-1", "on": "false"}
    assert Sample.ext_fields(count=1, on=None, name=None) == {"count": "1"}


def test_a_required_field_or_an_unknown_one_is_a_type_error():
    with pytest.raises(TypeError):
        Sample.ext_fields(on=True)
    with pytest.raises(TypeError):
        Sample.ext_fields(count=1, colour="red")


def test_a_v2_send_goes_out_under_the_one_letter_names_in_their_order():
    fields = SendMessageRequestHeaderV2.ext_fields(
        producer_group="pg",
        topic="t",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=2,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        flag=7,
        properties="K\x01v\x02",
        batch=True,
    )
    assert list(fields.items()) == [
        ("a", "pg"),
        ("b", "t"),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", "2"),
        ("f", "0"),
        ("g", "1700000000000"),
        ("h", "7"),
        ("i", "K\x01v\x02"),
        ("m", "true"),
    ]
    h = SendMessageRequestHeaderV2.parse(fields)
    assert (h.producer_group, h.topic, h.queue_id, h.flag, h.batch, h.reconsume_times) == ("pg", "t", 2, 7, True, 0)


def test_a_header_may_send_named_fields_first_and_its_subclasses_keep_that_order():
    class Later(Sample, first=("name", "count")):
        extra: int = int32("extra", None)

    class Derived(Later):
        more: str | None = text("more", None)

    assert list(Later.ext_fields(count=1, on=True, name="n", extra=2)) == ["name", "count", "on", "extra"]
    assert list(Derived.ext_fields(count=1, name="n", more="m")) == ["name", "count", "more"]
    assert Later.parse({"count": "1", "name": "n"}).name == "n"  # parsing goes by name, as before


def test_a_slaves_pull_goes_out_in_the_order_slaves_have_always_sent():
    fields = HaPullRequestHeader.ext_fields(
        broker_name="b",
        broker_id=1,
        slave_addr="10.0.0.2:10911",
        phys_offset=300,
        max_bytes=1024,
        suspend_ms=5000,
        last_record_phys_offset=200,
        last_record_crc32c=4_294_967_295,
        applied_metadata_version="7.1.2",
    )
    request = RemotingCommand.request(HA_PULL_COMMIT_LOG, fields)
    request.opaque = 9
    assert request.encode()[8:] == (
        b'{"code":30100,"language":"PYTHON","version":317,"opaque":9,"flag":0,"serializeTypeCurrentRPC":"JSON",'
        b'"extFields":{"brokerName":"b","brokerId":"1","slaveAddr":"10.0.0.2:10911","physOffset":"300",'
        b'"maxBytes":"1024","suspendMillis":"5000","lastRecordPhysOffset":"200","lastRecordCrc32c":"4294967295",'
        b'"appliedMetadataVersion":"7.1.2"}}'
    )
    h = HaPullRequestHeader.parse(fields)
    assert (h.broker_id, h.slave_addr, h.last_record_crc32c) == (1, "10.0.0.2:10911", 4_294_967_295)


def test_unregister_sends_one_group_kind():
    assert UnregisterClientRequestHeader.ext_fields(client_id="c", consumer_group="g") == {
        "clientID": "c",
        "consumerGroup": "g",
    }


@given(
    queue_id=st.integers(0, 2**31 - 1),
    queue_offset=st.integers(0, INT64_MAX),
    max_msg_nums=st.integers(1, 2**31 - 1),
    commit_offset=st.integers(INT64_MIN, INT64_MAX),
    sys_flag=st.integers(0, 2**31 - 1),
    subscription=st.sampled_from(["*", "a || b", "tag"]),
)
def test_what_a_sender_builds_the_broker_parses_back(
    queue_id, queue_offset, max_msg_nums, commit_offset, sys_flag, subscription
):
    values = {
        "consumer_group": "g",
        "topic": "t",
        "queue_id": queue_id,
        "queue_offset": queue_offset,
        "max_msg_nums": max_msg_nums,
        "sys_flag": sys_flag,
        "commit_offset": commit_offset,
        "subscription": subscription,
    }
    h = PullMessageRequestHeader.parse(PullMessageRequestHeader.ext_fields(**values))
    assert {attr: getattr(h, attr) for attr in values} == values
    assert (h.suspend_timeout_ms, h.expression_type) == (0, "TAG")  # not sent: the defaults


def test_pull_sys_flag_bits_are_rocketmqs():
    assert PullSysFlag.of() == 0
    assert PullSysFlag.of(subscription=True) == 4
    assert PullSysFlag.of(suspend=True, subscription=True) == 6
    assert PullSysFlag.of(commit_offset=True, suspend=True, subscription=True) == 7


def test_the_broker_bounds_a_pop_further_than_the_protocol():
    sent = PopMessageRequestHeader.ext_fields(
        consumer_group="g", topic="t", max_msg_nums=33, invisible_time_ms=13 * 3600 * 1000
    )
    assert PopMessageRequestHeader.parse(sent).max_msg_nums == 33
    with pytest.raises(BadRequestError, match="maxMsgNums"):
        BrokerPopMessageHeader.parse(sent)
    sent = PopMessageRequestHeader.ext_fields(
        consumer_group="g", topic="t", max_msg_nums=1, invisible_time_ms=13 * 3600 * 1000
    )
    with pytest.raises(BadRequestError, match="invisibleTime"):
        BrokerPopMessageHeader.parse(sent)
    omitted = {"consumerGroup": "g", "topic": "t", "invisibleTime": "1000"}
    assert BrokerPopMessageHeader.parse(omitted).max_msg_nums == 32  # a POP without maxMsgNums: one CK's worth
