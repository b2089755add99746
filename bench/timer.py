"""Timer throughput: schedule and fire 100,000 delayed messages in an in-process broker (virtual time).

Scheduling goes through ``broker.messages.send`` (the send path diverts each message into the timer topic,
100 messages per send call); the delays are spread over 60 s of virtual time. Firing advances the clock past
the last due time and runs the timer's load + deliver steps, which append every real message and its
tombstone. Also reports the wheel's size and the rebuild time after a restart with the timers
still pending.

    python bench/timer.py [--timers 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.common.message import Message
from pocketmq.runtime.clock import ManualClock

SEND_BATCH = 100


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=100_000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.timers))), flush=True)


if __name__ == "__main__":
    main()
