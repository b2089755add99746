"""Option parsing of the pocketmq Spark source and sink: bad options fail naming the option."""

from __future__ import annotations

import pytest

from pocketmq.client.selector import MessageSelector
from pocketmq.spark.offsets import QueueId
from pocketmq.spark.options import (
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    OptionError,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)

BASE = {"namesrv": "127.0.0.1:9876", "topic": "orders"}


def source(streaming: bool = True, **extra: str):
    return parse_source_options({**BASE, **extra}, streaming=streaming)


def fails(option: str, streaming: bool = True, base: dict | None = None, **extra: str) -> str:
    with pytest.raises(OptionError) as info:
        parse_source_options({**(BASE if base is None else base), **extra}, streaming=streaming)
    assert info.value.option.lower() == option.lower(), str(info.value)
    assert option.lower() in str(info.value).lower()
    return str(info.value)


def test_defaults_follow_kafka_stream_latest_batch_earliest():
    stream = source()
    assert stream.starting.kind == "latest" and stream.ending.kind == "latest"
    assert stream.fail_on_data_loss and not stream.include_properties
    assert (
        stream.selector == MessageSelector.by_tag("*") and stream.max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS
    )
    assert source(streaming=False).starting.kind == "earliest"


def test_option_names_are_case_insensitive():
    opts = parse_source_options(
        {"NAMESRV": "h:1", "Topic": "a, b ,a", "MAXOFFSETSPERTRIGGER": "10", "failondataloss": "FALSE"}, streaming=True
    )
    assert opts.topics == ("a", "b") and opts.max_offsets_per_trigger == 10 and not opts.fail_on_data_loss


def test_topic_and_pattern_together_fail():
    message = fails("topicPattern", topicPattern="ord.*")
    assert "not both" in message


def test_topic_and_topics_together_fail():
    fails("topics", topics="x")


def test_missing_subscription_and_namesrv_fail():
    fails("topic", base={"namesrv": "h:1"})
    fails("namesrv", base={"topic": "t"})
    fails("namesrv", namesrv="nohostport")


def test_bad_pattern_fails():
    fails("topicPattern", base={"namesrv": "h:1", "topicPattern": "(unclosed"})


def test_pattern_subscribes_by_full_match():
    opts = parse_source_options({"namesrv": "h:1", "topicPattern": "ord.*"}, streaming=True)
    assert opts.subscribes("orders") and not opts.subscribes("my-orders")


@pytest.mark.parametrize(
    "value",
    [
        "{not json",
        "[1, 2]",
        '{"orders": 5}',
        '{"orders": {"b0": 1}}',
        '{"orders": {"b:0": "x"}}',
        '{"orders": {"b:0": -3}}',
    ],
)
def test_malformed_starting_offsets_fail(value):
    fails("startingOffsets", startingOffsets=value)


def test_json_offsets_parse_with_earliest_latest_markers():
    opts = source(startingOffsets='{"orders": {"broker-a:0": 5, "broker-a:1": -2, "broker-b:0": -1}}')
    assert opts.starting.kind == "specific"
    assert opts.starting.specific == {
        QueueId("orders", "broker-a", 0): 5,
        QueueId("orders", "broker-a", 1): -2,
        QueueId("orders", "broker-b", 0): -1,
    }


def test_json_offsets_of_an_unsubscribed_topic_fail():
    assert "other" in fails("startingOffsets", startingOffsets='{"other": {"b:0": 1}}')


def test_batch_rules():
    fails("startingOffsets", streaming=False, startingOffsets="latest")
    fails("endingOffsets", streaming=False, endingOffsets="earliest")
    fails("endingOffsets", streaming=True, endingOffsets="latest")
    fails("commitToGroup", streaming=False, commitToGroup="g")
    assert source(streaming=False, endingOffsets='{"orders": {"b:0": 3}}').ending.kind == "specific"


@pytest.mark.parametrize("option", ["maxOffsetsPerTrigger", "minOffsetsPerTrigger", "minPartitions", "pullBatchSize"])
@pytest.mark.parametrize("value", ["-1", "0", "ten"])
def test_negative_or_non_numeric_limits_fail(option, value):
    fails(option, **{option: value})


def test_min_above_max_and_delay_without_min_fail():
    fails("minOffsetsPerTrigger", minOffsetsPerTrigger="20", maxOffsetsPerTrigger="10")
    fails("maxTriggerDelay", maxTriggerDelay="5s")
    fails("maxTriggerDelay", minOffsetsPerTrigger="5", maxTriggerDelay="soon")
    assert source(minOffsetsPerTrigger="5", maxTriggerDelay="5s").max_trigger_delay_ms == 5000


def test_starting_timestamp_takes_precedence_as_in_kafka():
    opts = source(startingTimestamp="1700000000000", startingOffsets="earliest")
    assert opts.starting.kind == "timestamp" and opts.starting.timestamp_ms == 1_700_000_000_000
    fails("startingTimestamp", startingTimestamp="yesterday")


def test_typos_are_refused_with_a_hint():
    assert "maxOffsetsPerTrigger" in fails("maxOffsetPerTrigger", maxOffsetPerTrigger="10")
    fails("kafka.bootstrap.servers", **{"kafka.bootstrap.servers": "x"})


def test_spark_pass_through_options_are_accepted():
    assert source(path="/x", checkpointLocation="/y").topics == ("orders",)


def test_bad_booleans_and_groups_fail():
    fails("failOnDataLoss", failOnDataLoss="yes")
    fails("commitToGroup", commitToGroup="bad group!")


@pytest.mark.parametrize(
    "text,expected_ms",
    [("500", 500), ("500ms", 500), ("30s", 30_000), ("15m", 900_000), ("1h", 3_600_000), (" 2 min ", 120_000)],
)
def test_durations(text, expected_ms):
    assert parse_duration_ms(text, "maxTriggerDelay") == expected_ms


def test_a_filter_is_a_tag_expression_or_an_sql92_expression_not_both():
    assert source(tags="paid || refunded").selector == MessageSelector.by_tag("paid || refunded")
    sql = "region = 'eu' AND amount > 100"
    assert source(SQL=sql).selector == MessageSelector(sql, "SQL92")
    assert "not both" in fails("sql", sql=sql, tags="paid")


@pytest.mark.parametrize(
    "expression,position",
    [("region = = 'eu'", 9), ("amount > 100 AND", 16), ("region != 'eu'", 7), ("a BETWEEN 5 AND 1", 10)],
)
def test_a_bad_sql92_expression_fails_naming_the_position_of_its_fault(expression, position):
    message = fails("sql", sql=expression)
    assert f"at position {position}:" in message and "[HERE]" in message


def test_sink_options():
    sink = parse_sink_options({"NameSrv": "h:1", "TOPIC": "out"})
    assert sink.topic == "out" and sink.idempotent
    assert parse_sink_options({"namesrv": "h:1"}).topic is None
    with pytest.raises(OptionError, match="topic"):
        parse_sink_options({"namesrv": "h:1", "topic": "bad topic"})
    with pytest.raises(OptionError, match="idempotent"):
        parse_sink_options({"namesrv": "h:1", "idempotent": "maybe"})
