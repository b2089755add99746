"""PocketMQ through the five workloads of the peer benchmarks (Redis Streams, NATS JetStream, RabbitMQ), with
their options and their one JSON line per result (``"peer": "pocketmq"``), so that ``make bench-peers`` can
set PocketMQ beside the peers measured minutes before on the same machine (docs/benchmarks.md).

This script starts one ``pocketmq serve`` (ASYNC_FLUSH, every setting at its default, ephemeral ports on
127.0.0.1) and runs each test on a topic of its own (8 queues); ``--flush sync`` runs against a SYNC_FLUSH
broker instead (a send is answered once its fsync is done: Redis's ``appendfsync always`` workload, which the
matrix runs for the two produce tests on a second broker). 1 KiB messages carry (monotonic ns, sequence)
in their first 16 bytes, as the peers' do.

  produce_sync   ``Producer.send`` one at a time, each waiting for the broker's answer
  produce_batch  ``AsyncProducer.send_async`` with ``--batch`` sends in flight (``--auto-batch``: the sends of
                 one loop turn travel together, each with its own result)
  consume        drain ``--n`` preloaded messages, ack each one. ``--consumer pop``: an ``AsyncSimpleConsumer``
                 receives up to min(``--batch``, 32) at a time and acks message by message; ``--ack-mode sync``
                 awaits each ack, ``each`` sends a batch's acks while it receives the next (not waited, as
                 NATS ``msg.ack()``). ``--consumer push``: a ``PushConsumer`` (pull batch ``--batch``, one
                 message per listener call) whose offsets are committed in the background (not waited);
                 ``--listener async``: its listener is an ``async def`` run on the client's event loop
  latency        a producer here sends one at a time at ``--rate`` for ``--duration``; a consumer process
                 (``--consumer pop``: receive with long polling + ack_batch, or ``push``) stamps the arrival
  redelivery     ``--messages`` messages received by a POP consumer and never acked: each comes back after its
                 invisible time, taken from ``--backoff`` for each delivery (``change_invisible_duration``), until
                 it was delivered ``--max-deliver`` times; reports the gaps between deliveries

With no ``--test`` it runs the matrix ``make bench-peers`` uses (the tests and variants of the peers' run, and
PocketMQ's consumer kinds). ``--n`` and ``--duration`` shorten a run.

    python bench/peers.py [--test T ...] [--n 100000] [--size 1024] [--batch 100] [--ack-mode each|sync]
                          [--consumer pop|push] [--listener sync|async] [--auto-batch] [--rate 1000] [--duration 10] [--max-seconds 55]
                          [--flush async|sync]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pocketmq import __version__
from pocketmq.client import (
    Admin,
    AsyncProducer,
    AsyncSimpleConsumer,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    Message,
    Producer,
    ProducerOptions,
    PushConsumer,
    PushConsumerOptions,
)
from pocketmq.client.push_consumer import ConsumeFromWhere
from pocketmq.testing.processes import broker_process, process_cpu_s

HEADER = struct.Struct("<qQ")  # send time (monotonic ns), sequence number: the peers' payload header
WARMUP_SEQ = 1 << 62  # sequence numbers from here on mark the latency test's warm-up sends
QUEUES = 8
PRELOAD_IN_FLIGHT = 8  # batches of 32 in flight while preloading the consume test's messages
PRELOAD_BATCH = 32
MAX_RECEIVE = 32  # the most one POP receive returns
GRACE_S = 10.0  # a latency consumer waits this long after the last send for what is still on its way
READY_TIMEOUT_S = 60.0  # for the latency consumer's first message (its process, connection and queues)
TESTS = ("produce_sync", "produce_batch", "consume", "latency", "redelivery")
# The matrix of `make bench-peers`: run_all.sh's NATS and Redis tests, with PocketMQ's consumer kinds.
MATRIX: list[dict] = [
    {"test": "produce_sync"},
    {"test": "produce_batch", "batch": 100},
    {"test": "produce_batch", "batch": 100, "auto_batch": True},
    {"test": "produce_batch", "batch": 1000},
    {"test": "consume", "ack_mode": "sync", "consumer": "pop"},
    {"test": "consume", "ack_mode": "each", "consumer": "pop"},
    {"test": "consume", "ack_mode": "each", "consumer": "push"},
    {"test": "consume", "ack_mode": "each", "consumer": "push", "listener": "async"},
    {"test": "latency", "consumer": "pop"},
    {"test": "latency", "consumer": "push"},
    {"test": "latency", "consumer": "push", "listener": "async"},
    {"test": "redelivery", "consumer": "pop"},
    # the peers' produce tests with an fsync before each reply (Redis: appendfsync always)
    {"test": "produce_sync", "flush": "sync"},
    {"test": "produce_batch", "batch": 100, "flush": "sync"},
]
FLUSH_MODES = {"async": "ASYNC_FLUSH", "sync": "SYNC_FLUSH"}


def body(size: int, seq: int) -> bytes:
    return HEADER.pack(time.monotonic_ns(), seq) + b"x" * (size - HEADER.size)


def percentiles(values: list[float], scale: float = 1e-3) -> dict:
    """n, p50/p90/p99/p99.9, max and mean of ns values, in µs by default (``scale`` 1e-6: ms), as the peers."""
    if not values:
        return {}
    ordered = sorted(values)
    n = len(ordered)

    def at(p: float) -> float:
        return round(ordered[min(n - 1, int(p * n))] * scale, 1)

    return {
        "n": n,
        "p50": at(0.50),
        "p90": at(0.90),
        "p99": at(0.99),
        "p999": at(0.999),
        "max": round(ordered[-1] * scale, 1),
        "mean": round(sum(ordered) / n * scale, 1),
    }


class Phase:
    """Times a phase and the CPU the broker and this process spent in it."""

    def __init__(self, broker_pid: int):
        self.broker_pid = broker_pid
        self.until: float | None = None  # when the phase's work ended, if before the exit (perf_counter)

    def __enter__(self) -> Phase:
        self.started = time.perf_counter()
        self.client_cpu_s, self.broker_cpu_s = time.process_time(), process_cpu_s(self.broker_pid)
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = (self.until or time.perf_counter()) - self.started
        self.client_cpu_s = time.process_time() - self.client_cpu_s
        self.broker_cpu_s = process_cpu_s(self.broker_pid) - self.broker_cpu_s

    def result(self, msgs: int, size: int, **extra) -> dict:
        return {
            "msgs": msgs,
            "seconds": round(self.seconds, 3),
            "msgs_per_s": round(msgs / self.seconds),
            "MB_per_s": round(msgs * size / self.seconds / 2**20, 1),
            "client_cpu_pct": round(100 * self.client_cpu_s / self.seconds),
            "server_cpu_pct": round(100 * self.broker_cpu_s / self.seconds),
            **extra,
        }


@dataclass
class Run:
    """One test's options (the peers' names and defaults: see ``main``) and what it runs against."""

    test: str
    namesrv: str
    broker_pid: int
    topic: str
    work_dir: Path
    n: int
    size: int
    batch: int
    max_seconds: float
    ack_mode: str
    consumer: str
    listener: str
    auto_batch: bool
    rate: int
    duration: float
    backoff: str
    max_deliver: int
    messages: int
    flush: str

    @property
    def config(self) -> ClientConfig:
        return ClientConfig(namesrv_addr=self.namesrv)

    @property
    def group(self) -> str:
        return f"{self.topic}_group"

    def settings(self) -> dict:
        settings: dict = {
            "server": f"pocketmq {__version__}",
            "client": f"pocketmq SDK {__version__} (remoting)",
            "flush": FLUSH_MODES[self.flush],
            "queues": QUEUES,
            "size": self.size,
            "n": self.n,
            "batch": self.batch,
        }
        if self.test == "produce_sync":
            settings["client_kind"] = "Producer.send"
        elif self.test == "produce_batch":
            settings["client_kind"] = "AsyncProducer.send_async"
            settings["auto_batch"] = self.auto_batch
        else:  # the consumer's side is measured: its client
            settings["client_kind"] = "PushConsumer" if self.consumer == "push" else "AsyncSimpleConsumer"
            settings["consumer"] = self.consumer
            if self.consumer == "push":
                settings["listener"] = self.listener
        if self.test == "consume":
            settings["ack_mode"] = self.ack_mode
        if self.test == "latency":
            settings.update(rate=self.rate, duration=self.duration)
        return settings


# -- produce --------------------------------------------------------------------------------------------------------
def produce_sync(run: Run) -> dict:
    deadline = time.perf_counter() + run.max_seconds
    sent = 0
    with Producer(run.config) as producer:
        producer.send(Message(run.topic, body(run.size, 0)))  # the route and the connection, before the clock
        with Phase(run.broker_pid) as phase:
            while sent < run.n and time.perf_counter() < deadline:
                producer.send(Message(run.topic, body(run.size, sent)))
                sent += 1
    return phase.result(sent, run.size)


async def send_window(producer: AsyncProducer, run: Run, count: int, window: int, deadline: float) -> tuple[int, int]:
    """Send ``count`` messages with ``window`` in flight until ``deadline``; (sent, failed)."""
    slots = asyncio.Semaphore(window)
    tasks = []
    for seq in range(count):
        if time.perf_counter() >= deadline:
            break
        await slots.acquire()
        message = Message(run.topic, body(run.size, seq))
        task = producer.send_async(message)
        task.add_done_callback(lambda _: slots.release())
        tasks.append(task)
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    return len(tasks), sum(isinstance(o, BaseException) for o in outcomes)


def produce_batch(run: Run) -> dict:
    async def go() -> dict:
        options = ProducerOptions(auto_batch=run.auto_batch)
        async with AsyncProducer(run.config, options) as producer:
            await producer.instance.route(run.topic)
            with Phase(run.broker_pid) as phase:
                sent, errors = await send_window(producer, run, run.n, run.batch, time.perf_counter() + run.max_seconds)
        return phase.result(sent, run.size, errors=errors)

    return asyncio.run(go())


# -- consume --------------------------------------------------------------------------------------------------------
async def preload(run: Run) -> int:
    """Send up to ``--n`` messages, for at most ``--max-seconds`` (untimed); how many were sent."""
    deadline = time.perf_counter() + run.max_seconds
    sent = 0
    async with AsyncProducer(run.config) as producer:
        slots = asyncio.Semaphore(PRELOAD_IN_FLIGHT)

        async def one(start: int) -> None:
            nonlocal sent
            async with slots:
                if time.perf_counter() < deadline:
                    count = min(PRELOAD_BATCH, run.n - start)
                    await producer.send_batch([Message(run.topic, body(run.size, start + i)) for i in range(count)])
                    sent += count

        await asyncio.gather(*(one(start) for start in range(0, run.n, PRELOAD_BATCH)))
    return sent


async def consume_pop(run: Run, phase: Phase, expect: int) -> int:
    received = 0
    deadline = time.perf_counter() + run.max_seconds
    async with AsyncSimpleConsumer(run.group, {run.topic: "*"}, run.config) as consumer:
        with phase:
            acking: list[asyncio.Future] = []
            while received < expect and time.perf_counter() < deadline:
                got = await consumer.receive(min(run.batch, MAX_RECEIVE), 30_000, await_duration_ms=2000)
                await asyncio.gather(*acking)  # the previous batch's acks went out while this batch was asked for
                acking = []
                if not got:
                    break
                for msg in got:
                    if run.ack_mode == "sync":
                        await consumer.ack(msg)
                    else:
                        acking.append(asyncio.ensure_future(consumer.ack(msg)))
                received += len(got)
            await asyncio.gather(*acking)
    return received


def consume_push(run: Run, phase: Phase, expect: int) -> int:
    counted = Listener(expect)
    consumer = PushConsumer(
        PushConsumerOptions(
            run.group,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=run.batch,
            offset_store_dir=run.work_dir / "offsets",
        ),
        run.config,
    )
    consumer.subscribe(run.topic)
    consumer.register_listener(push_listener(counted, run.listener))
    try:
        with phase:
            consumer.start()
            counted.done.wait(run.max_seconds)
            phase.until = counted.last_at or None  # the clock stops at the last message
    finally:
        consumer.shutdown()
    return counted.count


class Listener:
    """A push consumer's listener: counts (and with ``stamped``, times) what it is given."""

    def __init__(self, expect: int, stamped: bool = False):
        self.expect, self.stamped = expect, stamped
        self.count, self.last_at = 0, 0.0
        self.latencies_ns: list[int] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.first = threading.Event()

    def __call__(self, msgs, ctx):
        now_ns = time.monotonic_ns()
        with self.lock:
            self.first.set()
            for msg in msgs:
                sent_ns, seq = HEADER.unpack_from(msg.body)
                if self.stamped and seq < WARMUP_SEQ:
                    self.latencies_ns.append(now_ns - sent_ns)
                    self.count += 1
                elif not self.stamped:
                    self.count += 1
            self.last_at = time.perf_counter()
            if self.count >= self.expect:
                self.done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def push_listener(listener: Listener, kind: str) -> Callable:
    """What the push consumer registers: ``listener`` itself (``sync``, on the consume threads), or an
    ``async def`` around it (``async``, on the client's event loop)."""
    if kind == "sync":
        return listener

    async def on_the_loop(msgs, ctx):
        return listener(msgs, ctx)

    return on_the_loop


