"""The transaction records: a half message's properties, op record bodies (RocketMQ's forms), and what a commit, a
discard, a resume and an escape write."""

from pocketmq.broker.transaction import records
from pocketmq.common import properties as props
from pocketmq.common.message import SYSFLAG_COMPRESSED, MessageExt
from pocketmq.common.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC


def sent(**properties) -> MessageExt:
    msg = MessageExt(
        topic="orders",
        body=b"b",
        properties={props.UNIQ_KEY: "U", props.TRANSACTION_PREPARED: "true", props.PRODUCER_GROUP: "pg", **properties},
        queue_id=2,
    )
    msg.sys_flag = SYSFLAG_COMPRESSED | 0x4
    return msg


def half_of(msg: MessageExt, op_from: int = 7) -> MessageExt:
    records.make_half(msg, op_from)
    msg.queue_offset, msg.phys_offset = 11, 2048
    return msg


def test_is_half_request_follows_the_property_and_rocketmq_s_old_client_exception():
    assert records.is_half_request(sent())
    assert not records.is_half_request(sent(**{props.TRANSACTION_PREPARED: "false"}))
    retried = sent(**{props.DELAY_TIME_LEVEL: "3"})
    retried.reconsume_times = 1
    assert not records.is_half_request(retried)  # a < 4.6.1 client's retry with a delay: a normal message


def test_make_half_parks_the_message_with_its_real_place():
    half = half_of(sent(**{props.DELAY_TIME_LEVEL: "2", props.TIMER_DELIVER_MS: "9"}))
    p = half.properties
    assert (half.topic, half.queue_id, half.sys_flag) == (TRANS_HALF_TOPIC, 0, SYSFLAG_COMPRESSED)
    assert (p[props.REAL_TOPIC], p[props.REAL_QUEUE_ID], p[records.OP_FROM], p[records.TRANSACTION_ID]) == (
        "orders",
        "2",
        "7",
        "U",
    )
    assert props.DELAY_TIME_LEVEL not in p and props.TIMER_DELIVER_MS not in p
    assert records.is_half_record(half) and records.op_from(half, 0) == 7


def test_committed_message_is_the_half_back_in_its_queue_without_bookkeeping():
    half = half_of(sent(color="red"))
    committed = records.committed_message(half, queue_count=4)
    assert (committed.topic, committed.queue_id, committed.body) == ("orders", 2, b"b")
    assert committed.sys_flag == SYSFLAG_COMPRESSED | 0x8 and committed.prepared_transaction_offset == 2048
    assert committed.properties == {
        props.UNIQ_KEY: "U",
        props.PRODUCER_GROUP: "pg",
        "color": "red",
        records.TRANSACTION_ID: "U",
    }
    assert records.committed_message(half, queue_count=2).queue_id == 0  # the topic shrank meanwhile


def test_op_records_in_rocketmq_s_forms():
    op = records.resolution_op([17, 18], records.Resolution.COMMIT, records.Source.CHECK)
    assert (op.topic, op.queue_id, op.body, op.properties[props.TAGS]) == (TRANS_OP_HALF_TOPIC, 0, b"17,18,", "d")
    assert records.parse_resolution(op) == [17, 18]
    old = MessageExt(topic=TRANS_OP_HALF_TOPIC, body=b"42")  # 4.9.x: one offset, no trailing comma
    assert records.parse_resolution(old) == [42]
    assert records.parse_resolution(MessageExt(topic=TRANS_OP_HALF_TOPIC, body=b"x,5,,")) == [5]
    mark = records.check_mark_op([(3, 1), (9, 4)])
    assert records.op_kind(mark) == records.CHECK_MARK_TAG and records.parse_check_mark(mark) == [(3, 1), (9, 4)]


def test_discard_resume_and_escape_keep_the_message_and_its_checks():
    half = half_of(sent())
    discarded = records.discarded_message(half, records.DiscardReason.MAX_CHECKS, 15)
    discarded.phys_offset = 9000
    assert discarded.topic == records.DISCARD_TOPIC and discarded.body == b"b"
    assert discarded.properties[records.DISCARD_REASON] == "MAX_CHECKS"
    assert discarded.properties[records.CHECK_TIMES] == "15"
    assert discarded.properties[records.HALF_QUEUE_OFFSET] == "11"
    resumed = records.resumed_half(discarded)
    assert (resumed.topic, resumed.queue_id) == ("orders", 2) and records.is_half_request(resumed)
    assert resumed.properties[records.CHECK_TIMES] == "0" and resumed.properties[records.RESUMED_FROM] == "9000"
    escaped = records.escaped_half(half, 4)
    assert escaped.topic == "orders" and records.is_half_request(escaped) and escaped.sys_flag & 0x4
    assert records.checks_carried(escaped) == 4 and props.REAL_TOPIC not in escaped.properties
    assert escaped.properties[props.PRODUCER_GROUP] == "pg"
