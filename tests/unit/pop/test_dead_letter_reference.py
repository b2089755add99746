"""Reference dead letters: what revive writes at the ending of a message it could not read, how the CLI lists
it, and the copy `dlq resend` sends once the real message was read. Pure."""

from __future__ import annotations

import pytest

from pocketmq.broker.pop.copies import dead_letter_reference, retry_copy
from pocketmq.cli.dlq_cmd import dead_row, reference_of, resent_copy
from pocketmq.common.dead_letter_reference import DeadLetterReference
from pocketmq.common.errors import ClientError
from pocketmq.common.message import MessageExt

REF = DeadLetterReference("%RETRY%G_orders", 2, 41, "broker-a", "G", "CONNECTION_REFUSED", "refused", 17)


def test_the_entry_round_trips_and_carries_broker_group_and_rewrite_count():
    entry = dead_letter_reference(REF)
    assert entry.topic == "%DLQ%G" and entry.queue_id == 0
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


def test_listing_shows_where_the_message_is_and_resend_goes_to_the_business_topic():
    entry = dead_letter_reference(REF)
    row = dead_row("broker-b", entry)
    assert row["kind"] == "reference" and row["reference"]["broker"] == "broker-a"
    assert row["body"] == "%RETRY%G_orders/2@41 on broker-a: CONNECTION_REFUSED after 17 rewrite(s)"
    original = MessageExt(topic="orders", body=b"order", properties={"color": "red", "KEYS": "k1"}, queue_offset=7)
    read_back = retry_copy(original, "G", 1000)  # what the reference's retry-topic offset holds
    copy = resent_copy(read_back, "orders")
    assert (copy.topic, copy.body, copy.properties["color"], copy.properties["KEYS"]) == (
        "orders",
        b"order",
        "red",
        "k1",
    )
    assert "RETRY_TOPIC" not in copy.properties
