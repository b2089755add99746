"""Rows/s read by ``spark.read.format("pocketmq")`` on local[2] into a noop sink; prints one JSON line.

Starts a broker (embedded name server) in a temp dir, loads N messages of SIZE bytes into a 4-queue topic,
then times a warm batch read (the second of two, so session and worker start-up are excluded).

    python bench/spark_read.py [--messages 1000000] [--size 1024]
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
        client.producer.send_batch([Message(topic, body) for _ in range(count)],
                                   queue=queues[(start // per_batch) % len(queues)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory(prefix="pmq-bench-") as tmp:
        broker = broker_process(Path(tmp), "broker-a").start()
        try:
            load_started = time.perf_counter()
            load(broker.namesrv, "bench", args.messages, args.size)
            load_s = time.perf_counter() - load_started
            spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                     .config("spark.ui.showConsoleProgress", "false")
                     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            timings = []
            for _ in range(2):
                started = time.perf_counter()
                (spark.read.format("pocketmq").option("namesrv", broker.namesrv).option("topic", "bench")
                 .option("minPartitions", "4").load().write.format("noop").mode("overwrite").save())
                timings.append(time.perf_counter() - started)
            spark.stop()
        finally:
            broker.stop()
    print(json.dumps({"bench": "spark_read", "messages": args.messages, "size": args.size, "cores": os.cpu_count(),
                      "load_s": round(load_s, 2), "read_s": round(timings[-1], 2),
                      "rows_per_s": round(args.messages / timings[-1])}))


if __name__ == "__main__":
    main()