def consume(run: Run) -> dict:
    preloaded = asyncio.run(preload(run))
    phase = Phase(run.broker_pid)
    if run.consumer == "pop":
        received = asyncio.run(consume_pop(run, phase, preloaded))
    else:
        received = consume_push(run, phase, preloaded)
    return phase.result(received, run.size, preloaded=preloaded)


# -- latency --------------------------------------------------------------------------------------------------------
def patience(sent_all) -> Iterator[None]:
    """Turns while a latency consumer keeps waiting: until ``GRACE_S`` after the producer sent its last message
    (on a loaded machine the sends may take much longer than ``--duration``)."""
    give_up_at = None
    while give_up_at is None or time.monotonic() < give_up_at:
        if give_up_at is None and sent_all.is_set():
            give_up_at = time.monotonic() + GRACE_S
        yield


def latency_consumer(run: Run, expect: int, ready, sent_all, out) -> None:
    """In a process of its own: receive ``expect`` timed messages (after the warm-up), put their latencies (ns)."""
    if run.consumer == "push":
        listener = Listener(expect, stamped=True)
        consumer = PushConsumer(PushConsumerOptions(run.group, offset_store_dir=run.work_dir / "offsets"), run.config)
        consumer.subscribe(run.topic)
        consumer.register_listener(push_listener(listener, run.listener))
        consumer.start()
        try:
            if listener.first.wait(READY_TIMEOUT_S):
                ready.set()
                for _ in patience(sent_all):
                    if listener.done.wait(0.1):
                        break
        finally:
            consumer.shutdown()
        with listener.lock:
            out.put(list(listener.latencies_ns))
        return
    out.put(asyncio.run(pop_latencies(run, expect, ready, sent_all)))


