"""failOnDataLoss against data that is really gone: commit log retention on a broker with tiny segments and
a short retention, and a topic deleted and recreated under a streaming query's checkpoint."""

from __future__ import annotations

import json
import os

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException, StreamingQueryException

from pocketmq.client.admin import Admin
from pocketmq.client.config import ClientConfig
from pocketmq.common.message import Message, MessageQueue
from pocketmq.spark.clients import client_for
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BODY_BYTES = 1024
RETENTION_ARGS = [
    "--set",
    "commit_log_segment_bytes=65536",  # about 60 messages of 1 KiB per segment
    "--set",
    "file_reserved_hours=0.0002",  # 0.72 s
    "--set",
    "cleanup_interval_ms=200",
]


@pytest.fixture
def short_retention_broker(tmp_path):
    broker = broker_process(tmp_path / "r", "broker-r", extra_args=RETENTION_ARGS).start()
    admin = Admin(ClientConfig(namesrv_addr=broker.namesrv)).start()
    try:
        yield broker, admin
    finally:
        admin.shutdown()
        broker.stop()


def send(namesrv: str, topic: str, first: int, count: int) -> None:
    client = client_for(namesrv)
    queue = client.write_queues(topic)[0]
    messages = [Message(topic, f"m{n}:".encode().ljust(BODY_BYTES, b".")) for n in range(first, first + count)]
    for i in range(0, count, 50):
        client.producer.send_batch(messages[i : i + 50], queue=MessageQueue(queue.topic, queue.broker, 0))


def load(spark, namesrv: str, topic: str, **options):
    reader = spark.read.format("pocketmq").option("namesrv", namesrv).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_retention_removed_offsets_fail_or_are_skipped(spark, short_retention_broker):
    broker, admin = short_retention_broker
    topic = f"retained-{os.getpid()}"
    admin.create_topic(topic, queues=1)
    wait_until(lambda: client_for(broker.namesrv).queues(topic), timeout_s=15, message="route of the topic")
    send(broker.namesrv, topic, 0, 300)  # ~5 segments: retention deletes all but the active one
    queue = client_for(broker.namesrv).queues(topic)[0]
    bounds = lambda: client_for(broker.namesrv).bounds([queue])[queue]  # noqa: E731
    wait_until(lambda: bounds().min_offset > 0, timeout_s=30, message="retention removed the oldest messages")
    removed_at_least = bounds().min_offset
    from_zero = json.dumps({topic: {queue.key: 0}})

    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        load(spark, broker.namesrv, topic, startingOffsets=from_zero).collect()
    message = str(info.value)
    assert "failOnDataLoss=true" in message and f"{topic}@broker-r:0" in message
    assert "were removed (retention)" in message and "failOnDataLoss=false" in message

    rows = (
        load(spark, broker.namesrv, topic, startingOffsets=from_zero, failOnDataLoss="false")
        .select("queue_offset", "body")
        .collect()
    )
    offsets = sorted(r.queue_offset for r in rows)
    # Skipped ahead to what is retained (retention may have moved on while the query ran), read the rest.
    assert removed_at_least <= offsets[0] <= bounds().min_offset
    assert offsets == list(range(offsets[0], 300))
    assert all(bytes(r.body).startswith(f"m{r.queue_offset}:".encode()) for r in rows)


def test_a_recreated_topic_under_a_stream_fails_or_restarts_from_its_start(spark, cluster, tmp_path):
    topic = cluster.new_topic("recreated")
    cluster.produce(topic, 40)  # 10 per queue
    checkpoint = str(tmp_path / "checkpoint")
    seen: list[tuple] = []

    def run(fail_on_data_loss: str):
        query = (
            spark.readStream.format("pocketmq")
            .option("namesrv", cluster.namesrv)
            .option("topic", topic)
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", fail_on_data_loss)
            .load()
            .writeStream.foreachBatch(lambda df, _: seen.extend(df.select("queue_offset", "body").collect()))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        return query.awaitTermination(60)

    assert run("true") and len(seen) == 40
    cluster.admin.delete_topic(topic)
    wait_until(lambda: topic not in client_for(cluster.namesrv).topic_names(), timeout_s=15, message="deleted")
    cluster.admin.create_topic(topic, queues=2)
    wait_until(lambda: len(client_for(cluster.namesrv).queues(topic)) == 4, timeout_s=15, message="recreated")
    sent = cluster.produce(topic, 8)  # 2 per queue: every queue is now below the checkpoint's 10

    with pytest.raises(StreamingQueryException) as info:
        run("true")
    assert "failOnDataLoss=true" in str(info.value) and "deleted and recreated" in str(info.value)

    seen.clear()
    assert run("false")
    # The reset queues are positioned at their new start by one batch, then read from there.
    assert sorted(bytes(r.body) for r in seen) == sorted(sent)
