"""Reference dead letters: what revive writes at the ending of a message it could not read (kept apart from
%DLQ%<group>), how their events fold and how the CLI lists them; where `dlq resend` sends a dead message and
what it sends. Pure."""

from __future__ import annotations

import pytest

from pocketmq.broker.pop import copies
from pocketmq.broker.pop.copies import dead_letter_reference, retry_copy
from pocketmq.broker.send_back import retry_copy as send_back_copy
from pocketmq.broker.timer.dead_letter import dead_letter as timer_dead_letter
from pocketmq.common.dead_letter_reference import (
    REFERENCE_TOPIC,
    STATE_GONE,
    STATE_OPEN,
    STATE_RESOLVED,
    DeadLetterReference,
    closing_properties,
    fold,
)
from pocketmq.common.errors import ClientError
from pocketmq.common.message import MessageExt
from pocketmq.ops.dead_letters import dead_row, reference_of
from pocketmq.ops.dlq_target import redelivery, resent_copy

REF = DeadLetterReference("%RETRY%G_orders", 2, 41, "broker-a", "G", "CONNECTION_REFUSED", "refused", 17)


def test_the_entry_round_trips_and_carries_broker_group_and_rewrite_count():
    entry = dead_letter_reference(REF)
    assert entry.topic == REFERENCE_TOPIC and entry.queue_id == 0  # never in %DLQ%G: its consumers get messages
    assert DeadLetterReference.of_message(entry.properties, entry.body) == REF
    props = entry.properties
    assert (props["PMQ_DLQ_ORIGIN_BROKER"], props["PMQ_DLQ_REWRITE_COUNT"], props["PMQ_DLQ_REASON"]) == (
        "broker-a",
        "17",
        "CONNECTION_REFUSED",
    )
    assert (props["DLQ_ORIGIN_TOPIC"], props["PMQ_DLQ_ORIGIN_QUEUE_ID"], props["PMQ_DLQ_ORIGIN_QUEUE_OFFSET"]) == (
        "%RETRY%G_orders",
        "2",
        "41",
    )


def test_a_message_body_that_looks_like_a_reference_is_not_one_without_the_marker():
    assert DeadLetterReference.of_message({}, REF.to_json()) is None
    with pytest.raises(ClientError):
        reference_of(MessageExt(topic="%DLQ%G", body=b"{}", properties={"PMQ_DLQ_REFERENCE": "true"}))


def test_events_fold_to_each_reference_s_latest_state():
    other = DeadLetterReference("T", 0, 5, "broker-a", "H", "TIMEOUT")
    opened, opened_too = dead_letter_reference(REF), dead_letter_reference(other)
    closed = MessageExt(topic=REFERENCE_TOPIC, body=REF.to_json(), properties=closing_properties(REF, STATE_GONE, "x"))
    junk = MessageExt(topic=REFERENCE_TOPIC, body=b"{}", properties={"PMQ_DLQ_REFERENCE": "true"})
    states = fold([opened, opened_too, junk, closed])
    assert {k: (v.state, v.outcome) for k, v in states.items()} == {
        REF.key: (STATE_GONE, "x"),
        other.key: (STATE_OPEN, ""),
    }
    assert states[REF.key].entry is closed
    assert fold([opened, closed, opened])[REF.key].state == STATE_OPEN  # written again: open again
    resolved = MessageExt(
        topic=REFERENCE_TOPIC, body=REF.to_json(), properties=closing_properties(REF, STATE_RESOLVED, "")
    )
    assert fold([opened, resolved])[REF.key].state == STATE_RESOLVED


def test_listing_shows_where_the_message_is_and_its_state():
    entry = dead_letter_reference(REF)
    row = dead_row("broker-b", entry)
    assert row["kind"] == "reference" and row["reference"]["broker"] == "broker-a"
    assert row["body"] == "%RETRY%G_orders/2@41 on broker-a: CONNECTION_REFUSED after 17 rewrite(s)"
    gone = MessageExt(topic=REFERENCE_TOPIC, body=REF.to_json(), properties=closing_properties(REF, STATE_GONE, "why"))
    row = dead_row("broker-b", gone)
    assert (row["kind"], row["reference"]["outcome"]) == ("reference gone", "why")


ORIGINAL = MessageExt(topic="orders", body=b"order", properties={"color": "red", "KEYS": "k1", "UNIQ_KEY": "id1"})


def test_a_pop_dead_letter_goes_back_through_the_group_s_pop_retry_topic():
    retried = retry_copy(ORIGINAL, "G", 1000)
    for dead in (copies.dead_letter(retried, "G", "MAX_ATTEMPTS"), copies.dead_letter(ORIGINAL, "G", "MAX_ATTEMPTS")):
        copy = redelivery(dead, "G", to_topic=False)
        assert (copy.topic, copy.properties["RETRY_TOPIC"], copy.body) == ("%RETRY%G_orders", "orders", b"order")
        assert (copy.properties["color"], copy.properties["KEYS"], copy.properties["UNIQ_KEY"]) == ("red", "k1", "id1")
        assert not {"PMQ_DLQ_REASON", "DLQ_ORIGIN_TOPIC", "PMQ_DLQ_ORIGIN_QUEUE_ID", "1ST_POP_TIME"} & set(
            copy.properties
        )
        to_topic = redelivery(dead, "G", to_topic=True)
        assert to_topic.topic == "orders" and "RETRY_TOPIC" not in to_topic.properties


def test_a_push_dead_letter_goes_back_through_the_group_s_retry_topic():
    dead = send_back_copy(ORIGINAL, topic="%DLQ%G", queue_id=0, delay_level=0, origin_msg_id=None)
    copy = redelivery(dead, "G", to_topic=False)
    assert (copy.topic, copy.properties["RETRY_TOPIC"]) == ("%RETRY%G", "orders")
    assert not {"ORIGIN_MESSAGE_ID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES"} & set(copy.properties)
    waiting = send_back_copy(ORIGINAL, topic="%RETRY%G", queue_id=0, delay_level=3, origin_msg_id=None)
    timer_dead = timer_dead_letter(waiting, "WRITE_FAILED")  # a retry whose delivery kept failing
    assert timer_dead is not None and timer_dead.topic == "%DLQ%G"
    assert redelivery(timer_dead, "G", to_topic=False).topic == "%RETRY%G"
    with pytest.raises(ClientError):
        redelivery(MessageExt(topic="%DLQ%G", body=b"?"), "G", to_topic=False)


def test_a_resolved_reference_is_resent_as_the_message_it_names():
    read_back = retry_copy(ORIGINAL, "G", 1000)  # what the reference's retry-topic offset holds
    copy = resent_copy(read_back, "%RETRY%G_orders", "orders")
    assert (copy.topic, copy.body, copy.properties["color"], copy.properties["RETRY_TOPIC"]) == (
        "%RETRY%G_orders",
        b"order",
        "red",
        "orders",
    )
    assert "RETRY_TOPIC" not in resent_copy(read_back, "orders", "orders").properties
