"""Pure sink logic: input columns, rows to messages, order-independent idempotency keys, placement, chunks."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common import properties as props
from pocketmq.common.errors import IllegalMessageError
from pocketmq.common.message import Message
from pocketmq.protocol.batch_codec import encode_batch
from pocketmq.spark.options import OptionError
from pocketmq.spark.sink_rows import (
    IDEMPOTENT_PROPERTY,
    KeyMinter,
    SinkLayout,
    chunk_messages,
    message_wire_bytes,
    queue_index,
    row_to_message,
    sink_layout,
)

ALL = SinkLayout(("body", "topic", "keys", "tags", "message_group", "properties"), None)


def test_layout_accepts_known_columns_and_types():
    layout = sink_layout(
        [("body", "binary"), ("keys", "array<string>"), ("properties", "map<string,string>")], "orders"
    )
    assert layout.columns == ("body", "keys", "properties") and layout.default_topic == "orders"
    assert sink_layout([("body", "string"), ("topic", "string")], None).index("topic") == 1


@pytest.mark.parametrize(
    "columns, topic, words",
    [
        ([("value", "binary")], "t", ["unknown input column", "value"]),
        ([("topic", "string")], None, ["no 'body' column"]),
        ([("body", "int")], "t", ["'body' is int", "binary or string"]),
        ([("body", "binary"), ("tags", "array<string>")], "t", ["'tags'"]),
        ([("body", "binary")], None, ["option 'topic' or a 'topic' column"]),
    ],
)
def test_layout_rejects_bad_input_naming_the_problem(columns, topic, words):
    with pytest.raises(OptionError) as info:
        sink_layout(columns, topic)
    assert all(word in str(info.value) for word in words)


def test_row_to_message_sets_every_field():
    message = row_to_message((b"hi", "orders", ["k1", "k2"], "created", "customer-7", [("region", "eu")]), ALL)
    assert (message.topic, message.body, message.keys, message.tags, message.message_group) == (
        "orders",
        b"hi",
        ["k1", "k2"],
        "created",
        "customer-7",
    )
    assert message.user_properties() == {"region": "eu"}
    text = row_to_message(("héllo", "orders", "a b", None, None, None), ALL)
    assert text.body == "héllo".encode() and text.keys == ["a", "b"] and text.tags is None


def test_row_topic_option_overrides_the_column():
    layout = SinkLayout(("body", "topic"), "forced")
    assert row_to_message((b"x", "ignored"), layout).topic == "forced"


@pytest.mark.parametrize(
    "row, words",
    [
        ((b"x", None, None, None, None, None), "no topic"),
        ((None, "orders", None, None, None, None), "null body"),
        ((b"x", "bad topic!", None, None, None, None), "row topic"),
        ((b"x", "orders", None, None, None, {"UNIQ_KEY": "1"}), "reserved"),
        ((b"x", "orders", None, None, None, {IDEMPOTENT_PROPERTY: "false"}), "reserved"),
    ],
)
def test_bad_rows_fail_clearly(row, words):
    with pytest.raises(IllegalMessageError, match=words):
        row_to_message(row, ALL)


def stamped_keys(write_id, batch_id, partition, messages):
    minter = KeyMinter(write_id, batch_id, partition)
    return [minter.stamp(Message(m.topic, m.body, dict(m.properties))).uniq_key for m in messages]


BODIES = [b"a", b"b", b"a", b"c", b"a"]  # duplicates on purpose: identical rows are distinct messages


def test_keys_are_message_ids_distinct_even_for_identical_rows():
    messages = [Message.create("t", body) for body in BODIES]
    keys = stamped_keys("q1", 3, 0, messages)
    assert len(set(keys)) == len(keys)
    assert all(len(k) == 32 and k == k.upper() and int(k, 16) >= 0 for k in keys)


@given(st.randoms(use_true_random=False))
def test_keys_do_not_depend_on_row_order_within_a_partition(rng: random.Random):
    messages = [Message.create("t", body, tags=str(i % 2)) for i, body in enumerate(BODIES)]
    shuffled = list(messages)
    rng.shuffle(shuffled)
    assert sorted(stamped_keys("q1", 3, 0, messages)) == sorted(stamped_keys("q1", 3, 0, shuffled))


def test_keys_differ_by_write_batch_partition_and_content():
    base = stamped_keys("q1", 3, 0, [Message.create("t", b"a")])
    for other in (
        stamped_keys("q2", 3, 0, [Message.create("t", b"a")]),
        stamped_keys("q1", 4, 0, [Message.create("t", b"a")]),
        stamped_keys("q1", 3, 1, [Message.create("t", b"a")]),
        stamped_keys("q1", 3, 0, [Message.create("t", b"a", tags="x")]),
        stamped_keys("q1", 3, 0, [Message.create("u", b"a")]),
    ):
        assert other != base


def test_stamp_asks_the_broker_to_deduplicate():
    message = KeyMinter("q", 0, 0).stamp(Message.create("t", b"x"))
    assert message.properties[IDEMPOTENT_PROPERTY] == "true" and message.properties[props.UNIQ_KEY]


def test_placement_groups_keys_and_round_robin():
    grouped = [Message.create("t", str(i), message_group="customer-1") for i in range(5)]
    assert len({queue_index(m, 8, sequence=i) for i, m in enumerate(grouped)}) == 1
    minter = KeyMinter("q", 0, 0)
    keyed = [minter.stamp(Message.create("t", str(i))) for i in range(200)]
    indexes = [queue_index(m, 8, sequence=0) for m in keyed]
    assert indexes == [queue_index(m, 8, sequence=99) for m in keyed]  # the key decides, not the order
    assert set(indexes) == set(range(8))
    plain = Message.create("t", b"x")
    assert [queue_index(plain, 4, sequence=i) for i in range(5)] == [0, 1, 2, 3, 0]
    with pytest.raises(IllegalMessageError):
        queue_index(plain, 0, sequence=0)


def test_chunks_keep_order_and_respect_both_limits():
    messages = [Message.create("t", bytes(100), properties={"n": str(i)}) for i in range(10)]
    by_count = chunk_messages(messages, max_count=4, max_bytes=1 << 20)
    assert [len(c) for c in by_count] == [4, 4, 2] and [m for c in by_count for m in c] == messages
    per_message = message_wire_bytes(messages[0])
    by_bytes = chunk_messages(messages, max_count=100, max_bytes=3 * per_message)
    assert [len(c) for c in by_bytes] == [3, 3, 3, 1]
    huge = [Message.create("t", bytes(5000))]
    assert chunk_messages(huge, max_count=10, max_bytes=100) == [huge]  # one oversized message still goes alone
    assert chunk_messages([], max_count=4, max_bytes=100) == []


def test_wire_size_matches_the_batch_encoding():
    message = Message.create("t", b"body", tags="x", properties={"region": "é"})
    assert message_wire_bytes(message) == len(encode_batch([message]))
