"""Typed request headers (protocol.headers, protocol.request_headers, server.broker_headers): one declaration per
header, built by senders and every field parsed leniently and checked; and the rules around them (names matched whole, JSON depth, persist-first tables)."""

from __future__ import annotations

import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.groups import SubscriptionGroupConfig, SubscriptionGroupManager, group_config_from_json
from pocketmq.broker.topics import TopicManager
from pocketmq.broker.transaction.channels import ProducerChannels
from pocketmq.common.errors import BadRequestError
from pocketmq.common.topic import group_name_problem, topic_name_problem
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.error_codes import response_code_of
from pocketmq.protocol.headers import INT32_MAX, INT64_MAX, RequestHeader, boolean, choice, int32, int64, text
from pocketmq.protocol.remoting_headers import MAX_JSON_BODY_DEPTH, json_body
from pocketmq.protocol.request_headers import PullMessageRequestHeader, send_header
from pocketmq.server.broker_headers import BROKER_REQUEST_HEADERS
from pocketmq.server.remoting_broker import build_broker_router


class Sample(RequestHeader):
    count: int = int32("count", low=1, high=10)
    offset: int = int64("offset", -1)
    on: bool = boolean("on")
    name: str | None = text("name", None, max_chars=5)
    kind: str = choice("kind", ("TAG", "SQL92"), "TAG")


def remark_of(header_cls, fields) -> str:
    with pytest.raises(BadRequestError) as info:
        header_cls.parse(fields)
    assert response_code_of(info.value) == ResponseCode.INVALID_PARAMETER
    return str(info.value)


def test_fields_are_parsed_leniently_into_typed_values():
    h = Sample.parse({"count": "3.0", "offset": " 7 ", "on": "TRUE", "name": "ab", "kind": "sql92"})
    assert (h.count, h.offset, h.on, h.name, h.kind) == (3, 7, True, "ab", "SQL92")
    h = Sample.parse({"count": "10", "offset": "", "on": "false"})
    assert (h.count, h.offset, h.on, h.name, h.kind) == (10, -1, False, None, "TAG")


@pytest.mark.parametrize(
    "fields,named",
    [
        ({}, "count is missing"),
        ({"count": "0"}, "count"),
        ({"count": "11"}, "count"),
        ({"count": "x"}, "count"),
        ({"count": "1", "offset": str(2**63)}, "offset"),
        ({"count": "1", "offset": "1e400"}, "offset"),
        ({"count": "1", "on": "maybe"}, "on"),
        ({"count": "1", "name": "toolong"}, "name"),
        ({"count": "1", "name": "a\x00"}, "name"),
        ({"count": "1", "kind": "TÄG"}, "kind"),
    ],
)
def test_each_bad_field_is_invalid_parameter_naming_it(fields, named):
    assert named in remark_of(Sample, fields)


def test_a_remark_does_not_echo_a_megabyte():
    assert len(remark_of(Sample, {"count": "9" * 1_000_000})) < 200


@given(st.integers())
def test_integer_ranges_are_the_java_types(value):
    fields = {"consumerGroup": "g", "topic": "t", "queueId": "0", "queueOffset": "0", "commitOffset": str(value)}
    if -(2**63) <= value <= INT64_MAX:
        assert PullMessageRequestHeader.parse(fields).commit_offset == value
    else:
        assert "commitOffset" in remark_of(PullMessageRequestHeader, fields)


def test_send_headers_in_both_forms_name_the_long_field():
    with pytest.raises(BadRequestError, match=r"sysFlag \(f\)"):
        send_header({"b": "t", "f": str(INT32_MAX + 1)})
    with pytest.raises(BadRequestError, match="reconsumeTimes"):
        send_header({"topic": "t", "reconsumeTimes": "-1"})
    h = send_header({"a": "pg", "b": "t", "e": "-1", "g": "5", "i": "K\x01v\x02"})
    assert (h.topic, h.queue_id, h.born_timestamp_ms, h.properties) == ("t", -1, 5, "K\x01v\x02")


def test_every_served_code_has_its_header_declared():
    broker = types.SimpleNamespace(
        consumers=types.SimpleNamespace(add_notifier=lambda callback: None),
        transaction_channels=ProducerChannels(),
        access=types.SimpleNamespace(enabled=False),
        metrics=MetricsRegistry(),
    )
    assert set(build_broker_router(broker).codes()) == set(BROKER_REQUEST_HEADERS)


@pytest.mark.parametrize("name", ["t\n", "t\r", "\nt", "a/b", "../x", "t$"])
def test_names_are_matched_whole(name):
    assert topic_name_problem(name) is not None
    assert group_name_problem(name) is not None


def test_json_bodies_are_depth_bounded():
    ok = "[" * MAX_JSON_BODY_DEPTH + "]" * MAX_JSON_BODY_DEPTH
    assert json_body(ok.encode(), "x") is not None
    for depth in (MAX_JSON_BODY_DEPTH + 1, 100_000):
        with pytest.raises(BadRequestError, match="nested deeper"):
            json_body(("[" * depth + "]" * depth).encode(), "x")


def test_group_config_ranges():
    assert group_config_from_json({"groupName": "g", "retryMaxTimes": -1}).retry_max_times == -1
    for bad in (
        {"retryMaxTimes": -2},
        {"retryMaxTimes": 2**31},
        {"retryMaxTimes": True},
        {"brokerId": -1},
        {"retryMaxTimes": 1.5},
        {"whichBrokerWhenConsumeSlowly": 2**63},
    ):
        with pytest.raises(BadRequestError):
            group_config_from_json({"groupName": "g", **bad})


def test_a_topic_or_group_whose_write_fails_is_not_made(tmp_path, monkeypatch):
    topics = TopicManager(tmp_path / "topics.json", auto_create_enabled=True, default_queue_nums=4)
    groups = SubscriptionGroupManager(tmp_path / "groups.json", auto_create=True)
    topics.get_or_create("kept")
    groups.get_or_create("kept")

    def disk_full(path, document):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pocketmq.broker.topics.atomic_write_bytes", disk_full)
    monkeypatch.setattr("pocketmq.broker.topic_journal.append_durably", disk_full)  # the table's journal
    monkeypatch.setattr("pocketmq.broker.groups.atomic_write_json", disk_full)
    version = topics.data_version
    with pytest.raises(OSError):
        topics.get_or_create("lost")
    with pytest.raises(OSError):
        topics.delete("kept")
    with pytest.raises(OSError):
        groups.create_or_update(SubscriptionGroupConfig("lost", retry_max_times=3))
    assert topics.get("lost") is None and topics.get("kept") is not None and topics.data_version == version
    assert groups.get("lost") is None and groups.get("kept") is not None
    # a group of defaults made on first use is served from memory (reads go on on a full disk), unsaved
    assert groups.get_or_create("reader").group == "reader"
    monkeypatch.undo()
    groups.create_or_update(SubscriptionGroupConfig("later"))
    reloaded = SubscriptionGroupManager(tmp_path / "groups.json", auto_create=False)
    reloaded.load()
    assert reloaded.get("reader") is not None and reloaded.get("later") is not None
