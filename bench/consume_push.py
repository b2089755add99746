"""Push consumer end to end: 1 KiB messages produced with the SDK and consumed by a ``PushConsumer`` from a
``pocketmq serve`` this script starts (4 queues, ASYNC_FLUSH).

- ``throughput``: ``--messages`` produced while the consumer (concurrent listener that returns
  CONSUME_SUCCESS, batch size ``--batch``) consumes; msg/s from the first send to the last message consumed.
  ``--listener async``: the listener is an ``async def`` (run on the client's event loop, no thread).
  ``--produce batch`` (default): a producer process of its own sends batches of 32 (``send_batch``), 8 in
  flight; ``--produce single``: 100 single sends in flight on one ``AsyncProducer`` in this process (the
  consumer's process, as before). Target (issue 6): 30,000 msg/s on the 2-core machine.
- ``latency_at_1000``: single sends paced at 1,000 msg/s for ``--latency-seconds``; end-to-end latency =
  listener time - send time (a property), p50/p99. Target: p99 < 10 ms.
- ``consume_only``: then a new group reads everything stored from the first offset, with nothing else running:
  msg/s, the client's and the broker's CPU per message, then their CPU while the caught-up consumer idles
  (long polling) for ``IDLE_S``.

Prints one JSON line per case.

    python bench/consume_push.py [--messages 50000] [--batch 32] [--listener sync|async] [--produce batch|single]
                                 [--latency-seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pocketmq.client import (
    Admin,
    AsyncProducer,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    Message,
    PushConsumer,
    PushConsumerOptions,
)
from pocketmq.client.push_consumer import ConsumeFromWhere
from pocketmq.testing.processes import broker_process, process_cpu_s

BODY = b"x" * 1024
TOPIC = "bench_push"
IN_FLIGHT = 100
IDLE_S = 2.0
SEND_BATCH = 32
BATCHES_IN_FLIGHT = 8


class Counter:
    def __init__(self):
        self.count = 0
        self.latencies_ms: list[float] = []
        self.lock = threading.Lock()
        self.last_at = 0.0

    def __call__(self, msgs, ctx):
        now_ms = time.time() * 1000
        with self.lock:
            self.count += len(msgs)
            self.last_at = time.perf_counter()
            for m in msgs:
                sent = m.properties.get("sent_ms")
                if sent:
                    self.latencies_ms.append(now_ms - float(sent))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def as_listener(self, kind: str) -> Callable:
        """What the consumer registers: this counter (``sync``) or an ``async def`` around it (``async``)."""
        if kind == "sync":
            return self

        async def on_the_loop(msgs, ctx):
            return self(msgs, ctx)

        return on_the_loop


async def produce_batches(config: ClientConfig, count: int, first_send_at) -> None:
    async with AsyncProducer(config) as producer:
        await producer.instance.route(TOPIC)  # connected before the clock starts, as the single-send case is
        first_send_at.value = time.time()
        semaphore = asyncio.Semaphore(BATCHES_IN_FLIGHT)

        async def one_batch(size: int) -> None:
            async with semaphore:
                await producer.send_batch([Message(TOPIC, BODY) for _ in range(size)])

        sizes = [SEND_BATCH] * (count // SEND_BATCH) + ([count % SEND_BATCH] if count % SEND_BATCH else [])
        await asyncio.gather(*(one_batch(size) for size in sizes))


def producer_process(namesrv: str, count: int, first_send_at) -> None:
    config = ClientConfig(namesrv_addr=namesrv, instance_name="bench-push-producer")
    asyncio.run(produce_batches(config, count, first_send_at))


async def produce(config: ClientConfig, count: int, rate_per_s: float | None, stamp: bool) -> None:
    async with AsyncProducer(config) as producer:
        if rate_per_s is None:
            semaphore = asyncio.Semaphore(IN_FLIGHT)

            async def one(i: int) -> None:
                async with semaphore:
                    await producer.send(Message(TOPIC, BODY))

            await asyncio.gather(*(one(i) for i in range(count)))
            return
        loop = asyncio.get_running_loop()
        start = loop.time()
        pending = []
        for i in range(count):
            delay = start + i / rate_per_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            props = {"sent_ms": repr(time.time() * 1000)} if stamp else {}
            pending.append(asyncio.ensure_future(producer.send(Message(TOPIC, BODY, properties=props))))
        await asyncio.gather(*pending)


def wait_for(counter: Counter, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while counter.count < count and time.monotonic() < deadline:
        time.sleep(0.01)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=32, help="consume batch size (consumeMessageBatchMaxSize)")
    parser.add_argument(
        "--produce",
        choices=("batch", "single"),
        default="batch",
        help="batches of 32 from a producer process, or 100 single sends in flight in this one",
    )
    parser.add_argument("--listener", choices=("sync", "async"), default="sync", help="the listener's kind")
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    args = parser.parse_args()
    proc = broker_process(Path(tempfile.mkdtemp(prefix="bench_push_")), "broker-bench").start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv, instance_name="bench-push")
        with Admin(config) as admin:
            admin.create_topic(TOPIC, queues=4)
        counter = Counter()
        consumer = PushConsumer(
            PushConsumerOptions("bench_push_group", consume_batch_size=args.batch, pull_batch_size=64), config
        )
        consumer.subscribe(TOPIC)
        consumer.register_listener(counter.as_listener(args.listener))
        consumer.start()
        try:
            if args.produce == "batch":
                context = multiprocessing.get_context("spawn")
                first_send_at = context.Value("d", 0.0)  # epoch s, set by the producer process
                producer = context.Process(target=producer_process, args=(proc.namesrv, args.messages, first_send_at))
                producer.start()
                producer.join()
                # The clock starts at the first send, not at the start of the producer process.
                started = time.perf_counter() - (time.time() - first_send_at.value)
            else:
                started = time.perf_counter()
                asyncio.run(produce(config, args.messages, None, stamp=False))
            produced_s = time.perf_counter() - started
            wait_for(counter, args.messages, 120)
            elapsed = counter.last_at - started
            print(
                json.dumps(
                    {
                        "bench": "consume_push",
                        "case": "throughput",
                        "messages": counter.count,
                        "consume_batch": args.batch,
                        "listener": args.listener,
                        "produce": args.produce,
                        "msg_per_s": round(counter.count / elapsed),
                        "produce_msg_per_s": round(args.messages / produced_s),
                        "target_msg_per_s": 30_000,
                    }
                ),
                flush=True,
            )
            base = counter.count
            latency_count = int(1000 * args.latency_seconds)
            counter.latencies_ms.clear()
            asyncio.run(produce(config, latency_count, 1000.0, stamp=True))
            wait_for(counter, base + latency_count, 60)
            lat = counter.latencies_ms
            print(
                json.dumps(
                    {
                        "bench": "consume_push",
                        "case": "latency_at_1000",
                        "messages": len(lat),
                        "p50_ms": round(percentile(lat, 0.50), 2),
                        "p99_ms": round(percentile(lat, 0.99), 2),
                        "max_ms": round(max(lat), 2) if lat else None,
                        "target_p99_ms": 10,
                    }
                ),
                flush=True,
            )
        finally:
            consumer.shutdown()
        drain(config, proc.pid, counter.count, args.batch, args.listener)
    finally:
        proc.stop()


def drain(config: ClientConfig, broker_pid: int, stored: int, batch: int, listener: str) -> None:
    """``consume_only``: a new group reads the ``stored`` messages of the topic from the first offset, alone."""
    counter = Counter()
    consumer = PushConsumer(
        PushConsumerOptions(
            "bench_push_drain",
            consume_batch_size=batch,
            pull_batch_size=64,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        ),
        config,
    )
    consumer.subscribe(TOPIC)
    consumer.register_listener(counter.as_listener(listener))
    started, cpu_started, broker_cpu_started = time.perf_counter(), time.process_time(), process_cpu_s(broker_pid)
    consumer.start()
    try:
        wait_for(counter, stored, 120)
        elapsed = counter.last_at - started
        client_cpu_s, broker_cpu_s = time.process_time() - cpu_started, process_cpu_s(broker_pid) - broker_cpu_started
        idle_started, broker_idle_started = time.process_time(), process_cpu_s(broker_pid)
        time.sleep(IDLE_S)  # caught up: what the long-polling consumer and its broker burn doing nothing
        client_idle_s = time.process_time() - idle_started
        broker_idle_s = process_cpu_s(broker_pid) - broker_idle_started
        print(
            json.dumps(
                {
                    "bench": "consume_push",
                    "case": "consume_only",
                    "messages": counter.count,
                    "consume_batch": batch,
                    "listener": listener,
                    "msg_per_s": round(counter.count / elapsed),
                    "client_cpu_us_per_msg": round(client_cpu_s / counter.count * 1e6, 1),
                    "broker_cpu_us_per_msg": round(broker_cpu_s / counter.count * 1e6, 1),
                    "idle_cpu_pct": {
                        "client": round(100 * client_idle_s / IDLE_S, 1),
                        "broker": round(100 * broker_idle_s / IDLE_S, 1),
                    },
                }
            ),
            flush=True,
        )
    finally:
        consumer.shutdown()


if __name__ == "__main__":
    main()
