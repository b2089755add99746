"""The pocketmq source on a real two-broker cluster: batch reads, options, failures at start (data loss:
test_spark_data_loss.py)."""

from __future__ import annotations

import json

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def read(spark, cluster, topic, **options):
    reader = spark.read.format("pocketmq").option("namesrv", cluster.namesrv).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_batch_read_of_10000_messages_over_4_queues_and_2_brokers(spark, cluster):
    topic = cluster.new_topic()
    sent = cluster.produce(topic, 10_000)
    df = read(spark, cluster, topic)
    assert df.schema.names == [
        "topic",
        "broker",
        "queue_id",
        "queue_offset",
        "message_id",
        "keys",
        "tags",
        "body",
        "born_timestamp",
        "store_timestamp",
        "reconsume_times",
        "properties",
    ]
    rows = df.select("broker", "queue_id", "queue_offset", "body", "tags", "keys", "properties").collect()
    assert len(rows) == 10_000
    assert sorted(bytes(r.body) for r in rows) == sorted(sent)
    assert len({(r.broker, r.queue_id, r.queue_offset) for r in rows}) == 10_000
    assert {r.broker for r in rows} == {"broker-a", "broker-b"} and {r.queue_id for r in rows} == {0, 1}
    by_body = {bytes(r.body): r for r in rows}
    assert by_body[b"msg-7"].tags == "odd" and by_body[b"msg-7"].keys == "k7"
    assert by_body[b"msg-7"].properties is None  # only with includeProperties


def test_batch_read_options_tags_properties_and_offset_json(spark, cluster):
    topic = cluster.new_topic()
    cluster.produce(topic, 400)  # 100 per queue
    even = read(spark, cluster, topic, tags="even", includeProperties="true").collect()
    assert len(even) == 200 and {r.tags for r in even} == {"even"}
    assert all(r.properties == {"n": bytes(r.body).decode()[4:]} for r in even)

    starting = json.dumps({topic: {"broker-a:0": 90}})  # other queues: earliest
    ending = json.dumps({topic: {"broker-a:0": 95, "broker-b:1": 10}})  # other queues: latest
    rows = read(spark, cluster, topic, startingOffsets=starting, endingOffsets=ending).collect()
    per_queue = {}
    for r in rows:
        per_queue.setdefault((r.broker, r.queue_id), []).append(r.queue_offset)
    assert sorted(per_queue[("broker-a", 0)]) == list(range(90, 95))
    assert sorted(per_queue[("broker-b", 1)]) == list(range(10))
    assert len(per_queue[("broker-a", 1)]) == len(per_queue[("broker-b", 0)]) == 100

    both = (
        spark.read.format("pocketmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", topic)
        .option("startingTimestamp", "0")
        .load()
        .count()
    )
    assert both == 400


def test_several_topics_and_a_topic_pattern(spark, cluster):
    first, second = cluster.new_topic("multi"), cluster.new_topic("multi")
    cluster.produce(first, 40)
    cluster.produce(second, 60)
    listed = read(spark, cluster, f"{first},{second}").groupBy("topic").count().collect()
    assert {r.topic: r["count"] for r in listed} == {first: 40, second: 60}
    pattern = (
        spark.read.format("pocketmq")
        .option("namesrv", cluster.namesrv)
        .option("topicPattern", f"{first}|{second}")
        .load()
    )
    assert pattern.count() == 100


@pytest.mark.parametrize(
    "options, words",
    [
        ({"topic": "no-such-topic-x"}, ["'topic'", "no-such-topic-x", "do not exist"]),
        ({"startingOffsets": "{not json"}, ["'startingOffsets'", "neither earliest, latest nor valid JSON"]),
        ({"endingOffsets": '{"TOPIC": 5}'}, ["'endingOffsets'", "must be an object"]),
        (
            {"startingOffsets": '{"TOPIC": {"broker-z:0": 1}}'},
            ["'startingOffsets'", "broker-z:0", "names queue(s) the topics do not have"],
        ),
        ({"topicPattern": "x.*"}, ["'topicPattern'", "not both"]),
        ({"topics": "TOPIC"}, ["'topics'", "not both"]),
        ({"maxOffsetsPerTriger": "10"}, ["unknown option", "maxOffsetsPerTrigger"]),
    ],
)
def test_bad_options_fail_at_start_naming_the_option(spark, cluster, options, words):
    topic = cluster.new_topic("bad")
    reader = spark.read.format("pocketmq").option("namesrv", cluster.namesrv).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value.replace("TOPIC", topic))
    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        reader.load().collect()
    assert all(word in str(info.value) for word in words), str(info.value)[:2000]


@pytest.mark.parametrize(
    "options, words",
    [
        ({"topic": "no-such-topic-y"}, ["'topic'", "no-such-topic-y", "do not exist"]),
        ({"topic": "a", "startingOffsets": "[1, 2]"}, ["'startingOffsets'", "must be a JSON object"]),
        ({"topic": "a", "topicPattern": "a.*"}, ["'topicPattern'", "not both"]),
    ],
)
def test_bad_stream_options_fail_the_query_at_start(spark, cluster, options, words):
    reader = spark.readStream.format("pocketmq").option("namesrv", cluster.namesrv)
    for name, value in options.items():
        reader = reader.option(name, value)
    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        # until the query ends, as it must with these options (the test's timeout bounds it): a fixed wait
        # can return before the error comes on a loaded machine
        reader.load().writeStream.format("noop").start().awaitTermination()
    assert all(word in str(info.value) for word in words), str(info.value)[:2000]
