"""The pocketmq sink: batch and streaming writes, and no duplicates when Spark retries or replays."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def read_topic(spark, cluster, topic):
    return (
        spark.read.format("pocketmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", topic)
        .option("includeProperties", "true")
        .load()
    )


def test_batch_write_of_every_column(spark, cluster):
    topic = cluster.new_topic("write")
    rows = [
        (f"order-{i}", "created" if i % 3 else "paid", [f"o{i}", "shop"], f"customer-{i % 5}", {"n": str(i)})
        for i in range(300)
    ]
    df = spark.createDataFrame(
        rows, "body string, tags string, keys array<string>, message_group string, properties map<string,string>"
    )
    df.write.format("pocketmq").option("namesrv", cluster.namesrv).option("topic", topic).mode("append").save()
    back = read_topic(spark, cluster, topic).collect()
    assert sorted((bytes(r.body).decode(), r.tags, r.keys, r.properties["n"]) for r in back) == sorted(
        (body, tags, " ".join(keys), props["n"]) for body, tags, keys, _, props in rows
    )
    # A message group keeps to one queue, as for any RocketMQ producer.
    queues_of_group = {}
    for r in back:
        queues_of_group.setdefault(int(r.properties["n"]) % 5, set()).add((r.broker, r.queue_id))
    assert all(len(queues) == 1 for queues in queues_of_group.values())


def test_a_retried_write_task_leaves_no_duplicates(spark, cluster):
    ROWS, FAIL_AT_ROW = 25_000, 24_000
    topic = cluster.new_topic("retry")

    @F.udf(StringType(), useArrow=False)
    def body_failing_once(n):
        from pyspark import TaskContext

        if n == FAIL_AT_ROW and TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("injected task failure after the sink sent part of the partition")
        return f"row-{n}"

    # The sink gets Arrow batches of 10,000 rows and sends every 4,096: by row 24,000 it has sent ~20,000.
    df = spark.range(ROWS, numPartitions=1).select(body_failing_once("id").alias("body"))
    df.write.format("pocketmq").option("namesrv", cluster.namesrv).option("topic", topic).mode("append").save()
    bodies = [bytes(r.body) for r in read_topic(spark, cluster, topic).select("body").collect()]
    assert len(bodies) == ROWS and len(set(bodies)) == ROWS


def test_a_replayed_streaming_write_leaves_no_duplicates(spark, cluster, tmp_path):
    source, target = cluster.new_topic("sink-src"), cluster.new_topic("sink-dst")
    sent = cluster.produce(source, 600)
    checkpoint = tmp_path / "checkpoint"

    def run():
        query = (
            spark.readStream.format("pocketmq")
            .option("namesrv", cluster.namesrv)
            .option("topic", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "200")
            .load()
            .select(F.upper(F.col("body").cast("string")).alias("body"), "keys", "tags")
            .writeStream.format("pocketmq")
            .option("namesrv", cluster.namesrv)
            .option("topic", target)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(60)
        return query

    run()
    assert read_topic(spark, cluster, target).count() == 600
    # Forget that the last batch was committed: Spark runs it again from the same offsets (as after a crash
    # between the sink's write and the commit log), and the sink re-sends the same idempotency keys.
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for path in (checkpoint / "commits" / str(last), checkpoint / "commits" / f".{last}.crc"):
        Path(path).unlink(missing_ok=True)
    replay = run()
    assert [p["batchId"] for p in replay.recentProgress if p["numInputRows"]] == [last]
    bodies = [bytes(r.body) for r in read_topic(spark, cluster, target).select("body").collect()]
    assert sorted(bodies) == sorted(b.upper() for b in sent)
