"""POP speed: the SDK's receive + ack rate against ``pocketmq serve``, and the revive service's throughput.

- ``sdk``: MESSAGES 1 KiB messages in an 8-queue topic (sent first, not timed); CONSUMERS ``AsyncSimpleConsumer``s
  of one group in this process (one event loop) each loop receive(32) + ack_batch until every message was acked
  once; ``--acks overlapped`` (default) acks a batch while receiving the next, ``--acks awaited`` awaits each ack. Target on the 2-core machine (issue 5): 20,000 msg/s.
- ``revive``: in process, on a ManualClock: REVIVE_MESSAGES messages popped (batches of 32) and never acked; the
  clock passes their invisible time and revive passes run until every one is in the retry topic. Reports the
  revive passes' messages per second (the pops are not timed).
- ``lateness``: against ``pocketmq serve``: ``--rate`` messages a second (LATENESS_RATE; a few a second shows a
  message popped between revive's passes) for LATENESS_SECONDS seconds, from one revive interval after the
  broker's start, received by two ``AsyncSimpleConsumer``s (long polling) with an invisible time of
  ``--invisible-ms`` (INVISIBLE_MS; a shorter one lowers the broker's ``pop_min_invisible_ms`` to it) and never
  acked on their first delivery; each redelivery is acked and its lateness recorded: received again - the first
  delivery's deadline (the broker's pop time + the invisible time, from the receipt handle; same machine, same
  clock), and, as the client sees it, received again - received first - the invisible time. Reports p50 / p99 /
  max / min of both, the broker's CPU per message over the run and its idle CPU afterwards (a share of one
  core: no busy waiting).

``--topic-type priority`` runs both cases on a PRIORITY topic instead (docs/pop.md): the messages are sent in
batches of 32 of one priority level each, levels 0..7 in turn (one per queue), so every pop reads the highest
level that holds messages first. The sdk case also reports the (untimed-before) send rate.

Prints one JSON line per case. ``--profile`` runs cProfile over the broker's pop path in process (pop + ack of
the revive case's messages) and prints the top functions (total time) to stderr.

    python bench/pop.py [--messages 64000] [--consumers 4] [--revive-messages 100000] [--cases sdk,revive,lateness]
                        [--acks overlapped|awaited] [--topic-type normal|priority] [--lateness-seconds 10]
                        [--invisible-ms 1000] [--rate 200]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pocketmq.client import Admin, AsyncSimpleConsumer, ClientConfig, Message, Producer
from pocketmq.common import properties as props
from pocketmq.common.topic import MessageType, TopicConfig
from pocketmq.testing.processes import broker_process, process_cpu_s
from pocketmq.testing.scrape import metric

BODY = b"x" * 1024
TOPIC = "bench_pop"
GROUP = "bench_pop_group"
QUEUES = 8
BATCH = 32
TARGET_MSG_PER_S = 20_000
INVISIBLE_MS = 1000  # the broker's pop_min_invisible_ms default: the shortest invisible time it takes
LATENESS_RATE = 200  # messages a second in the lateness case (by default)
LATENESS_METRIC = "pocketmq_pop_revive_lateness_seconds"  # the broker's own view: CK revive time to its close
REVIVE_INTERVAL_S = 1.0  # the broker's pop_revive_interval_ms default
IDLE_S = 5.0  # how long the broker's idle CPU is measured after a case


# -- the SDK's receive + ack against a real broker -----------------------------------------------------------------
def batches(messages: int, priority: bool, make) -> list[list]:
    """The messages in sends of ``BATCH``; with ``priority`` each batch is of one level, 0..QUEUES-1 in turn."""
    out = []
    for n, start in enumerate(range(0, messages, BATCH)):
        level = n % QUEUES if priority else None
        out.append([make(TOPIC, BODY, level) for _ in range(min(BATCH, messages - start))])
    return out


def produce(config: ClientConfig, messages: int, priority: bool) -> float:
    """Sends per second."""
    with Admin(config) as admin:
        admin.create_topic(TOPIC, queues=QUEUES, message_type=MessageType.PRIORITY if priority else MessageType.MIXED)
    sends = batches(messages, priority, lambda topic, body, level: Message.create(topic, body, priority=level))
    with Producer(config) as producer:
        started = time.perf_counter()
        for batch in sends:
            producer.send_batch(batch)
        return messages / (time.perf_counter() - started)


async def consume_all(config: ClientConfig, messages: int, consumers: int, overlap_acks: bool) -> float:
    """Seconds for ``consumers`` consumers to receive and ack ``messages`` messages."""
    remaining = messages
    clients = [AsyncSimpleConsumer(GROUP, {TOPIC: "*"}, config) for _ in range(consumers)]
    for client in clients:
        await client.start()

    async def loop(client: AsyncSimpleConsumer) -> None:
        # With overlap_acks a consumer acks a batch while it receives the next one (at most one ack in flight), as
        # a consumer that hands its acks to a background task does; else it awaits each ack first.
        nonlocal remaining
        acking: asyncio.Task | None = None
        while remaining > 0:
            got = await client.receive(BATCH, 60_000, await_duration_ms=1000)
            if acking is not None:
                await acking
                acking = None
            if got:
                acking = asyncio.ensure_future(client.ack_batch(got))
                remaining -= len(got)
                if not overlap_acks:
                    await acking
                    acking = None
        if acking is not None:
            await acking

    started = time.perf_counter()
    try:
        await asyncio.gather(*(loop(c) for c in clients))
        return time.perf_counter() - started
    finally:
        for client in clients:
            await client.shutdown()


def bench_sdk(messages: int, consumers: int, overlap_acks: bool, priority: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc = broker_process(Path(tmp), "broker-bench-pop").start()
        try:
            config = ClientConfig(namesrv_addr=proc.namesrv)
            send_rate = produce(config, messages, priority)
            client_cpu_s, broker_cpu_s = time.process_time(), process_cpu_s(proc.proc.pid)
            elapsed_s = asyncio.run(consume_all(config, messages, consumers, overlap_acks))
            client_cpu_s, broker_cpu_s = time.process_time() - client_cpu_s, process_cpu_s(proc.proc.pid) - broker_cpu_s
        finally:
            proc.stop()
    rate = messages / elapsed_s
    return {
        "case": "sdk_receive_ack",
        "topic_type": "priority" if priority else "normal",
        "messages": messages,
        "send_msgs_per_s": round(send_rate),
        "consumers": consumers,
        "batch": BATCH,
        "acks": "overlapped" if overlap_acks else "awaited",
        "seconds": round(elapsed_s, 2),
        "client_cpu_s": round(client_cpu_s, 2),
        "broker_cpu_s": round(broker_cpu_s, 2),
        "msgs_per_s": round(rate),
        "target_msgs_per_s": TARGET_MSG_PER_S,
        "meets_target": rate >= TARGET_MSG_PER_S,
    }


# -- revive throughput in process ---------------------------------------------------------------------------------
async def pop_everything(broker, messages: int, *, ack: bool) -> None:
    from pocketmq.broker.pop.receive import PopRequest

    taken = 0
    while taken < messages:
        result = await broker.pop.pop(PopRequest(GROUP, TOPIC, BATCH, 10_000))
        delivered = result.delivered()
        if ack:
            await broker.pop.ack(GROUP, [h for _, h in delivered])
        taken += len(delivered)


async def revive_case(tmp: Path, messages: int, profile: bool, priority: bool) -> dict:
    from pocketmq.broker.broker import Broker
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.common.message import Message as StoredMessage
    from pocketmq.runtime.clock import ManualClock

    clock = ManualClock()
    config = dataclasses.replace(
        BrokerConfig(data_dir=tmp / "data", remoting_port=0, grpc_port=0), pop_revive_interval_ms=3_600_000
    )
    broker = Broker(config, clock=clock)
    await broker.start(remoting_port=10911)
    try:
        topic_type = MessageType.PRIORITY if priority else MessageType.MIXED
        broker.topics.create_or_update(TopicConfig(TOPIC, QUEUES, QUEUES, message_type=topic_type))
        for batch in batches(messages, priority, lambda t, b, level: StoredMessage.create(t, b, priority=level)):
            await broker.messages.send(batch, topic=TOPIC)
        pop_started = time.perf_counter()
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            await pop_everything(broker, messages, ack=True)
            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
            return {"case": "profile_pop_ack", "messages": messages}
        await pop_everything(broker, messages, ack=False)
        pop_s = time.perf_counter() - pop_started
        clock.advance(10_001)
        revive = broker.pop.revive
        before = revive.metrics.get("retried", 0)
        started = time.perf_counter()
        while revive.metrics.get("retried", 0) - before < messages:
            await revive.run_once(clock.now_ms())
        elapsed_s = time.perf_counter() - started
    finally:
        await broker.shutdown()
    return {
        "case": "revive",
        "topic_type": "priority" if priority else "normal",
        "messages": messages,
        "pop_msgs_per_s": round(messages / pop_s),
        "seconds": round(elapsed_s, 2),
        "msgs_per_s": round(messages / elapsed_s),
    }


def bench_revive(messages: int, profile: bool = False, priority: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(revive_case(Path(tmp), messages, profile, priority))


# -- redelivery lateness against a real broker ----------------------------------------------------------------------
def deadline_s(msg) -> float:
    """When a received message's invisible time ends, on the broker's clock (pop time + invisible time, from its
    receipt handle: ``<start> <pop time ms> <invisible ms> ...``); the broker runs on this machine."""
    parts = msg.properties[props.POP_CK].split(" ")
    return (int(parts[1]) + int(parts[2])) / 1000


async def redeliveries(
    config: ClientConfig, seconds: float, invisible_ms: int, rate: int
) -> tuple[list[float], list[float]]:
    """Send ``rate`` messages a second for ``seconds``; for each redelivery, in ms: how late it was received
    past its first delivery's deadline (the broker's pop time + ``invisible_ms``), and past the first receive +
    ``invisible_ms`` (as the client sees it: less by the first delivery's time in transit)."""
    from pocketmq.client import AsyncProducer

    total = int(rate * seconds)
    first_seen: dict[bytes, tuple[float, float]] = {}  # body -> (received, deadline), wall clock seconds
    late_ms: list[float] = []
    client_late_ms: list[float] = []
    loop = asyncio.get_running_loop()

    async def produce_paced(producer: AsyncProducer) -> None:
        started = loop.time()
        for n in range(total):
            await asyncio.sleep(max(0.0, started + n / rate - loop.time()))
            await producer.send(Message(TOPIC, b"%d" % n))

    async def consume(client: AsyncSimpleConsumer) -> None:
        deadline = loop.time() + seconds + 30
        while len(late_ms) < total and loop.time() < deadline:
            got = await client.receive(BATCH, invisible_ms, await_duration_ms=1000)
            now = time.time()
            again = []
            for msg in got:
                if msg.reconsume_times == 0:
                    first_seen.setdefault(msg.body, (now, deadline_s(msg)))
                elif msg.body in first_seen:
                    received, due = first_seen.pop(msg.body)
                    late_ms.append((now - due) * 1000)
                    client_late_ms.append((now - received) * 1000 - invisible_ms)
                    again.append(msg)
            if again:
                await client.ack_batch(again)

    clients = [AsyncSimpleConsumer(GROUP, {TOPIC: "*"}, config) for _ in range(2)]
    for client in clients:
        await client.start()
    try:
        async with AsyncProducer(config) as producer:
            await asyncio.gather(produce_paced(producer), *(consume(c) for c in clients))
    finally:
        for client in clients:
            await client.shutdown()
    return late_ms, client_late_ms


def quantiles_ms(name: str, values: list[float]) -> dict:
    """p50 / p99 / max / min of ``values`` as ``<name>_p50`` and so on (None when there are none)."""
    if len(values) < 2:
        return {f"{name}_{q}": None for q in ("p50", "p99", "max", "min")}
    return {
        f"{name}_p50": round(statistics.median(values), 1),
        f"{name}_p99": round(statistics.quantiles(values, n=100, method="inclusive")[98], 1),
        f"{name}_max": round(max(values), 1),
        f"{name}_min": round(min(values), 1),
    }


def bench_lateness(seconds: float, invisible_ms: int, rate: int, broker_args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        # the broker takes invisible times down to its pop_min_invisible_ms (1 s by default)
        floor = ["--set", f"pop_min_invisible_ms={invisible_ms}"] if invisible_ms < INVISIBLE_MS else []
        extra_args = ["--metrics-port", "0", *floor, *broker_args]
        proc = broker_process(Path(tmp), "broker-bench-lateness", extra_args=extra_args).start()
        started = time.monotonic()
        try:
            config = ClientConfig(namesrv_addr=proc.namesrv)
            with Admin(config) as admin:
                admin.create_topic(TOPIC, queues=QUEUES)
            # revive's first full pass comes one interval (1 s) after the start, and a CK appended before it
            # waits for it (docs/pop.md): the sends start after it, as in a broker that has been running
            time.sleep(max(0.0, REVIVE_INTERVAL_S - (time.monotonic() - started)))
            broker_cpu_s = process_cpu_s(proc.pid)
            late_ms, client_late_ms = asyncio.run(redeliveries(config, seconds, invisible_ms, rate))
            broker_cpu_s = process_cpu_s(proc.pid) - broker_cpu_s
            idle_cpu_s = process_cpu_s(proc.pid)
            time.sleep(IDLE_S)
            idle_cpu_s = process_cpu_s(proc.pid) - idle_cpu_s
            closed = metric(proc, f"{LATENESS_METRIC}_count")
            within_50ms = metric(proc, f"{LATENESS_METRIC}_bucket", le="0.05") / closed if closed else None
        finally:
            proc.stop()
    messages = int(rate * seconds)
    return {
        "case": "redelivery_lateness",
        "messages": messages,
        "redelivered": len(late_ms),
        "invisible_ms": invisible_ms,
        "rate_per_s": rate,
        "broker_args": extra_args[2:],
        **quantiles_ms("late_ms", late_ms),
        **quantiles_ms("client_late_ms", client_late_ms),
        "broker_cks_within_50ms": round(within_50ms, 3) if within_50ms is not None else None,
        "broker_cpu_us_per_msg": round(broker_cpu_s / messages * 1e6),
        "broker_idle_cpu_pct": round(idle_cpu_s / IDLE_S * 100, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=64_000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--revive-messages", type=int, default=100_000)
    parser.add_argument("--cases", default="sdk,revive")
    parser.add_argument("--profile", action="store_true", help="profile the in-process pop + ack path instead")
    parser.add_argument(
        "--acks",
        choices=("overlapped", "awaited"),
        default="overlapped",
        help="sdk case: ack a batch while receiving the next, or await each ack first",
    )
    parser.add_argument("--topic-type", choices=("normal", "priority"), default="normal")
    parser.add_argument("--lateness-seconds", type=float, default=10.0)
    parser.add_argument("--invisible-ms", type=int, default=INVISIBLE_MS, help="lateness case: the invisible time")
    parser.add_argument("--rate", type=int, default=LATENESS_RATE, help="lateness case: messages sent a second")
    parser.add_argument("--broker-set", action="append", default=[], help="lateness case: a broker KEY=VALUE")
    args = parser.parse_args()
    priority = args.topic_type == "priority"
    if args.profile:
        print(json.dumps(bench_revive(min(args.revive_messages, 32_000), True, priority)), flush=True)
        return
    cases = args.cases.split(",")
    if "sdk" in cases:
        print(json.dumps(bench_sdk(args.messages, args.consumers, args.acks == "overlapped", priority)), flush=True)
    if "revive" in cases:
        print(json.dumps(bench_revive(args.revive_messages, priority=priority)), flush=True)
    if "lateness" in cases:
        broker_args = [arg for setting in args.broker_set for arg in ("--set", setting)]
        print(json.dumps(bench_lateness(args.lateness_seconds, args.invisible_ms, args.rate, broker_args)), flush=True)


if __name__ == "__main__":
    main()
