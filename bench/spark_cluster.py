"""Read and write rows/s with two executors of a Spark standalone cluster against local[2], in the same run;
prints one JSON line per master.

Starts a broker (embedded name server) and a standalone cluster (a master and two workers of one core and 512 MB
each, pocketmq.testing.spark_standalone) on 127.0.0.1, loads N messages of SIZE bytes into a 4-queue topic and
writes the sink's input rows (SIZE-byte string body and a key) to Parquet. Then for each master: a warm-up read
and write, a timed ``spark.read`` of the topic into the ``noop`` sink (``minPartitions=4``), and a timed
``Trigger.AvailableNow`` streaming write of the N rows through the pocketmq sink (idempotent) into a fresh topic,
checked to hold exactly N messages. CPU seconds are the broker's and Spark's (driver JVM and Python workers, the
workers and their executors).

    python bench/spark_cluster.py [--messages 100000] [--size 1024]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from spark_read import TOPIC, bench_parser, load, read_topic, spark_session, tree_cpu_s
from spark_write import write_stream

from pocketmq.client.admin import Admin
from pocketmq.client.config import ClientConfig
from pocketmq.spark.clients import client_for
from pocketmq.testing.processes import broker_process
from pocketmq.testing.spark_standalone import EXECUTOR_CONF, StandaloneCluster


def timed(work, broker_pid: int, spark_pids: list[int]) -> dict:
    """Wall and CPU seconds of ``work()``; the bench process (Spark's driver) is the broker's parent."""
    broker_cpu, all_cpu = tree_cpu_s(broker_pid), sum(tree_cpu_s(pid) for pid in spark_pids)
    started = time.perf_counter()
    work()
    elapsed_s = time.perf_counter() - started
    broker_cpu = tree_cpu_s(broker_pid) - broker_cpu
    spark_cpu = sum(tree_cpu_s(pid) for pid in spark_pids) - all_cpu - broker_cpu
    return {"s": round(elapsed_s, 2), "broker_cpu_s": round(broker_cpu, 2), "spark_cpu_s": round(spark_cpu, 2)}


def write_input(spark, path: str, rows: int, size: int) -> None:
    """``rows`` sink input rows (a ``size``-byte string body and a key) as Parquet, once."""
    if Path(path).exists():
        return
    padding = max(0, size - 12)
    (
        spark.range(rows)
        .selectExpr(
            f"concat(lpad(cast(id as string), 12, '0'), repeat('x', {padding})) as body", "cast(id as string) as keys"
        )
        .repartition(2)
        .write.parquet(path)
    )


def bench_master(
    spark, name: str, tmp: str, namesrv: str, pids: tuple[int, list[int]], messages: int, size: int
) -> dict:
    """The timed read and write on one master; ``pids``: the broker's, and the roots of Spark's processes."""
    broker_pid, spark_pids = pids
    for kind, rows in (("warm", 2_000), ("sink", messages)):
        write_input(spark, f"{tmp}/{kind}-input", rows, size)
    schema = spark.read.parquet(f"{tmp}/warm-input").schema

    def write(kind: str) -> None:
        checkpoint = f"{tmp}/{kind}-{name}-checkpoint"
        write_stream(spark, f"{tmp}/{kind}-input", checkpoint, namesrv, f"{kind}-{name}", schema)

    read_topic(spark, namesrv)  # warms the executors' Python workers and their clients
    write("warm")
    return {
        "read": timed(lambda: read_topic(spark, namesrv), broker_pid, spark_pids),
        "write": timed(lambda: write("sink"), broker_pid, spark_pids),
    }


def main() -> None:
    parser = bench_parser(__doc__)
    parser.set_defaults(messages=100_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="pmq-bench-") as tmp:
        broker = broker_process(Path(tmp) / "broker", "broker-a").start()
        try:
            namesrv = broker.namesrv
            load(namesrv, TOPIC, args.messages, args.size)
            with Admin(ClientConfig(namesrv_addr=namesrv)) as admin:
                for topic in ("warm-local", "sink-local", "warm-standalone", "sink-standalone"):
                    admin.create_topic(topic, queues=4)
            with StandaloneCluster(Path(tmp) / "spark").start() as cluster:
                pids = (broker.proc.pid, [os.getpid(), *(worker.proc.pid for worker in cluster.workers)])
                masters = {"local": ("local[2]", {}), "standalone": (cluster.master_url, EXECUTOR_CONF)}
                for name, (master, conf) in masters.items():
                    spark = spark_session(master, conf)
                    spark.sparkContext.setLogLevel("ERROR")
                    runs = bench_master(spark, name, tmp, namesrv, pids, args.messages, args.size)
                    spark.stop()
                    client = client_for(namesrv)
                    bounds = client.bounds(client.queues(f"sink-{name}")).values()
                    stored = sum(b.max_offset - b.min_offset for b in bounds)
                    print(
                        json.dumps(
                            {
                                "bench": "spark_cluster",
                                "master": name,
                                "messages": args.messages,
                                "size": args.size,
                                "cores": os.cpu_count(),
                                "read_rows_per_s": round(args.messages / runs["read"]["s"]),
                                "read": runs["read"],
                                "write_rows_per_s": round(args.messages / runs["write"]["s"]),
                                "write": runs["write"],
                                "stored": stored,
                                "load_avg_1m": os.getloadavg()[0],
                            }
                        ),
                        flush=True,
                    )
                    if stored != args.messages:
                        sys.exit(f"sink-{name} holds {stored} messages, not {args.messages}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
