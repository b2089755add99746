"""Rows/s written by the streaming sink (``writeStream.format("pocketmq")``, idempotent, exactly once) on
local[2]; prints one JSON line.

Starts a broker (embedded name server) in a temp dir and writes N rows with a SIZE-byte string body (and a
key) from a Parquet directory through a ``Trigger.AvailableNow`` streaming query into a 4-queue topic. A
small query first warms the session and the Python workers; the timed query's wall time includes its start
and stop (about a second). Checks that the topic then holds exactly N messages, and reports the CPU seconds
of the broker and of Spark (JVM and Python workers) during the timed write.

    python bench/spark_write.py [--messages 200000] [--size 1024]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from spark_read import bench_parser, spark_session, tree_cpu_s  # bench/ is the script's directory, first on sys.path

from pocketmq.client.admin import Admin
from pocketmq.client.config import ClientConfig
from pocketmq.spark.clients import client_for
from pocketmq.testing.processes import broker_process


def write_stream(spark, source_dir: str, checkpoint: str, namesrv: str, topic: str, schema) -> None:
    query = (
        spark.readStream.schema(schema)
        .parquet(source_dir)
        .writeStream.format("pocketmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def main() -> None:
    args = bench_parser(__doc__).parse_args()

    with tempfile.TemporaryDirectory(prefix="pmq-bench-") as tmp:
        broker = broker_process(Path(tmp), "broker-a").start()
        try:
            with Admin(ClientConfig(namesrv_addr=broker.namesrv)) as admin:
                for topic in ("warm", "sink"):
                    admin.create_topic(topic, queues=4)
            spark = spark_session()
            spark.sparkContext.setLogLevel("ERROR")
            padding = max(0, args.size - 12)
            for name, rows in (("warm", 2_000), ("sink", args.messages)):
                (
                    spark.range(rows)
                    .selectExpr(
                        f"concat(lpad(cast(id as string), 12, '0'), repeat('x', {padding})) as body",
                        "cast(id as string) as keys",
                    )
                    .repartition(2)
                    .write.parquet(f"{tmp}/{name}-input")
                )
            schema = spark.read.parquet(f"{tmp}/warm-input").schema
            write_stream(spark, f"{tmp}/warm-input", f"{tmp}/warm-checkpoint", broker.namesrv, "warm", schema)

            broker_cpu, all_cpu = tree_cpu_s(broker.proc.pid), tree_cpu_s(os.getpid())
            started = time.perf_counter()
            write_stream(spark, f"{tmp}/sink-input", f"{tmp}/sink-checkpoint", broker.namesrv, "sink", schema)
            write_s = time.perf_counter() - started
            broker_cpu = tree_cpu_s(broker.proc.pid) - broker_cpu
            spark_cpu = tree_cpu_s(os.getpid()) - all_cpu - broker_cpu
            spark.stop()
            client = client_for(broker.namesrv)
            stored = sum(b.max_offset - b.min_offset for b in client.bounds(client.queues("sink")).values())
        finally:
            broker.stop()
    print(
        json.dumps(
            {
                "bench": "spark_write_stream",
                "messages": args.messages,
                "size": args.size,
                "cores": os.cpu_count(),
                "write_s": round(write_s, 2),
                "rows_per_s": round(args.messages / write_s),
                "stored": stored,
                "broker_cpu_s": round(broker_cpu, 2),
                "spark_cpu_s": round(spark_cpu, 2),
                "load_avg_1m": os.getloadavg()[0],
            }
        )
    )
    if stored != args.messages:
        sys.exit(f"the topic holds {stored} messages, not {args.messages}")


if __name__ == "__main__":
    main()
