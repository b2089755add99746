"""Transactional messages: the SDK's send + commit rate beside a plain send's, and one check round over 100,000
pending half messages.

- ``send``: one ``pocketmq serve`` (ASYNC_FLUSH) this script starts; the synchronous ``Producer.send`` and the
  synchronous ``TransactionProducer.send_in_transaction`` (executor: COMMIT at once), one message at a time,
  1 KiB, in alternating rounds of ``--messages`` each after a warm-up, so both see the same machine. A
  transaction is a half message's send (one round trip) and a oneway END_TRANSACTION, on which the broker reads
  the half record and appends the committed message with its op record. Target: at least 50% of the
  plain rate.
- ``check_round``: an in-process broker on a ManualClock (no network: the checks go to a producer channel that
  encodes each CHECK_TRANSACTION_STATE, as the remoting one does, and drops it), ``--pending`` half messages
  stored; one round that reads them all (a restart's rebuild), then the round in which all are due: the time of
  each; then, traced (tracemalloc), the Python heap the pending table takes and what a round adds to it. Target:
  the round finishes within its interval (RocketMQ's default, 30 s), in memory bounded by the pending messages,
  not by the round.

Prints one JSON line per measurement.

    python bench/transactions.py [--cases send,check_round] [--messages 3000] [--rounds 3] [--pending 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.client import (
    Admin,
    ClientConfig,
    LocalTransactionState,
    Message,
    Producer,
    ProducerOptions,
    TransactionProducer,
)
from pocketmq.common import properties as props
from pocketmq.runtime.clock import ManualClock
from pocketmq.server.remoting_transaction import check_command
from pocketmq.testing.processes import broker_process, process_cpu_s

BODY = b"x" * 1024
TOPIC = "bench_tx"
WARMUP = 500


def _commit(message: Message, arg: object) -> LocalTransactionState:
    return LocalTransactionState.COMMIT


def bench_send(messages: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-tx-") as tmp:
        broker = broker_process(Path(tmp), "bench-tx", extra_args=["--flush", "async"]).start()
        try:
            config = ClientConfig(namesrv_addr=broker.namesrv)
            with Admin(config) as admin:
                admin.create_topic(TOPIC, queues=8)
            with (
                Producer(config, ProducerOptions(group="bench-plain")) as plain,
                TransactionProducer(
                    config,
                    ProducerOptions(group="bench-tx"),
                    executor=_commit,
                    checker=lambda m: LocalTransactionState.COMMIT,
                ) as transactional,
            ):
                cases = {
                    "plain_send": lambda: plain.send(Message(TOPIC, BODY)),
                    "transaction_send_commit": lambda: transactional.send_in_transaction(Message(TOPIC, BODY)),
                }
                for run in cases.values():
                    for _ in range(WARMUP):
                        run()
                rates: dict[str, list[float]] = {name: [] for name in cases}
                for round_no in range(rounds):
                    for name, run in cases.items():
                        start, broker_cpu = time.perf_counter(), process_cpu_s(broker.proc.pid)
                        client_cpu = time.process_time()
                        for _ in range(messages):
                            run()
                        elapsed_s = time.perf_counter() - start
                        rates[name].append(messages / elapsed_s)
                        print(
                            json.dumps(
                                {
                                    "bench": "transactions",
                                    "case": name,
                                    "round": round_no,
                                    "messages": messages,
                                    "seconds": round(elapsed_s, 3),
                                    "msg_per_s": round(messages / elapsed_s),
                                    "broker_cpu_us_per_msg": round(
                                        (process_cpu_s(broker.proc.pid) - broker_cpu) / messages * 1e6
                                    ),
                                    "client_cpu_us_per_msg": round((time.process_time() - client_cpu) / messages * 1e6),
                                }
                            ),
                            flush=True,
                        )
            plain_rate = sum(rates["plain_send"]) / rounds
            tx_rate = sum(rates["transaction_send_commit"]) / rounds
            print(
                json.dumps(
                    {
                        "bench": "transactions",
                        "case": "ratio",
                        "plain_msg_per_s": round(plain_rate),
                        "transaction_msg_per_s": round(tx_rate),
                        "ratio": round(tx_rate / plain_rate, 2),
                        "target_ratio": 0.5,
                    }
                ),
                flush=True,
            )
        finally:
            broker.stop()


class EncodingChannel:
    """A producer channel that builds every CHECK_TRANSACTION_STATE frame, as the remoting one does, and drops it."""

    is_open = True
    writable = True

    def __init__(self) -> None:
        self.checks = 0

    def send_check(self, check) -> bool:
        check_command(check).encode()
        self.checks += 1
        return True


async def _timed_round(service, clock: ManualClock, advance_ms: int) -> float:
    clock.advance(advance_ms)
    start = time.perf_counter()
    await service.run_round()
    return time.perf_counter() - start


async def bench_check_round(pending: int) -> None:
    """Time the rounds (no tracing), then measure the Python heap they need (tracemalloc, a second pass on a
    restarted service: tracing slows Python down several times)."""
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-txcheck-") as tmp:
        clock = ManualClock()
        broker = Broker(BrokerConfig(data_dir=Path(tmp), remoting_port=0), clock=clock)
        channel = EncodingChannel()
        broker.transaction_channels.add_source(lambda group: [channel])
        await broker.start(remoting_port=10911)
        try:
            service = broker.transactions  # its loop runs on the ManualClock: only when this advances it
            await _store_half_messages(broker, clock, pending)
            rebuild_s = await _timed_round(service, clock, 0)
            check_s = await _timed_round(service, clock, 30_000)
            checks = channel.checks
            await service.stop()
            gc.collect()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            await service.start()  # the rebuild, as after a restart
            gc.collect()
            table_bytes = tracemalloc.get_traced_memory()[0] - base
            rebuild_peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.reset_peak()
            before_round = tracemalloc.get_traced_memory()[0]
            await _timed_round(service, clock, 30_000)
            round_extra = tracemalloc.get_traced_memory()[1] - before_round
            tracemalloc.stop()
            print(
                json.dumps(
                    {
                        "bench": "transactions",
                        "case": "check_round",
                        "pending": pending,
                        "rebuild_round_s": round(rebuild_s, 2),
                        "check_round_s": round(check_s, 2),
                        "checks_sent": checks,
                        "checks_per_s": round(checks / check_s),
                        "interval_s": 30,
                        "table_mb": round(table_bytes / 2**20, 1),
                        "table_bytes_per_pending": round(table_bytes / pending),
                        "rebuild_peak_heap_mb": round(rebuild_peak / 2**20, 1),
                        "check_round_extra_heap_mb": round(round_extra / 2**20, 2),
                    }
                ),
                flush=True,
            )
        finally:
            await broker.shutdown()


async def _store_half_messages(broker: Broker, clock: ManualClock, pending: int, batch: int = 500) -> None:
    for start in range(0, pending, batch):
        messages = [
            Message(TOPIC, BODY, {props.TRANSACTION_PREPARED: "true", props.UNIQ_KEY: f"TX{start + i:012d}"})
            for i in range(min(batch, pending - start))
        ]
        await broker.messages.send(messages, topic=TOPIC, producer_group="bench-tx", born_timestamp_ms=clock.now_ms())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="send,check_round")
    parser.add_argument("--messages", type=int, default=3000, help="messages per case and round (default 3000)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of both send cases (default 3)")
    parser.add_argument("--pending", type=int, default=100_000, help="half messages of the check round")
    args = parser.parse_args()
    cases = args.cases.split(",")
    if "send" in cases:
        bench_send(args.messages, args.rounds)
    if "check_round" in cases:
        asyncio.run(bench_check_round(args.pending))


if __name__ == "__main__":
    main()
