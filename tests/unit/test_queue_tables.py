"""Message-queue-keyed tables as fastjson writes them (RocketMQ's ResetOffsetBody, ConsumerRunningInfo)."""

from __future__ import annotations

import json

import pytest

from pocketmq.common.message import MessageQueue
from pocketmq.protocol.queue_tables import dumps_with_queue_tables, loads, queue_entries
from pocketmq.protocol.remoting_headers import MAX_JSON_BODY_DEPTH


def test_written_as_fastjson_writes_a_map_and_read_back_as_entries():
    table = {MessageQueue("t", "b", 1): 7, MessageQueue("t", "b", 0): 5}
    body = dumps_with_queue_tables({"consumersNotified": 2}, {"offsetTable": table})
    assert body == (
        b'{"consumersNotified":2,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5,'
        b'{"brokerName":"b","queueId":1,"topic":"t"}:7}}'
    )
    parsed = loads(body)
    assert parsed["consumersNotified"] == 2
    assert queue_entries(parsed["offsetTable"], "offset") == [
        {"topic": "t", "brokerName": "b", "queueId": 0, "offset": 5},
        {"topic": "t", "brokerName": "b", "queueId": 1, "offset": 7},
    ]


def test_a_java_clients_running_info_reads_with_object_values_merged():
    java = (
        '{"mqTable":{{"brokerName":"b","queueId":3,"topic":"t"}:{"commitOffset":9,"locked":false}},'
        ' "properties": {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"}, "subscriptionSet": [{"topic": "t"}], '
        '"statusTable": {}, "jstack": null}'
    )
    info = loads(java)
    assert info["properties"] == {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"}
    assert queue_entries(info["mqTable"], "value") == [
        {"topic": "t", "brokerName": "b", "queueId": 3, "commitOffset": 9, "locked": False}
    ]
    assert queue_entries(loads(b'{"mqTable":{}}')["mqTable"], "value") == []


@pytest.mark.parametrize("text", ['{"a": 1, "b": [1, 2, {"c": null}], "d": "x\\"}"}', "[]", " 3 ", '"s"'])
def test_plain_json_reads_as_json_does(text):
    assert loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["{", '{"a" 1}', "[1 2]", "{} x", '{"a":1,}', "[" * (MAX_JSON_BODY_DEPTH + 2)])
def test_broken_or_too_deep_bodies_are_value_errors(text):
    with pytest.raises(ValueError):
        loads(text)


def test_a_table_of_neither_form_is_refused():
    with pytest.raises(ValueError):
        queue_entries({"x": 1}, "offset")
