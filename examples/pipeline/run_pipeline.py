"""The whole example pipeline, end to end (``make pipeline``):

1. start a PocketMQ broker (embedded name server) in a temporary directory, create the topics;
2. a producer sends the first half of the order events to ``orders``;
3. the Spark job (aggregate_job.py) aggregates what is there and stops (on ``local[2]``, or with ``--cluster
   standalone`` on a Spark standalone cluster of a master and two workers it starts on 127.0.0.1, or with
   ``--master URL`` on an existing cluster that shares this machine's file system);
4. the producer sends the second half; the job is started again and resumes from its checkpoints;
5. a consumer reads ``order-totals`` (and the Parquet output), prints the totals and checks them against
   the totals recomputed from the generated orders: every closed window exactly once, in both outputs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
from orders import EPOCH_MS, EVENT_STEP_MS, WINDOW_MS, encode, expected_totals, order

from pocketmq.client.admin import Admin
from pocketmq.client.config import ClientConfig
from pocketmq.client.producer import Producer
from pocketmq.client.pull_consumer import PullConsumer
from pocketmq.common.message import Message
from pocketmq.testing.processes import broker_process
from pocketmq.testing.spark_standalone import EXECUTOR_CONF, StandaloneCluster

HERE = Path(__file__).resolve().parent
WATERMARK_DELAY_MS = 10_000


def produce(namesrv: str, topic: str, first: int, count: int) -> None:
    with Producer(ClientConfig(namesrv_addr=namesrv)) as producer:
        batch = []
        for n in range(first, first + count):
            event = order(n)
            batch.append(Message.create(topic, encode(event), tags="order", keys=str(n)))
            if len(batch) == 200:
                producer.send_batch(batch)
                batch = []
        if batch:
            producer.send_batch(batch)
    print(f"produced orders {first}..{first + count - 1} to {topic}")


def run_job(namesrv: str, work_dir: Path, spark_args: list[str]) -> None:
    subprocess.run(
        [
            sys.executable,
            str(HERE / "aggregate_job.py"),
            "--namesrv",
            namesrv,
            "--work-dir",
            str(work_dir),
            *spark_args,
        ],
        check=True,
        cwd=HERE,
    )


def consume_totals(namesrv: str, topic: str) -> list[dict]:
    results = []
    with PullConsumer("pipeline-checker", ClientConfig(namesrv_addr=namesrv)) as consumer:
        for queue in consumer.fetch_queues(topic):
            offset, end = consumer.min_offset(queue), consumer.max_offset(queue)
            while offset < end:
                pulled = consumer.pull(queue, offset, 256)
                results += [json.loads(m.body) for m in pulled.messages]
                offset = pulled.next_begin_offset
    return results


def check(name: str, rows: list[dict], expected: dict) -> bool:
    got = {}
    duplicates = 0
    for row in rows:
        key = (row["customer"], row["window_start_ms"])
        duplicates += key in got
        got[key] = (row["total_cents"], row["orders"])
    ok = duplicates == 0 and got == expected
    print(
        f"{name}: {len(rows)} window totals, {duplicates} duplicates, "
        f"{'MATCH' if ok else 'MISMATCH'} against {len(expected)} expected"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=4000, help="orders in all (half before the restart)")
    parser.add_argument("--master", help="run the job on this Spark master (default local[2])")
    parser.add_argument("--cluster", choices=["standalone"], help="start a Spark standalone cluster for the job")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pocketmq-pipeline-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        spark_args = ["--master", args.master] if args.master else []
        if args.cluster == "standalone":
            spark = stack.enter_context(StandaloneCluster(work / "spark").start())
            print(f"Spark standalone cluster at {spark.master_url} with {spark.worker_count} workers")
            spark_args = ["--master", spark.master_url]
        if spark_args:
            spark_args += [f"--conf={key}={value}" for key, value in EXECUTOR_CONF.items()]
        broker = broker_process(work / "broker", "broker-a").start()
        try:
            namesrv = broker.namesrv
            with Admin(ClientConfig(namesrv_addr=namesrv)) as admin:
                admin.create_topic("orders", queues=4)
                admin.create_topic("order-totals", queues=2)
            half = args.orders // 2
            produce(namesrv, "orders", 0, half)
            run_job(namesrv, work / "job", spark_args)
            print("job stopped halfway; producing the rest and starting it again")
            produce(namesrv, "orders", half, args.orders - half)
            run_job(namesrv, work / "job", spark_args)

            last_event_ms = EPOCH_MS + (args.orders - 1) * EVENT_STEP_MS
            expected = expected_totals(args.orders, last_event_ms - WATERMARK_DELAY_MS)
            topic_rows = consume_totals(namesrv, "order-totals")
            for row in sorted(topic_rows, key=lambda r: (r["window_start_ms"], r["customer"]))[:8]:
                window_s = (row["window_start_ms"] - EPOCH_MS) // 1000
                print(
                    f"  window +{window_s:>4}s..+{window_s + WINDOW_MS // 1000}s  {row['customer']:>3}  "
                    f"{row['orders']:>3} orders  {row['total_cents'] / 100:>9.2f}"
                )
            parquet_rows = pq.read_table(work / "job" / "totals-parquet").to_pylist()
            ok = check("topic order-totals", topic_rows, expected) & check("parquet", parquet_rows, expected)
        finally:
            broker.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
