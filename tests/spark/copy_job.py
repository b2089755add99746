"""A streaming copy of one topic into another through the pocketmq source and sink: the driver that
test_spark_standalone.py runs as its own process, on a Spark standalone cluster, and kills.

Every row passes a UDF that notes the executor JVM it runs in (a file per executor under ``--marks``) and, for
the messages ``msg-<n>`` named by ``--hold``, holds the first task that reaches one until the test has killed its
executor (or this driver, whose application's executors the workers then kill): the test sees the hold as a
file ``held-<n>`` naming the executor, so it kills in the middle of a batch, never by timing.

    python copy_job.py --master spark://... --namesrv ... --source a --target b --checkpoint DIR --marks DIR
        [--hold N ...] [--available-now | --batch]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pocketmq.testing.spark_standalone import EXECUTOR_CONF

MAX_OFFSETS_PER_TRIGGER = 24_000
# The sink sends every 4,096 rows: Arrow batches of 1,000 rows (instead of 10,000) feed it before a hold.
ARROW_BATCH_ROWS = 1000


def passing_udf(marks: str, hold: list[int]):
    @F.udf("string", useArrow=False)
    def passing(body: str) -> str:
        from pocketmq.testing.polling import wait_until
        from pocketmq.testing.spark_standalone import executor_jvm_pid, is_running

        executor = executor_jvm_pid()
        seen = Path(marks) / f"executor-{executor}"
        if not seen.exists():
            seen.touch()
        n = int(body.split("-")[1])
        held = Path(marks) / f"held-{n}"
        if n in hold and not held.exists():
            written = held.with_suffix(".tmp")
            written.write_text(json.dumps({"executor_pid": executor, "python_pid": os.getpid()}))
            written.rename(held)
            wait_until(lambda: not is_running(executor), timeout_s=600, message="this executor killed")
        return body

    return passing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("--master", "--namesrv", "--source", "--target", "--checkpoint", "--marks"):
        parser.add_argument(name, required=True)
    parser.add_argument("--hold", type=int, action="append", default=[])
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--batch", action="store_true", help="a batch read and write instead of a stream")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(args.master)
        .config(map=EXECUTOR_CONF)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    passing = passing_udf(args.marks, args.hold)
    if args.batch:
        # One batch job, no streaming query: nothing waits on a Python process the driver starts for a stream.
        rows = read_options(spark.read, args).load().select(passing(F.col("body").cast("string")).alias("body"))
        rows.write.format("pocketmq").mode("append").option("namesrv", args.namesrv).option("topic", args.target).save()
    else:
        trigger = {"availableNow": True} if args.available_now else {"processingTime": "0 seconds"}
        query = (
            read_options(spark.readStream, args)
            .option("maxOffsetsPerTrigger", str(MAX_OFFSETS_PER_TRIGGER))
            .load()
            .select(passing(F.col("body").cast("string")).alias("body"))
            .writeStream.format("pocketmq")
            .option("namesrv", args.namesrv)
            .option("topic", args.target)
            .option("checkpointLocation", args.checkpoint)
            .trigger(**trigger)
            .start()
        )
        query.awaitTermination()
    spark.stop()


def read_options(reader, args: argparse.Namespace):
    return (
        reader.format("pocketmq")
        .option("namesrv", args.namesrv)
        .option("topic", args.source)
        .option("startingOffsets", "earliest")
    )


if __name__ == "__main__":
    main()