async def pop_latencies(run: Run, expect: int, ready, sent_all) -> list[int]:
    """Receive, then ack what came without waiting for the ack before the next receive (NATS's latency consumer
    acks with ``msg.ack()``, which does not wait for the server either); the acks are awaited at the end."""
    latencies_ns: list[int] = []
    acking: list[asyncio.Future] = []
    async with AsyncSimpleConsumer(run.group, {run.topic: "*"}, run.config) as consumer:
        for _ in patience(sent_all):
            if len(latencies_ns) >= expect:
                break
            got = await consumer.receive(MAX_RECEIVE, 30_000, await_duration_ms=1000)
            now_ns = time.monotonic_ns()
            for msg in got:
                sent_ns, seq = HEADER.unpack_from(msg.body)
                if seq < WARMUP_SEQ:
                    latencies_ns.append(now_ns - sent_ns)
            if got:
                ready.set()
                acking.append(asyncio.ensure_future(consumer.ack_batch(got)))
        await asyncio.gather(*acking)
    return latencies_ns


def latency(run: Run) -> dict:
    expect = int(run.rate * run.duration)
    context = multiprocessing.get_context("spawn")  # the SDK runs threads: no fork
    ready, sent_all, out = context.Event(), context.Event(), context.Queue()
    proc = context.Process(target=latency_consumer, args=(run, expect, ready, sent_all, out))
    proc.start()
    send_ns, lags_s = [], []
    try:
        with Producer(run.config) as producer:
            # warm-up sends until the consumer has received one: its connection, route and queues are in place
            warmup, deadline = WARMUP_SEQ, time.monotonic() + READY_TIMEOUT_S
            while not ready.wait(0.01):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the latency consumer received nothing in {READY_TIMEOUT_S} s")
                producer.send(Message(run.topic, body(run.size, warmup)))
                warmup += 1
            started = time.perf_counter()
            for seq in range(expect):
                due = started + seq / run.rate
                ahead_s = due - time.perf_counter()
                if ahead_s > 0:
                    time.sleep(ahead_s)
                lags_s.append(max(0.0, -ahead_s))
                before = time.monotonic_ns()
                producer.send(Message(run.topic, body(run.size, seq)))
                send_ns.append(time.monotonic_ns() - before)
        sent_all.set()
        latencies_ns = out.get(timeout=GRACE_S + 60)
    finally:
        proc.join(30)
    return {
        "sent": expect,
        "received": len(latencies_ns),
        "rate": run.rate,
        "duration_s": run.duration,
        "consumer": run.consumer,
        "e2e_us": percentiles(latencies_ns),
        "send_ack_us": percentiles(send_ns),
        "producer_max_lag_ms": round(max(lags_s) * 1e3, 2),
    }


