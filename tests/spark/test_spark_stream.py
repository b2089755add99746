"""Streaming reads: bounded micro-batches, exactly once across a restart, AvailableNow, replayed batches."""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import Row

from pocketmq.client.config import ClientConfig
from pocketmq.client.pull_consumer import PullConsumer
from pocketmq.testing.polling import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]

COLUMNS = ("broker", "queue_id", "queue_offset", "body")


def stream(spark, cluster, topic, **options):
    reader = spark.readStream.format("pocketmq").option("namesrv", cluster.namesrv).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().select(*COLUMNS)


def input_rows(*queries) -> list[int]:
    return [p["numInputRows"] for q in queries for p in q.recentProgress]


def assert_exactly(rows, sent: list[bytes]) -> None:
    """Every sent message once: no duplicate, and per queue a gap-free run of offsets from 0."""
    assert sorted(bytes(r.body) for r in rows) == sorted(sent)
    per_queue: dict = {}
    for r in rows:
        per_queue.setdefault((r.broker, r.queue_id), []).append(r.queue_offset)
    for offsets in per_queue.values():
        assert sorted(offsets) == list(range(len(offsets)))


def test_stream_is_exactly_once_across_a_restart_in_bounded_batches(spark, cluster, tmp_path):
    topic = cluster.new_topic("stream")
    sent = cluster.produce(topic, 1000)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start(trigger: dict):
        return (
            stream(
                spark,
                cluster,
                topic,
                startingOffsets="earliest",
                maxOffsetsPerTrigger="300",
                commitToGroup="spark-lag-group",
            )
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start()
        )

    first = start({"processingTime": "0 seconds"})
    try:
        wait_until(lambda: sum(input_rows(first)) >= 600, timeout_s=60, message="600 rows streamed")
    finally:
        first.stop()
    read_before_stop = sum(input_rows(first))
    assert read_before_stop < 1500
    sent += cluster.produce(topic, 500, start=1000)

    second = start({"availableNow": True})
    assert second.awaitTermination(60), "AvailableNow ends by itself once it reached the offsets it started with"
    batches = input_rows(first, second)
    assert max(batches) <= 300 and sum(batches) == 1500
    assert_exactly(spark.read.parquet(out).collect(), sent)

    # commitToGroup mirrors the checkpoint's committed offsets (one batch behind) to a consumer group.
    with PullConsumer("spark-lag-group", ClientConfig(namesrv_addr=cluster.namesrv)) as consumer:
        committed = [consumer.committed(q) or 0 for q in cluster.queues(topic)]
    assert 0 < sum(committed) <= 1500


def test_a_crashed_batch_is_replayed_with_identical_rows(spark, cluster, tmp_path):
    topic = cluster.new_topic("replay")
    sent = cluster.produce(topic, 400)
    seen: dict[int, list] = {}

    def sink(df, batch_id):
        seen.setdefault(batch_id, []).append(sorted(tuple(r) for r in df.collect()))
        if batch_id == 2 and len(seen[batch_id]) == 1:
            raise RuntimeError("injected crash inside batch 2")

    def start():
        return (
            stream(spark, cluster, topic, startingOffsets="earliest", maxOffsetsPerTrigger="100")
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )

    with pytest.raises(StreamingQueryException, match="injected crash"):
        start().awaitTermination(60)
    sent += cluster.produce(topic, 100, start=400)  # the replay must not stretch to what is new now
    assert start().awaitTermination(60)
    first, replayed = seen[2]
    assert len(first) == 100 and replayed == first
    last_attempts = [row for batch in seen.values() for row in batch[-1]]
    assert_exactly([Row(**dict(zip(COLUMNS, row))) for row in last_attempts], sent)
