"""Recall of delayed messages: handles that cannot be forged (pure), and the timer service in a real in-process
broker in virtual time: a recall before due is never delivered (also after a restart), after due is too late,
a second recall succeeds again."""

import base64

import pytest
from tests.unit.timer.test_timer_service import make_broker, tick, visible

from pocketmq.broker.timer.recall import RecallHandles
from pocketmq.common.errors import InvalidRecallHandleError, RecallTooLateError
from pocketmq.common.message import Message
from pocketmq.protocol.codes import ResponseCode, V2StatusCode
from pocketmq.protocol.error_codes import response_code_of, v2_code_of
from pocketmq.runtime.clock import ManualClock

SECRET = b"s" * 32


def edit(handle: str, index: int, value: str) -> str:
    raw = base64.urlsafe_b64decode(handle).decode()
    fields = raw.split(" ")
    fields[index] = value if index < 5 else f"{value}.{fields[5].split('.')[1]}"
    return base64.urlsafe_b64encode(" ".join(fields).encode()).decode()


def test_a_handle_opens_to_what_it_was_issued_for_and_reads_as_rocketmq_v1():
    handles = RecallHandles(SECRET, "broker-a")
    handle = handles.issue("orders", 1_700_000_000_000, "MSGID", 42)
    target = handles.open(handle, "orders")
    assert (target.topic, target.broker_name, target.deliver_ms, target.message_id, target.timer_queue_offset) == (
        "orders",
        "broker-a",
        1_700_000_000_000,
        "MSGID",
        42,
    )
    # RocketMQ's clients read the first five fields (version, topic, broker name, time, message id)
    assert base64.urlsafe_b64decode(handle).decode().split(" ")[:5] == [
        "v1",
        "orders",
        "broker-a",
        "1700000000000",
        "MSGID",
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "not base64 !",
        base64.urlsafe_b64encode(b"v1 orders broker-a 1 MSGID").decode(),  # RocketMQ's own, unsigned
        "x" * 5000,
    ],
)
def test_garbage_is_refused(bad):
    with pytest.raises(InvalidRecallHandleError):
        RecallHandles(SECRET, "broker-a").open(bad)


@pytest.mark.parametrize("index, value", [(1, "other"), (3, "1"), (4, "OTHERID"), (5, "7")])
def test_an_edited_handle_is_refused(index, value):
    handles = RecallHandles(SECRET, "broker-a")
    handle = handles.issue("orders", 1_700_000_000_000, "MSGID", 42)
    with pytest.raises(InvalidRecallHandleError, match="signature"):
        handles.open(edit(handle, index, value))


def test_another_secret_another_topic_or_another_broker_is_refused():
    handle = RecallHandles(SECRET, "broker-a").issue("orders", 1, "MSGID", 42)
    with pytest.raises(InvalidRecallHandleError, match="signature"):
        RecallHandles(b"t" * 32, "broker-a").open(handle)
    with pytest.raises(InvalidRecallHandleError, match="topic"):
        RecallHandles(SECRET, "broker-a").open(handle, "payments")
    with pytest.raises(InvalidRecallHandleError, match="broker"):
        RecallHandles(SECRET, "broker-b").open(handle)


def test_codes_on_the_wire():
    assert v2_code_of(InvalidRecallHandleError("x")) == V2StatusCode.BAD_REQUEST
    assert v2_code_of(RecallTooLateError("x")) == V2StatusCode.ILLEGAL_DELIVERY_TIME
    assert response_code_of(InvalidRecallHandleError("x")) == ResponseCode.ILLEGAL_OPERATION
    assert response_code_of(RecallTooLateError("x")) == ResponseCode.ILLEGAL_OPERATION


async def send_delayed(broker, body: str, delay_ms: int):
    msg = Message.create("t", body, properties={"TIMER_DELAY_MS": str(delay_ms)})
    return (await broker.messages.send([msg], topic="t", queue_id=0))[0]


async def test_recalled_before_due_is_never_delivered_even_after_a_restart(tmp_path):
    clock = ManualClock()
    broker = make_broker(tmp_path, clock)
    await broker.start(remoting_port=10911)
    kept = await send_delayed(broker, "kept", 2000)
    gone = await send_delayed(broker, "gone", 2000)
    assert kept.recall_handle and gone.recall_handle and kept.recall_handle != gone.recall_handle
    assert await broker.timer.recall_by_handle(gone.recall_handle, "t") == (gone.msg_id, True)
    assert await broker.timer.recall_by_handle(gone.recall_handle, "t") == (gone.msg_id, False)  # again: fine
    assert broker.timer.pending == 1
    await tick(broker, clock, 1000)
    await broker.shutdown()

    broker = make_broker(tmp_path, clock)  # the secret is kept: the handles stay valid
    await broker.start(remoting_port=10911)
    try:
        assert broker.timer.pending == 1
        assert await broker.timer.recall_by_handle(gone.recall_handle, "t") == (gone.msg_id, False)
        await tick(broker, clock, 1000)
        assert [m.body for m in visible(broker)] == [b"kept"]
        with pytest.raises(RecallTooLateError):
            await broker.timer.recall_by_handle(kept.recall_handle, "t")
        await tick(broker, clock, 60_000)
        assert [m.body for m in visible(broker)] == [b"kept"]
    finally:
        await broker.shutdown()


async def test_a_recall_at_the_due_time_is_too_late_and_the_message_is_delivered(tmp_path):
    clock = ManualClock()
    broker = make_broker(tmp_path, clock)
    await broker.start(remoting_port=10911)
    try:
        sent = await send_delayed(broker, "due", 1000)
        clock.advance(1000)
        with pytest.raises(RecallTooLateError):
            await broker.timer.recall_by_handle(sent.recall_handle)
        await tick(broker, clock, 0)
        assert [m.body for m in visible(broker)] == [b"due"]
    finally:
        await broker.shutdown()