# -- redelivery -----------------------------------------------------------------------------------------------------
def redelivery(run: Run) -> dict:
    backoff_s = [float(x) for x in run.backoff.split(",")]
    deliveries = asyncio.run(unacked_deliveries(run, backoff_s))
    gaps_ns: dict[str, list[float]] = {}
    for times in deliveries.values():
        for n in range(1, len(times)):
            gaps_ns.setdefault(f"delivery{n + 1}", []).append((times[n] - times[n - 1]) * 1e9)
    return {
        "messages": run.messages,
        "backoff_s": backoff_s,
        "max_deliver": run.max_deliver,
        "deliveries_per_msg": sorted({len(times) for times in deliveries.values()}),
        "gap_ms_by_delivery": {name: percentiles(gaps, 1e-6) for name, gaps in gaps_ns.items()},
    }


async def unacked_deliveries(run: Run, backoff_s: list[float]) -> dict[int, list[float]]:
    """Each message's delivery times (monotonic s): never acked until its ``max_deliver``-th delivery."""
    deliveries: dict[int, list[float]] = {}
    deadline = time.monotonic() + min(run.max_seconds, 40)
    async with AsyncSimpleConsumer(run.group, {run.topic: "*"}, run.config) as consumer:
        async with AsyncProducer(run.config) as producer:
            for seq in range(run.messages):
                await producer.send(Message(run.topic, body(run.size, seq)))
        finished = 0
        while finished < run.messages and time.monotonic() < deadline:
            got = await consumer.receive(MAX_RECEIVE, int(backoff_s[0] * 1000), await_duration_ms=1000)
            now = time.monotonic()
            for msg in got:
                times = deliveries.setdefault(HEADER.unpack_from(msg.body)[1], [])
                times.append(now)
                if len(times) >= run.max_deliver:
                    await consumer.ack(msg)
                    finished += 1
                elif backoff_s[min(len(times) - 1, len(backoff_s) - 1)] != backoff_s[0]:
                    wait_ms = int(1000 * backoff_s[min(len(times) - 1, len(backoff_s) - 1)])
                    await consumer.change_invisible_duration(msg, wait_ms)
    return deliveries


