"""SQL92 filter cost: pull throughput with an SQL92 subscription that half the messages match, against the same
pulls with no filter, in the same run (docs/filter.md; target: filtering costs at most 20%).

- ``sdk``: MESSAGES 1 KiB messages with RocketMQ-like properties (tags, keys, a region that alternates 'eu'
  and 'us', an amount) in a QUEUES-queue topic of a ``pocketmq serve`` (sent first, not timed). Each round an
  ``AsyncPullConsumer`` pulls every queue from offset 0 to its end, batches of 32, once with no filter and once
  with ``region = 'eu' AND amount >= 0`` (half match), in alternating order; ROUNDS rounds, the median of each.
  Reports queue offsets gone through per second (how fast a consumer moves through the queues, the throughput
  that filtering must not cut by more than 20%), messages delivered per second, and the broker CPU per run.
- ``store``: in process, the broker's read path alone: ``MessageStore.get_messages`` over the same kind of
  records with the compiled filter's record test against none (what the filter adds to the broker's CPU).

Prints one JSON line per case.

    python bench/sql_filter.py [--messages 40000] [--queues 4] [--rounds 3] [--cases sdk,store]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from pocketmq.broker.subscription_filters import SubscriptionFilters
from pocketmq.client import Admin, AsyncPullConsumer, ClientConfig, Message, MessageQueue, MessageSelector, Producer
from pocketmq.common.message import MessageExt
from pocketmq.store.api import StoreConfig
from pocketmq.store.message_store import MessageStore
from pocketmq.testing.processes import broker_process, process_cpu_s

BODY = b"x" * 1024
TOPIC = "bench_sql"
SQL = "region = 'eu' AND amount >= 0"
BATCH = 32


def properties(i: int) -> dict[str, str]:
    return {"region": "eu" if i % 2 == 0 else "us", "amount": str(i % 1000), "KEYS": f"order-{i}", "TAGS": "paid"}


async def _drain(consumer: AsyncPullConsumer, queues: list[MessageQueue], selector) -> tuple[int, int]:
    """Pull every queue from 0 to its end; (queue offsets gone through, messages delivered)."""
    scanned = delivered = 0
    for queue in queues:
        end = await consumer.max_offset(queue)
        offset = 0
        while offset < end:
            result = await consumer.pull(queue, offset, BATCH, tag_expression=selector)
            delivered += len(result.messages)
            scanned += result.next_begin_offset - offset
            offset = result.next_begin_offset
    return scanned, delivered


def bench_sdk(messages: int, queue_count: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc = broker_process(Path(tmp), "broker-bench-sql").start()
        try:
            config = ClientConfig(namesrv_addr=proc.namesrv)
            with Admin(config) as admin:
                admin.create_topic(TOPIC, queues=queue_count)
            with Producer(config) as producer:
                for start in range(0, messages, 100):
                    batch = [Message.create(TOPIC, BODY, properties=properties(i)) for i in range(start, start + 100)]
                    producer.send_batch(batch)
            runs = asyncio.run(_sdk_rounds(config, rounds, proc.pid))
        finally:
            proc.stop()
    out: dict = {"case": "sdk", "messages": messages, "queues": queue_count, "rounds": rounds, "expression": SQL}
    for name, samples in runs.items():
        out[name] = {
            "offsets_per_s": round(statistics.median(s["offsets_per_s"] for s in samples)),
            "delivered_per_s": round(statistics.median(s["delivered_per_s"] for s in samples)),
            "broker_cpu_s": round(statistics.median(s["broker_cpu_s"] for s in samples), 2),
        }
    out["cost"] = round(1 - out["sql"]["offsets_per_s"] / out["none"]["offsets_per_s"], 3)
    return out


async def _sdk_rounds(config: ClientConfig, rounds: int, broker_pid: int) -> dict[str, list[dict]]:
    selectors = {"none": MessageSelector.by_tag(), "sql": MessageSelector.by_sql(SQL)}
    runs: dict[str, list[dict]] = {name: [] for name in selectors}
    async with AsyncPullConsumer("bench_sql_group", config) as consumer:
        queues = sorted(await consumer.fetch_queues(TOPIC))
        await _drain(consumer, queues, selectors["none"])  # warm up: page cache, connections
        for r in range(rounds):
            for name in sorted(selectors, reverse=r % 2 == 1):  # alternate which goes first
                cpu = process_cpu_s(broker_pid)
                started = time.perf_counter()
                scanned, delivered = await _drain(consumer, queues, selectors[name])
                elapsed = time.perf_counter() - started
                runs[name].append(
                    {
                        "offsets_per_s": scanned / elapsed,
                        "delivered_per_s": delivered / elapsed,
                        "broker_cpu_s": process_cpu_s(broker_pid) - cpu,
                    }
                )
    return runs


def bench_store(messages: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_store(Path(tmp), messages, rounds))


async def _store(data_dir: Path, messages: int, rounds: int) -> dict:
    store = MessageStore(StoreConfig(data_dir=data_dir, consume_queue_segment_units=300_000))
    store.start()
    try:
        for start in range(0, messages, 100):
            await store.put_messages(
                [
                    MessageExt(topic=TOPIC, body=BODY, properties=properties(i), born_host=("127.0.0.1", 1))
                    for i in range(start, start + 100)
                ]
            )
        keep = SubscriptionFilters().read_filter("SQL92", SQL)
        timings: dict[str, list[float]] = {"none": [], "sql": []}
        for r in range(rounds + 1):
            for name in sorted(timings, reverse=r % 2 == 1):
                record_filter = keep.record if name == "sql" else None
                started = time.perf_counter()
                offset = 0
                while offset < messages:
                    offset = store.get_messages(TOPIC, 0, offset, BATCH, record_filter=record_filter).next_begin_offset
                if r:  # round 0 warms up
                    timings[name].append(messages / (time.perf_counter() - started))
        none, sql = (statistics.median(timings[n]) for n in ("none", "sql"))
        return {
            "case": "store",
            "messages": messages,
            "rounds": rounds,
            "none_offsets_per_s": round(none),
            "sql_offsets_per_s": round(sql),
            "cost": round(1 - sql / none, 3),
            "sql_us_per_message": round((1 / sql - 1 / none) * 1e6, 2),
        }
    finally:
        await store.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default="sdk,store")
    args = parser.parse_args()
    cases = args.cases.split(",")
    if "store" in cases:
        print(json.dumps(bench_store(args.messages, args.rounds)), flush=True)
    if "sdk" in cases:
        print(json.dumps(bench_sdk(args.messages, args.queues, args.rounds)), flush=True)


if __name__ == "__main__":
    main()
