"""Trace records (common/trace_record.py): RocketMQ 4.x clients' types and the broker's steps, encoded and
decoded; the trace steps read back in order (client/message_trace.py)."""

from __future__ import annotations

from pocketmq.client.message_trace import trace_steps
from pocketmq.common.trace_record import (
    BROKER_STEP,
    END_TRANSACTION,
    PUB,
    SUB_AFTER,
    SUB_BEFORE,
    TraceRecord,
    decode_records,
    encode_records,
    record_keys,
)

# As a 4.x client writes them: fields split by char 1, records ended by char 2.
PUB_TEXT = "Pub\x011700000000000\x01DefaultRegion\x01PG\x01orders\x01MSGID1\x01TagA\x01k1 k2\x01127.0.0.1:10911\x017\x013\x010\x01OFFSETID\x01true\x02"
SUB_BEFORE_TEXT = "SubBefore\x011700000000100\x01DefaultRegion\x01CG\x01REQ1\x01MSGID1\x012\x01k1\x02"
SUB_AFTER_TEXT = "SubAfter\x01REQ1\x01MSGID1\x0112\x01false\x01k1\x011\x011700000000200\x02"
END_TX_TEXT = "EndTransaction\x011700000000300\x01DefaultRegion\x01PG\x01orders\x01MSGID2\x01null\x01\x01127.0.0.1:10911\x011\x01TX1\x01COMMIT_MESSAGE\x01true\x02"


def test_4x_client_records_decode_field_by_field():
    pub, before, after, end = decode_records(PUB_TEXT + SUB_BEFORE_TEXT + SUB_AFTER_TEXT + END_TX_TEXT)
    assert (pub.type, pub.timestamp_ms, pub.group, pub.topic, pub.msg_id, pub.tags, pub.keys) == (
        PUB, 1700000000000, "PG", "orders", "MSGID1", "TagA", "k1 k2",
    )  # fmt: skip
    assert (pub.store_host, pub.body_length, pub.cost_ms, pub.msg_type, pub.offset_msg_id, pub.success) == (
        "127.0.0.1:10911", 7, 3, 0, "OFFSETID", True,
    )  # fmt: skip
    assert (before.type, before.group, before.request_id, before.msg_id, before.retry_times) == (
        SUB_BEFORE, "CG", "REQ1", "MSGID1", 2,
    )  # fmt: skip
    assert (after.type, after.msg_id, after.cost_ms, after.success, after.context_code, after.timestamp_ms) == (
        SUB_AFTER, "MSGID1", 12, False, 1, 1700000000200,
    )  # fmt: skip
    assert (end.type, end.msg_id, end.transaction_id, end.transaction_state, end.from_check, end.msg_type) == (
        END_TRANSACTION, "MSGID2", "TX1", "COMMIT_MESSAGE", True, 1,
    )  # fmt: skip


def test_older_shorter_records_decode():
    old_pub = "Pub\x011\x01R\x01PG\x01t\x01ID\x01\x01\x01h\x010\x010\x010\x01false\x02"  # no offset id
    old_after = "SubAfter\x01REQ\x01ID\x015\x01true\x01\x02"  # no context code, no time
    pub, after = decode_records(old_pub + old_after)
    assert (pub.offset_msg_id, pub.success) == ("", False)
    assert (after.context_code, after.timestamp_ms, after.success) == (0, 0, True)


def test_every_type_round_trips():
    records = [
        TraceRecord(
            PUB,
            "A",
            5,
            group="PG",
            topic="t",
            tags="x",
            keys="k",
            store_host="h",
            body_length=3,
            cost_ms=2,
            offset_msg_id="O",
            success=False,
            client_host="c",
        ),  # fmt: skip
        TraceRecord(SUB_BEFORE, "A", 6, group="CG", request_id="R", retry_times=1, keys="k"),
        TraceRecord(SUB_AFTER, "A", 7, request_id="R", cost_ms=4, success=True, keys="k", context_code=2),
        TraceRecord(
            END_TRANSACTION,
            "A",
            8,
            group="PG",
            topic="t",
            tags="x",
            keys="k",
            store_host="h",
            msg_type=1,
            transaction_id="T",
            transaction_state="ROLLBACK_MESSAGE",
            from_check=True,
        ),  # fmt: skip
        TraceRecord(
            BROKER_STEP,
            "A",
            9,
            topic="t",
            broker="b",
            step="pop",
            actor="client@1",
            queue_id=2,
            queue_offset=40,
            details={"invisible_ms": 300, "note": "split \x01 and \x02 stay inside"},
        ),  # fmt: skip
    ]
    assert decode_records(encode_records(records)) == records


def test_unknown_types_and_broken_records_are_skipped():
    body = "Future\x011\x01x\x02" + "Pub\x01not-a-time\x02" + SUB_BEFORE_TEXT
    assert [r.type for r in decode_records(body)] == [SUB_BEFORE]
    assert decode_records("") == []


def test_a_trace_message_is_keyed_by_its_records_ids_and_keys():
    records = decode_records(PUB_TEXT + SUB_BEFORE_TEXT + END_TX_TEXT)
    assert record_keys(records) == ["MSGID1", "k1", "k2", "MSGID2"]


def step(name: str, at_ms: int) -> TraceRecord:
    return TraceRecord(BROKER_STEP, "A", at_ms, broker="b", step=name, actor="x")


def test_steps_come_in_time_order_and_a_send_after_a_dead_letter_is_a_resend():
    records = [step("pop", 20), step("send", 10), step("dlq", 30), step("send", 40), step("ack", 40)]
    client = TraceRecord(SUB_BEFORE, "A", 25, group="CG")
    steps = trace_steps([*records, client])
    assert [(s.step, s.timestamp_ms) for s in steps] == [
        ("send", 10), ("pop", 20), ("client_consume", 25), ("dlq", 30), ("resend", 40), ("ack", 40),
    ]  # fmt: skip
    assert (steps[2].actor, steps[2].source) == ("CG", "client")
