"""Timer throughput: schedule and fire 100,000 delayed messages in an in-process broker (virtual time).

Scheduling goes through ``broker.messages.send`` (the send path diverts each message into the timer topic,
100 messages per send call); the delays are spread over 60 s of virtual time. Firing advances the clock past
the last due time and runs the timer's load + deliver steps, which append every real message and its
tombstone. Also reports the wheel's size and the rebuild time after a restart with the timers
still pending.

``--cases lateness`` runs against ``pocketmq serve`` instead: ``--rate`` timers a second (10,000) come due for
``--lateness-seconds`` (sent first in batches of 100, 8 in flight, each with its delivery time in its body); once every
one is delivered they are pulled back and each one's lateness is its store time in the real topic minus its
delivery time (both the broker's clock). Reports p50 / p99 / max, the broker's CPU per timer from the first due
time to the last delivery, and its idle CPU afterwards (a share of one core: no busy waiting).

    python bench/timer.py [--timers 100000] [--cases throughput,lateness] [--lateness-seconds 5] [--rate 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.client import Admin, AsyncProducer, AsyncPullConsumer, ClientConfig
from pocketmq.common.message import Message
from pocketmq.common.properties import TIMER_DELIVER_MS
from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.processes import broker_process, process_cpu_s

SEND_BATCH = 100
LATENESS_TOPIC = "bench_timer_lateness"
LATENESS_QUEUES = 8
DEFAULT_RATE = 10_000  # timers coming due per second
LEAD_MS = 30_000  # from the start of the sends to the first due time: every send is done by then
SENDS_IN_FLIGHT = 8
IDLE_S = 5.0


async def schedule(broker: Broker, count: int) -> float:
    started = time.perf_counter()
    for start in range(0, count, SEND_BATCH):
        batch = [
            Message.create("bench_timer", b"x" * 100, properties={"TIMER_DELAY_MS": str(1000 + (i * 7919) % 60_000)})
            for i in range(start, min(count, start + SEND_BATCH))
        ]
        await broker.messages.send(batch, topic="bench_timer")
    return time.perf_counter() - started


async def run(count: int) -> dict:
    data_dir = tempfile.mkdtemp(prefix="bench_timer_")
    config = BrokerConfig(data_dir=data_dir, remoting_port=0, commit_log_segment_bytes=256 * 1024 * 1024)
    clock = ManualClock()
    broker = Broker(config, clock=clock)
    await broker.start(remoting_port=10911)
    schedule_s = await schedule(broker, count)
    load_started = time.perf_counter()
    broker.timer.load_new()
    load_s = time.perf_counter() - load_started
    wheel_bytes = broker.timer.wheel_memory_bytes()
    await broker.shutdown()

    restarted = Broker(config, clock=clock)
    rebuild_started = time.perf_counter()
    await restarted.start(remoting_port=10911)
    rebuild_s = time.perf_counter() - rebuild_started
    pending = restarted.timer.pending
    clock.advance(62_000)
    fire_started = time.perf_counter()
    fired = await restarted.timer.fire_due(clock.now_ms())
    fire_s = time.perf_counter() - fire_started
    visible = sum(restarted.store.max_queue_offset("bench_timer", q) for q in range(8))
    await restarted.shutdown()
    return {
        "bench": "timer",
        "timers": count,
        "schedule_per_s": round(count / schedule_s),
        "load_into_wheel_per_s": round(count / load_s),
        "wheel_bytes_per_timer": round(wheel_bytes / count, 1),
        "rebuild_s": round(rebuild_s, 2),
        "pending_after_restart": pending,
        "fire_per_s": round(fired / fire_s),
        "fired": fired,
        "visible": visible,
    }


# -- lateness against a real broker --------------------------------------------------------------------------------
async def schedule_due(config: ClientConfig, count: int, rate: int) -> tuple[int, int]:
    """Send ``count`` delayed messages due ``rate`` a second from LEAD_MS on, in batches of SEND_BATCH (the
    broker diverts each message of a batch on its own); (first due ms, sends done ms)."""
    first_due_ms = int(time.time() * 1000) + LEAD_MS
    starts = iter(range(0, count, SEND_BATCH))
    async with AsyncProducer(config) as producer:

        async def worker() -> None:
            for start in starts:
                batch = []
                for n in range(start, min(count, start + SEND_BATCH)):
                    due_ms = first_due_ms + n * 1000 // rate
                    batch.append(
                        Message.create(LATENESS_TOPIC, b"%d" % due_ms, properties={TIMER_DELIVER_MS: str(due_ms)})
                    )
                await producer.send_batch(batch)

        await asyncio.gather(*(worker() for _ in range(SENDS_IN_FLIGHT)))
    return first_due_ms, int(time.time() * 1000)


async def delivered_count(consumer: AsyncPullConsumer, queues) -> int:
    return sum([await consumer.max_offset(queue) for queue in queues])


async def lateness_of_all(config: ClientConfig, count: int, rate: int, pid: int) -> dict:
    first_due_ms, sent_ms = await schedule_due(config, count, rate)
    consumer = AsyncPullConsumer("bench_timer_reader", config)
    await consumer.start()
    try:
        queues = await consumer.fetch_queues(LATENESS_TOPIC)
        await asyncio.sleep(max(0.0, first_due_ms / 1000 - time.time()))
        cpu_s = process_cpu_s(pid)
        deadline = time.time() + count / rate + 60
        while await delivered_count(consumer, queues) < count and time.time() < deadline:
            await asyncio.sleep(0.05)
        cpu_s = process_cpu_s(pid) - cpu_s
        idle_cpu_s = process_cpu_s(pid)
        await asyncio.sleep(IDLE_S)
        idle_cpu_s = process_cpu_s(pid) - idle_cpu_s
        late_ms = []
        for queue in queues:
            offset = 0
            while True:
                got = await consumer.pull(queue, offset, 1024)
                if not got.messages:
                    break
                late_ms += [msg.store_timestamp_ms - int(msg.body) for msg in got.messages]
                offset = got.next_begin_offset
    finally:
        await consumer.shutdown()
    return {
        "case": "timer_lateness",
        "timers": count,
        "due_per_s": rate,
        "sends_done_before_first_due": sent_ms < first_due_ms,
        "delivered": len(late_ms),
        "late_ms_p50": statistics.median(late_ms) if late_ms else None,
        "late_ms_p99": statistics.quantiles(late_ms, n=100)[98] if late_ms else None,
        "late_ms_max": max(late_ms) if late_ms else None,
        "early_ms_min": min(late_ms) if late_ms else None,
        "broker_cpu_us_per_timer": round(cpu_s / count * 1e6),
        "broker_idle_cpu_pct": round(idle_cpu_s / IDLE_S * 100, 1),
    }


def bench_lateness(seconds: float, rate: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc = broker_process(Path(tmp), "broker-bench-timer").start()
        try:
            config = ClientConfig(namesrv_addr=proc.namesrv)
            with Admin(config) as admin:
                admin.create_topic(LATENESS_TOPIC, queues=LATENESS_QUEUES)
            return asyncio.run(lateness_of_all(config, int(rate * seconds), rate, proc.pid))
        finally:
            proc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=100_000)
    parser.add_argument("--cases", default="throughput")
    parser.add_argument("--lateness-seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=DEFAULT_RATE, help="lateness: timers coming due per second")
    args = parser.parse_args()
    cases = args.cases.split(",")
    if "throughput" in cases:
        print(json.dumps(asyncio.run(run(args.timers))), flush=True)
    if "lateness" in cases:
        print(json.dumps(bench_lateness(args.lateness_seconds, args.rate)), flush=True)


if __name__ == "__main__":
    main()
