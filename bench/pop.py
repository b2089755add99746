"""POP speed: the SDK's receive + ack rate against ``pocketmq serve``, and the revive service's throughput.

- ``sdk``: MESSAGES 1 KiB messages in an 8-queue topic (sent first, not timed); CONSUMERS ``AsyncSimpleConsumer``s
  of one group in this process (one event loop) each loop receive(32) + ack_batch until every message was acked
  once; ``--acks overlapped`` (default) acks a batch while receiving the next, ``--acks awaited`` awaits each ack. Target on the 2-core machine (issue 5): 20,000 msg/s.
- ``revive``: in process, on a ManualClock: REVIVE_MESSAGES messages popped (batches of 32) and never acked; the
  clock passes their invisible time and revive passes run until every one is in the retry topic. Reports the
  revive passes' messages per second (the pops are not timed).

``--topic-type priority`` runs both cases on a PRIORITY topic instead (docs/pop.md): the messages are sent in
batches of 32 of one priority level each, levels 0..7 in turn (one per queue), so every pop reads the highest
level that holds messages first. The sdk case also reports the (untimed-before) send rate.

Prints one JSON line per case. ``--profile`` runs cProfile over the broker's pop path in process (pop + ack of
the revive case's messages) and prints the top functions (total time) to stderr.

    python bench/pop.py [--messages 64000] [--consumers 4] [--revive-messages 100000] [--cases sdk,revive]
                        [--acks overlapped|awaited] [--topic-type normal|priority]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

from pocketmq.client import Admin, AsyncSimpleConsumer, ClientConfig, Message, Producer
from pocketmq.common.topic import MessageType, TopicConfig
from pocketmq.testing.processes import broker_process, process_cpu_s

BODY = b"x" * 1024
TOPIC = "bench_pop"
GROUP = "bench_pop_group"
QUEUES = 8
BATCH = 32
TARGET_MSG_PER_S = 20_000


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


if __name__ == "__main__":
    main()