# -- the runs -------------------------------------------------------------------------------------------------------
def emit(run: Run, result: dict) -> None:
    line = {
        "peer": "pocketmq",
        "test": run.test,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": run.settings(),
        "result": result,
    }
    print(json.dumps(line), flush=True)


def emit_load_average() -> None:
    """The machine's load before the runs, as the peers' run_all.sh records it before each peer."""
    load1, load5, load15 = (float(x) for x in Path("/proc/loadavg").read_text().split()[:3])
    line = {
        "peer": "pocketmq",
        "test": "loadavg",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "result": {"load1": load1, "load5": load5, "load15": load15},
    }
    print(json.dumps(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--test", choices=TESTS, help="one test (default: the whole matrix)")
    parser.add_argument("--n", type=int, default=100_000, help="messages (produce/consume)")
    parser.add_argument("--size", type=int, default=1024, help="message size in bytes")
    parser.add_argument("--max-seconds", type=float, default=55.0, help="hard bound of the timed phase")
    parser.add_argument("--batch", type=int, default=100, help="sends in flight; consumer batch")
    parser.add_argument("--ack-mode", choices=("each", "sync"), default="each")
    parser.add_argument("--consumer", choices=("pop", "push"), default="pop")
    parser.add_argument("--listener", choices=("sync", "async"), default="sync", help="push: the listener's kind")
    parser.add_argument("--auto-batch", action="store_true", help="produce_batch: ProducerOptions(auto_batch=True)")
    parser.add_argument("--rate", type=int, default=1000, help="latency test: msgs/s")
    parser.add_argument("--duration", type=float, default=10.0, help="latency test: seconds")
    parser.add_argument("--backoff", default="1,2,4", help="redelivery: seconds before each redelivery")
    parser.add_argument("--max-deliver", type=int, default=4)
    parser.add_argument("--messages", type=int, default=5, help="redelivery test: messages")
    parser.add_argument("--flush", choices=tuple(FLUSH_MODES), default="async", help="the broker's flush mode")
    args = vars(parser.parse_args())
    test = args.pop("test")
    runs = [{**args, **entry} for entry in MATRIX] if test is None else [{**args, "test": test}]
    if any(options["test"] == "redelivery" and options["consumer"] != "pop" for options in runs):
        parser.error("redelivery is measured with the POP consumer (--consumer pop)")
    emit_load_average()
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-peers-") as tmp:
        for flush in FLUSH_MODES:  # one broker per flush mode, each for the runs that ask for it
            numbered = [(number, options) for number, options in enumerate(runs) if options["flush"] == flush]
            if numbered:
                run_on_broker(Path(tmp), flush, numbered)


def run_on_broker(tmp: Path, flush: str, numbered: list[tuple[int, dict]]) -> None:
    broker = broker_process(tmp / f"broker-{flush}", "bench-peers", extra_args=["--flush", flush]).start()
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv)
        for number, options in numbered:
            topic = f"peers_{number}_{options['test']}"
            with Admin(config) as admin:
                admin.create_topic(topic, queues=QUEUES)
            run = Run(namesrv=broker.namesrv, broker_pid=broker.pid, topic=topic, work_dir=tmp, **options)
            emit(run, TEST_FUNCTIONS[run.test](run))
    finally:
        broker.stop()


TEST_FUNCTIONS = {
    "produce_sync": produce_sync,
    "produce_batch": produce_batch,
    "consume": consume,
    "latency": latency,
    "redelivery": redelivery,
}


if __name__ == "__main__":
    main()
