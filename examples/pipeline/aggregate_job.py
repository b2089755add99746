"""The Spark Structured Streaming job: order events in, per-customer totals per 10-second window out.

Reads the ``orders`` topic with ``spark.readStream.format("pocketmq")``, parses the JSON bodies, sums
amounts per customer in event-time windows (closed by a 10 s watermark), and writes each closed window
once to the ``order-totals`` topic (``writeStream.format("pocketmq")``, exactly once) and to Parquet.
Both queries keep their progress in their own checkpoint, so the job can be stopped and started again.

    python aggregate_job.py --namesrv 127.0.0.1:9876 --work-dir /tmp/pipeline \
        [--master spark://HOST:7077 --conf spark.executor.memory=512m ...]

On a cluster (``--master spark://...``) executors read and write: they must reach the name server and every
broker, and ``--work-dir`` (checkpoints, Parquet) must be a path every executor and the driver share.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER_SCHEMA = "order_id long, customer string, amount_cents long, event_time_ms long"


def build_totals(spark, namesrv: str, topic: str):
    orders = (
        spark.readStream.format("pocketmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "2000")
        .load()
        .select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o"))
        .select("o.*")
        .withColumn("event_time", F.timestamp_millis("event_time_ms"))
    )
    return (
        orders.withWatermark("event_time", "10 seconds")
        .groupBy(F.window("event_time", "10 seconds"), "customer")
        .agg(F.sum("amount_cents").alias("total_cents"), F.count("*").alias("orders"))
        .select("customer", F.unix_millis(F.col("window.start")).alias("window_start_ms"), "total_cents", "orders")
    )


def run(namesrv: str, work_dir: str, source: str, target: str, master: str, conf: dict[str, str]) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master)
        .config(map=conf)
        .appName("pocketmq-pipeline")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    totals = build_totals(spark, namesrv, source)
    to_topic = (
        totals.select(F.to_json(F.struct("*")).alias("body"), F.col("customer").alias("keys"))
        .writeStream.format("pocketmq")
        .option("namesrv", namesrv)
        .option("topic", target)
        .option("checkpointLocation", f"{work_dir}/checkpoint-topic")
    )
    to_parquet = (
        totals.writeStream.format("parquet")
        .option("path", f"{work_dir}/totals-parquet")
        .option("checkpointLocation", f"{work_dir}/checkpoint-parquet")
    )
    # One query after the other: each starts a Python process on the driver for its source, and Spark gives such a
    # process 10 s to connect back, which two starting at once on a small, busy machine may miss.
    for writer in (to_topic, to_parquet):
        query = writer.outputMode("append").trigger(availableNow=True).start()
        query.awaitTermination()
        print(f"query {query.name or query.id}: {sum(p['numInputRows'] for p in query.recentProgress)} orders read")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--source", default="orders")
    parser.add_argument("--target", default="order-totals")
    parser.add_argument("--master", default="local[2]", help="Spark master URL")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark configuration")
    args = parser.parse_args()
    conf = dict(item.split("=", 1) for item in args.conf)
    run(args.namesrv, args.work_dir, args.source, args.target, args.master, conf)


if __name__ == "__main__":
    main()
