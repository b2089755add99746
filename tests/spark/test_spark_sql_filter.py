"""The source's ``sql`` option: the brokers filter by an SQL92 expression over message properties, the stream's
offsets move over what they filtered out (no stall, nothing read twice), and a bad expression fails the query at
start with the position of its fault."""

from __future__ import annotations

import json

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from pocketmq.spark.clients import client_for
from pocketmq.spark.offsets import to_offset_json

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]  # the first Spark test starts the session

REGIONS = ("eu", "us", "apac")


def order_properties(n: int) -> dict[str, str]:
    return {"region": REGIONS[n % 3], "amount": str(n % 200)}


def test_a_batch_read_gets_only_the_matching_messages(spark, cluster):
    topic = cluster.new_topic("sql")
    cluster.produce(topic, 1200, properties=order_properties)
    rows = (
        spark.read.format("pocketmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", topic)
        .option("sql", "region = 'eu' AND amount > 100 AND TAGS = 'even'")
        .load()
        .select("body")
        .collect()
    )
    wanted = {f"msg-{n}" for n in range(1200) if n % 3 == 0 and n % 200 > 100 and n % 2 == 0}
    assert sorted(bytes(r.body).decode() for r in rows) == sorted(wanted) and len(wanted) == 98


def test_a_stream_moves_over_filtered_out_ranges_without_stalling_or_reading_twice(spark, cluster, tmp_path):
    topic = cluster.new_topic("sql-stream")
    # 2,500 per queue, the first 2,480 of each filtered out: more than one pull tests (2,000), so reads that find
    # nothing move on, and several micro-batches (at most 2,000 offsets each) read no row at all.
    sent = 10_000
    cluster.produce(topic, sent, properties=lambda n: {"late": "yes" if n >= 9_920 else "no"})
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run_until_caught_up():
        query = (
            spark.readStream.format("pocketmq")
            .option("namesrv", cluster.namesrv)
            .option("topic", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "2000")
            .option("sql", "late = 'yes' OR n < 8")
            .load()
            .select("body")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "AvailableNow ends once it reached the queues' ends"
        return query

    first = run_until_caught_up()
    batches = [p["numInputRows"] for p in first.recentProgress]
    # 8 early and 80 late rows; the first batch positions the queues, three read filtered-out offsets only.
    assert sum(batches) == 88 and batches.count(0) >= 4, batches
    queues = client_for(cluster.namesrv).queues(topic)
    end_offset = first.lastProgress["sources"][0]["endOffset"]
    reached = json.loads(end_offset) if isinstance(end_offset, str) else end_offset
    assert reached == to_offset_json(dict.fromkeys(queues, sent // len(queues)))  # at the queues' ends

    cluster.produce(topic, 400, start=sent, properties=lambda n: {"late": "yes" if n % 2 else "no"})
    second = run_until_caught_up()
    assert sum(p["numInputRows"] for p in second.recentProgress) == 200
    bodies = [r.body for r in spark.read.parquet(out).collect()]
    expected = {f"msg-{n}" for n in [*range(8), *range(9_920, sent), *range(sent + 1, sent + 400, 2)]}
    assert len(bodies) == len(expected) and {bytes(b).decode() for b in bodies} == expected


@pytest.mark.parametrize("streaming", [False, True])
def test_a_bad_expression_fails_the_query_at_start_with_the_position_of_its_fault(spark, cluster, streaming):
    topic = cluster.new_topic("sql-bad")
    reader = (spark.readStream if streaming else spark.read).format("pocketmq")
    reader = reader.option("namesrv", cluster.namesrv).option("topic", topic).option("sql", "region = = 'eu'")
    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        if streaming:
            # until the query ends, as it must with these options (the test's timeout bounds it): a fixed wait
            # can return before the error comes on a loaded machine
            reader.load().writeStream.format("noop").start().awaitTermination()
        else:
            reader.load().collect()
    message = str(info.value)
    assert "'sql'" in message and "at position 9: region = [HERE]= 'eu'" in message, message[:2000]
