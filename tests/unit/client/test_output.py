"""CLI output: tables, JSON lines of messages (text or base64 bodies), group offset rows, broker rows; and
the decoding of pull replies."""

from __future__ import annotations

import base64
import json

from pocketmq.cli.cluster_cmd import broker_rows
from pocketmq.cli.output import format_table, json_line, message_to_text
from pocketmq.client.pull_consumer import PullStatus, pull_result_from_response
from pocketmq.client.simple_consumer import messages_of_pop_reply
from pocketmq.common.message import MessageExt
from pocketmq.common.record import encode_record
from pocketmq.ops.consume_stats import offset_rows
from pocketmq.ops.message_json import body_fields, message_to_json
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.route import BrokerData, ClusterInfo


def stored(body: bytes, **props) -> MessageExt:
    msg = MessageExt.create("orders", body, tags="t", keys=["k1", "k2"], properties=props)
    msg.properties["UNIQ_KEY"] = "7F000001000000000000000000000001"
    msg.queue_id, msg.queue_offset, msg.store_host = 3, 17, ("127.0.0.1", 10911)
    return msg


def test_a_table_is_cut_to_fit_a_terminal_widest_column_first():
    rows = [{"id": "7F0000017F7DA4199DCF888E88A00000", "body": "x" * 60, "n": 1}]
    assert format_table(rows, ["id", "body", "n"], max_width=60).splitlines() == [
        "ID                           BODY                          N",
        "7F0000017F7DA4199DCF888E88~  " + "x" * 27 + "~  1",
    ]
    assert format_table(rows, ["id", "body", "n"]).splitlines()[1].endswith("x" * 60 + "  1")  # a pipe: whole


def test_table_pads_columns_and_prints_missing_cells_as_dashes():
    text = format_table([{"a": 1, "bb": "long value"}, {"a": 22}], ["a", "bb"])
    assert text.splitlines() == ["A   BB", "1   long value", "22  -"]


def test_message_json_has_the_contract_fields():
    obj = json.loads(json_line(message_to_json(stored(b"h\xc3\xa9llo", color="red"), "broker-a")))
    assert obj["message_id"] == "7F000001000000000000000000000001"
    assert {
        k: obj[k] for k in ("topic", "broker", "queue_id", "queue_offset", "tag", "keys", "properties", "body")
    } == {
        "topic": "orders",
        "broker": "broker-a",
        "queue_id": 3,
        "queue_offset": 17,
        "tag": "t",
        "keys": ["k1", "k2"],
        "properties": {"color": "red"},
        "body": "héllo",
    }
    assert "body_encoding" not in obj


def test_binary_bodies_are_base64():
    fields = body_fields(b"\xff\x00\x01")
    assert fields == {"body": base64.b64encode(b"\xff\x00\x01").decode(), "body_encoding": "base64"}
    assert "base64:" in message_to_text(stored(b"\xff\x00"), "b")


def test_message_id_falls_back_to_the_broker_id():
    msg = stored(b"x")
    del msg.properties["UNIQ_KEY"]
    assert message_to_json(msg)["message_id"] == msg.offset_msg_id


def test_offset_rows_compute_lag_and_sort():
    rows = offset_rows(
        {
            "b": {
                "offsetTable": [
                    {"topic": "t", "brokerName": "b", "queueId": 1, "brokerOffset": 10, "consumerOffset": 4},
                    {"topic": "t", "brokerName": "b", "queueId": 0, "brokerOffset": 3, "consumerOffset": 5},
                ]
            }
        }
    )
    assert [(r["queue_id"], r["lag"]) for r in rows] == [(0, 0), (1, 6)]


def test_broker_rows_name_roles_and_grpc_addresses():
    info = ClusterInfo({"a": BrokerData("c", "a", {0: "h:1", 1: "h:2"})}, {"c": ("a",)}, {"h:1": "h:8081"})
    assert [(r["role"], r["address"], r["grpc"]) for r in broker_rows(info)] == [
        ("master", "h:1", "h:8081"),
        ("slave", "h:2", None),
    ]


def pull_reply(code: int, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(
        code=code, ext_fields={"nextBeginOffset": "18", "minOffset": "0", "maxOffset": "18"}, body=body, flag=1
    )


def test_pull_reply_decodes_records_and_filters_tags_client_side():
    body = encode_record(stored(b"one")) + encode_record(MessageExt.create("orders", b"two", tags="other"))
    result = pull_result_from_response(pull_reply(ResponseCode.SUCCESS, body), frozenset({"t"}), 0)
    assert result.status is PullStatus.FOUND and [m.body for m in result.messages] == [b"one"]
    assert result.next_begin_offset == 18
    none_left = pull_result_from_response(pull_reply(ResponseCode.SUCCESS, body), frozenset({"zzz"}), 0)
    assert none_left.status is PullStatus.NO_MATCHED_MSG and none_left.messages == []
    assert pull_result_from_response(pull_reply(ResponseCode.PULL_NOT_FOUND), None, 0).status is PullStatus.NO_NEW_MSG


def test_a_damaged_record_in_a_pull_reply_is_skipped_and_the_records_before_it_kept():
    records = [MessageExt.create("orders", f"m{i}".encode()) for i in range(3)]
    for offset, msg in enumerate(records, start=10):
        msg.queue_offset = offset
    damaged = bytearray(encode_record(records[2]))
    damaged[damaged.index(b"orders")] = 0xFF  # not UTF-8 any more
    body = encode_record(records[0]) + encode_record(records[1]) + bytes(damaged)
    result = pull_result_from_response(pull_reply(ResponseCode.SUCCESS, body), None, 10)
    assert [m.body for m in result.messages] == [b"m0", b"m1"]
    assert result.status is PullStatus.FOUND and result.next_begin_offset == 12  # the damaged one comes next
    alone = pull_result_from_response(pull_reply(ResponseCode.SUCCESS, bytes(damaged)), None, 12)
    assert alone.status is PullStatus.NO_MATCHED_MSG and alone.next_begin_offset == 13  # skipped, not stalled


def test_a_damaged_record_in_a_pop_reply_keeps_the_records_before_it():
    good = MessageExt.create("orders", b"good")
    damaged = bytearray(encode_record(MessageExt.create("orders", b"bad")))
    damaged[damaged.index(b"orders")] = 0xFF
    reply = RemotingCommand(
        code=ResponseCode.SUCCESS,
        ext_fields={"popTime": "1", "invisibleTime": "2", "reviveQid": "0"},
        body=encode_record(good) + bytes(damaged),
        flag=1,
    )
    assert [m.body for m in messages_of_pop_reply(reply, "b")] == [b"good"]
