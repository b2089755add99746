"""Staged concurrency in scaled time (issue 9): 100 messages in one queue, a listener that works ``--unit-ms``
(20 ms) per message, a pool of 20, consumed by a ``PushConsumer`` from a ``pocketmq serve`` this script starts:

- ``orderly``: an orderly listener, one message at a time (ideal 100 units);
- ``staged``: a ``StagedConcurrentListener`` with stages [10, 20, 70] (ideal 1 + 1 + 4 = 6 units: 70 messages
  on 20 threads take 4 rounds);
- ``concurrent``: a concurrent listener (ideal 5 units).

Each time runs from the first listener start to the last listener end (consumer start-up excluded). Target:
staged within 1.5x of 6 units and at least 10x faster than orderly. Prints one JSON line.

    python bench/staged.py [--unit-ms 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from pocketmq.client import (
    Admin,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    Message,
    Producer,
    PushConsumer,
    PushConsumerOptions,
    StagedConcurrentListener,
)
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

MESSAGES = 100
STAGES = [10, 20, 70]
POOL = 20


class Timed(StagedConcurrentListener):
    """Works ``unit_s`` per message; keeps the first start and last end."""

    def __init__(self, unit_s: float, result):
        self.unit_s = unit_s
        self.result = result
        self.lock = threading.Lock()
        self.count = 0
        self.first_start = float("inf")
        self.last_end = 0.0

    def stage_definitions(self, strategy=None):
        return STAGES

    def consume_message(self, msgs, context):
        start = time.perf_counter()
        time.sleep(self.unit_s)  # the simulated work of one message
        with self.lock:
            self.count += len(msgs)
            self.first_start = min(self.first_start, start)
            self.last_end = max(self.last_end, time.perf_counter())
        return self.result


def run(config: ClientConfig, mode: str, unit_s: float) -> float:
    topic = f"bench_staged_{mode}"
    with Admin(config) as admin:
        admin.create_topic(topic, queues=1)
    with Producer(config) as producer:
        for i in range(MESSAGES):
            producer.send(Message.create(topic, str(i)))
    concurrent = mode == "concurrent"
    listener = Timed(unit_s, ConsumeConcurrentlyStatus.CONSUME_SUCCESS if concurrent else ConsumeOrderlyStatus.SUCCESS)
    consumer = PushConsumer(
        PushConsumerOptions(
            f"bench_staged_{mode}",
            consume_thread_max=POOL,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=MESSAGES,
        ),
        config,
    )
    consumer.subscribe(topic)
    {
        "orderly": consumer.register_orderly_listener,
        "staged": consumer.register_staged_listener,
        "concurrent": consumer.register_listener,
    }[mode](listener)
    consumer.start()
    try:
        wait_until(
            lambda: listener.count >= MESSAGES,
            timeout_s=MESSAGES * unit_s * 3 + 30,
            interval_s=0.01,
            message=f"{mode}: all consumed",
        )
    finally:
        consumer.shutdown()
    return listener.last_end - listener.first_start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit-ms", type=float, default=20.0)
    args = parser.parse_args()
    unit_s = args.unit_ms / 1000
    with tempfile.TemporaryDirectory() as tmp:
        broker = broker_process(Path(tmp), "broker-bench-staged").start()
        try:
            config = ClientConfig(namesrv_addr=broker.namesrv, instance_name="bench-staged")
            seconds = {mode: run(config, mode, unit_s) for mode in ("orderly", "staged", "concurrent")}
        finally:
            broker.stop()
    print(
        json.dumps(
            {
                "unit_ms": args.unit_ms,
                "messages": MESSAGES,
                "stages": STAGES,
                "pool": POOL,
                "orderly_s": round(seconds["orderly"], 3),
                "staged_s": round(seconds["staged"], 3),
                "concurrent_s": round(seconds["concurrent"], 3),
                "staged_units": round(seconds["staged"] / unit_s, 2),
                "orderly_over_staged": round(seconds["orderly"] / seconds["staged"], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
