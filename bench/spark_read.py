"""Rows/s read by ``spark.read.format("pocketmq")`` on local[2] into a noop sink; prints one JSON line.

Starts a broker (embedded name server) in a temp dir, loads N messages of SIZE bytes into a 4-queue topic,
then times warm batch reads (the best of ``--runs`` after one warm-up read, so session and worker start-up
are excluded). Besides wall time it reports the CPU seconds the broker and Spark (JVM and Python workers;
the bench process, the broker's parent, is Spark's driver) spent in the timed read: on a shared 2-core
machine those say where the time goes.

    python bench/spark_read.py [--messages 1000000] [--size 1024] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from pocketmq.client.admin import Admin
from pocketmq.client.config import ClientConfig
from pocketmq.common.message import Message, MessageQueue
from pocketmq.spark.clients import client_for
from pocketmq.testing.processes import broker_process

TOPIC = "bench"


def load(namesrv: str, topic: str, messages: int, size: int) -> None:
    config = ClientConfig(namesrv_addr=namesrv)
    with Admin(config) as admin:
        admin.create_topic(topic, queues=4)
    client = client_for(namesrv)
    queues = [MessageQueue(q.topic, q.broker, q.queue_id) for q in client.write_queues(topic)]
    body = os.urandom(size)
    per_batch = max(1, min(256, (1 << 20) // (size + 64)))
    for start in range(0, messages, per_batch):
        count = min(per_batch, messages - start)
        client.producer.send_batch(
            [Message(topic, body) for _ in range(count)], queue=queues[(start // per_batch) % len(queues)]
        )


def tree_cpu_s(root_pid: int) -> float:
    """User + system CPU seconds of ``root_pid`` and its living descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0.0, [root_pid]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += (int(stats[pid][11]) + int(stats[pid][12])) / os.sysconf("SC_CLK_TCK")
        todo.extend(children.get(pid, []))
    return total


def bench_parser(doc: str) -> argparse.ArgumentParser:
    """The options the Spark benches share; Spark's Python workers run this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    return parser


def spark_session(master: str = "local[2]", conf: dict[str, str] | None = None):
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .config(map=conf or {})
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )


def read_topic(spark, namesrv: str) -> None:
    """The timed read: every message of TOPIC, four tasks, into Spark's ``noop`` sink."""
    (
        spark.read.format("pocketmq")
        .option("namesrv", namesrv)
        .option("topic", TOPIC)
        .option("minPartitions", "4")
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="pmq-bench-") as tmp:
        broker = broker_process(Path(tmp), "broker-a").start()
        try:
            load_started = time.perf_counter()
            load(broker.namesrv, TOPIC, args.messages, args.size)
            load_s = time.perf_counter() - load_started
            spark = spark_session()
            spark.sparkContext.setLogLevel("ERROR")
            runs = []
            for run in range(args.runs + 1):
                broker_cpu, all_cpu = tree_cpu_s(broker.proc.pid), tree_cpu_s(os.getpid())
                started = time.perf_counter()
                read_topic(spark, broker.namesrv)
                if run:  # the first read warms the Python workers and their clients
                    read_s = time.perf_counter() - started
                    broker_cpu = tree_cpu_s(broker.proc.pid) - broker_cpu
                    runs.append(
                        {
                            "read_s": read_s,
                            "broker_cpu_s": broker_cpu,
                            "spark_cpu_s": tree_cpu_s(os.getpid()) - all_cpu - broker_cpu,
                        }
                    )
            spark.stop()
        finally:
            broker.stop()
    best = min(runs, key=lambda r: r["read_s"])
    print(
        json.dumps(
            {
                "bench": "spark_read",
                "messages": args.messages,
                "size": args.size,
                "cores": os.cpu_count(),
                "load_s": round(load_s, 2),
                "read_s": round(best["read_s"], 2),
                "rows_per_s": round(args.messages / best["read_s"]),
                "broker_cpu_s": round(best["broker_cpu_s"], 2),
                "spark_cpu_s": round(best["spark_cpu_s"], 2),
                "load_avg_1m": os.getloadavg()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
