"""The soak (``make soak``): a real broker under a steady mixed load for a while, its memory sampled over time.

Load, from this process through the SDK: ``--rate`` sends a second of 1 KiB messages (each with its message id,
which the broker indexes) to an 8-queue topic; a pull consumer group reading every queue with long polls and
committing its offsets; a POP group receiving and acking (in batches, and one by one). Retention is short
(``--retention-s``, small commit log segments) so that everything that grows with stored messages (the message-id
index, consume queues) reaches its steady state within the warm-up.

Every ``--sample-s`` one line: minute, broker RSS, messages sent, pulled, popped and acked. After the run: the
RSS at the end of the warm-up, the mean of the last three samples, their difference and the slope after the
warm-up (least squares, MiB per minute). The run fails (exit 1) when the difference passes ``--max-growth-mib``,
or when the load stalled (a phase with no progress) or errors passed 1%.

    python -m pocketmq.testing.soak [--minutes 30] [--rate 500] [--sample-s 10] [--max-growth-mib 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.client import (
    AsyncProducer,
    AsyncPullConsumer,
    AsyncSimpleConsumer,
    ClientConfig,
    Message,
    ProducerOptions,
)
from pocketmq.client.pull_consumer import PullStatus
from pocketmq.testing.processes import broker_process

TOPIC = "soak"
BODY = b"s" * 1024
MIB = 1024 * 1024


@dataclass
class Progress:
    sent: int = 0
    pulled: int = 0
    popped: int = 0
    acked: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        kind = type(exc).__name__
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def growth_verdict(samples: list[tuple[float, int]], warmup_s: float, max_growth_bytes: int) -> tuple[bool, int, float]:
    """(within the bound, growth in bytes after the warm-up, slope in bytes per minute) of (seconds, RSS) samples.

    Growth: the mean of the last three samples minus the last sample of the warm-up (a single high sample at the
    end does not fail a run, a steady climb does)."""
    after = [(t, rss) for t, rss in samples if t >= warmup_s]
    before = [rss for t, rss in samples if t < warmup_s]
    if len(after) < 3 or not before:
        raise ValueError("too few samples after the warm-up: run longer or sample more often")
    tail = [rss for _, rss in after[-3:]]
    growth = int(sum(tail) / len(tail)) - before[-1]
    mean_t = sum(t for t, _ in after) / len(after)
    mean_rss = sum(rss for _, rss in after) / len(after)
    var_t = sum((t - mean_t) ** 2 for t, _ in after)
    slope_per_s = sum((t - mean_t) * (rss - mean_rss) for t, rss in after) / var_t if var_t else 0.0
    return growth <= max_growth_bytes, growth, slope_per_s * 60


async def produce(config: ClientConfig, rate: int, stop: asyncio.Event, progress: Progress) -> None:
    async with AsyncProducer(config, ProducerOptions(group="soak-producer")) as producer:
        tick_s = 0.05
        per_tick = max(1, round(rate * tick_s))
        next_tick = time.monotonic()
        while not stop.is_set():
            outcomes = await asyncio.gather(
                *(producer.send(Message(TOPIC, BODY)) for _ in range(per_tick)), return_exceptions=True
            )
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    progress.failed(outcome)
                else:
                    progress.sent += 1
            next_tick += tick_s
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))


async def pull(config: ClientConfig, stop: asyncio.Event, progress: Progress) -> None:
    async with AsyncPullConsumer("soak-pull", config) as consumer:
        queues = await consumer.fetch_queues(TOPIC)
        offsets = {q: 0 for q in queues}
        while not stop.is_set():
            for queue in queues:
                try:
                    result = await consumer.pull(queue, offsets[queue], 32, long_poll_ms=200)
                    if result.status is PullStatus.FOUND:
                        progress.pulled += len(result.messages)
                    offsets[queue] = result.next_begin_offset
                    await consumer.commit(queue, offsets[queue])
                except Exception as exc:  # counted; the soak judges the error share
                    progress.failed(exc)


async def pop(config: ClientConfig, stop: asyncio.Event, progress: Progress) -> None:
    async with AsyncSimpleConsumer("soak-pop", {TOPIC: "*"}, config) as consumer:
        single = True
        while not stop.is_set():
            try:
                messages = await consumer.receive(32, 30_000, await_duration_ms=500)
                progress.popped += len(messages)
                if single and messages:  # every other round acks one by one, the others in one BATCH_ACK
                    for message in messages:
                        await consumer.ack(message)
                elif messages:
                    await consumer.ack_batch(messages)
                progress.acked += len(messages)
                single = not single
            except Exception as exc:
                progress.failed(exc)


async def soak(args: argparse.Namespace, workdir: Path) -> int:
    retention_hours = args.retention_s / 3600
    proc = broker_process(
        workdir,
        "soak",
        extra_args=[
            "--set",
            f"file_reserved_hours={retention_hours}",
            "--set",
            "cleanup_interval_ms=2000",
            "--set",
            f"commit_log_segment_bytes={4 * MIB}",
            "--set",
            "consume_queue_segment_units=20000",
        ],
    ).start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        progress, stop = Progress(), asyncio.Event()
        load = [
            asyncio.create_task(coro)
            for coro in (
                produce(config, args.rate, stop, progress),
                pull(config, stop, progress),
                pop(config, stop, progress),
            )
        ]
        duration_s, warmup_s = args.minutes * 60, args.warmup_minutes * 60
        samples: list[tuple[float, int]] = []
        started = time.monotonic()
        last_sent = -1
        stalled = False
        print(
            f"soak: {args.minutes} min at {args.rate} sends/s, warm-up {args.warmup_minutes} min, retention "
            f"{args.retention_s} s, broker pid {proc.pid}",
            flush=True,
        )
        print("minute  rss_mib  sent  pulled  popped  acked  errors", flush=True)
        while (elapsed := time.monotonic() - started) < duration_s:
            await asyncio.sleep(min(args.sample_s, max(0.0, duration_s - elapsed)))
            elapsed = time.monotonic() - started
            rss = rss_bytes(proc.pid)
            samples.append((elapsed, rss))
            print(
                f"{elapsed / 60:6.2f}  {rss / MIB:7.1f}  {progress.sent}  {progress.pulled}  {progress.popped}  "
                f"{progress.acked}  {progress.errors}",
                flush=True,
            )
            stalled = stalled or progress.sent == last_sent
            last_sent = progress.sent
            for task in load:
                if task.done():
                    raise RuntimeError(f"a load task ended: {task.exception()!r}")
        stop.set()
        await asyncio.wait(load, timeout=10)
    finally:
        proc.stop()
    within, growth, slope = growth_verdict(samples, warmup_s, args.max_growth_mib * MIB)
    total = progress.sent + progress.pulled + progress.popped
    error_share = progress.errors / max(1, total)
    print(
        f"soak: RSS after warm-up {[r for t, r in samples if t < warmup_s][-1] / MIB:.1f} MiB, growth since "
        f"{growth / MIB:+.1f} MiB (bound {args.max_growth_mib} MiB), slope {slope / MIB:+.2f} MiB/min; "
        f"errors {progress.errors} ({error_share:.2%}) {progress.error_kinds}",
        flush=True,
    )
    ok = within and not stalled and error_share <= 0.01 and progress.pulled > 0 and progress.acked > 0
    print("soak: PASS" if ok else "soak: FAIL" + (" (the load stalled)" if stalled else ""), flush=True)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", 30)))
    parser.add_argument("--warmup-minutes", type=float, help="default: a third of the run, at most 5")
    parser.add_argument("--rate", type=int, default=500, help="sends per second")
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument("--retention-s", type=float, help="commit log retention; default: half the warm-up")
    parser.add_argument("--max-growth-mib", type=float, default=16.0)
    parser.add_argument("--data-dir", help="default: a temporary directory, removed afterwards")
    args = parser.parse_args(argv)
    args.warmup_minutes = args.warmup_minutes or min(5.0, args.minutes / 3)
    args.retention_s = args.retention_s or args.warmup_minutes * 30
    if args.data_dir:
        return asyncio.run(soak(args, Path(args.data_dir)))
    with tempfile.TemporaryDirectory(prefix="pocketmq-soak-") as tmp:
        return asyncio.run(soak(args, Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
