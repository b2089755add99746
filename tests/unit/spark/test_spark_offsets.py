"""Offset JSON (what Spark checkpoints) and resolution of startingOffsets/endingOffsets specs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    QueueBounds,
    QueueId,
    from_offset_json,
    parse_offset_spec,
    resolve_spec,
    to_offset_json,
    unknown_queues,
)

A0, A1, A10, B0 = (
    QueueId("t", "broker-a", 0),
    QueueId("t", "broker-a", 1),
    QueueId("t", "broker-a", 10),
    QueueId("t", "broker-b", 0),
)
BOUNDS = {A0: QueueBounds(5, 100), A1: QueueBounds(0, 7), B0: QueueBounds(0, 0)}

queue_ids = st.builds(
    QueueId, st.sampled_from(["orders", "t2", "x"]), st.sampled_from(["broker-a", "b:c"]), st.integers(0, 31)
)


def test_json_has_string_keys_sorted_by_broker_then_numeric_queue():
    text = json.dumps(to_offset_json({A10: 3, B0: 1, A1: 2, A0: 9}))
    assert text == '{"t": {"broker-a:0": 9, "broker-a:1": 2, "broker-a:10": 3, "broker-b:0": 1}}'


@given(st.dictionaries(queue_ids, st.integers(0, 2**62)))
def test_json_round_trip_and_canonical_text(positions):
    encoded = to_offset_json(positions)
    assert from_offset_json(json.loads(json.dumps(encoded))) == positions
    shuffled = dict(reversed(list(positions.items())))
    assert json.dumps(to_offset_json(shuffled)) == json.dumps(encoded)


def test_from_json_accepts_text_and_none_and_rejects_garbage():
    assert from_offset_json('{"t": {"broker-a:0": 4}}') == {A0: 4}
    assert from_offset_json(None) == {} and from_offset_json({}) == {}
    for bad in ('{"t": 1}', '{"t": {"a0": 1}}', '{"t": {"a:x": 1}}', '{"t": {"a:0": true}}', "[]"):
        with pytest.raises(ValueError):
            from_offset_json(bad)


def test_resolve_earliest_latest():
    queues = [A0, A1, B0]
    assert resolve_spec(OffsetSpec("earliest"), queues, BOUNDS, unnamed=EARLIEST) == {A0: 5, A1: 0, B0: 0}
    assert resolve_spec(OffsetSpec("latest"), queues, BOUNDS, unnamed=EARLIEST) == {A0: 100, A1: 7, B0: 0}


def test_resolve_specific_with_markers_and_unnamed_default():
    spec = parse_offset_spec('{"t": {"broker-a:0": 50, "broker-a:1": -1}}')
    assert resolve_spec(spec, [A0, A1, B0], BOUNDS, unnamed=LATEST) == {A0: 50, A1: 7, B0: 0}
    spec = parse_offset_spec('{"t": {"broker-a:0": 2}}')  # below min: kept, judged by the data-loss check
    assert resolve_spec(spec, [A0, A1], BOUNDS, unnamed=EARLIEST) == {A0: 2, A1: 0}


def test_resolve_timestamp_uses_the_brokers_answers():
    spec = OffsetSpec.at_timestamp(1_700_000_000_000)
    assert resolve_spec(spec, [A0], BOUNDS, unnamed=EARLIEST, timestamp_offsets={A0: 42}) == {A0: 42}
    with pytest.raises(ValueError):
        resolve_spec(spec, [A1], BOUNDS, unnamed=EARLIEST, timestamp_offsets={A0: 42})


def test_unknown_queues_of_a_spec():
    spec = parse_offset_spec('{"t": {"broker-a:0": 1, "broker-z:3": 1}}')
    assert unknown_queues(spec, [A0, A1]) == [QueueId("t", "broker-z", 3)]


def test_parse_spec_keywords_are_case_insensitive():
    assert parse_offset_spec(" Earliest ").kind == "earliest"
    assert parse_offset_spec("LATEST").kind == "latest"
