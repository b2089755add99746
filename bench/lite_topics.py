"""Lite topics at scale: 100,000 lite topics against 10 normal topics, in one ``pocketmq serve`` run.

One broker (ASYNC_FLUSH) with 10 normal topics and one LITE parent topic, 8 queues each. The SDK's
``AsyncProducer`` sends with 100 sends in flight, 1 KiB bodies, in phases:

- ``normal``: ``--messages`` messages round robin over the 10 normal topics;
- ``lite_create``: ``--lite-topics`` messages, each to a lite topic not seen before (creates them all);
- ``lite_steady``: ``--messages`` messages over the lite topics that exist (round robin);
- ``normal_again``: the normal phase again, with the lite topics held;
- ``restart``: the broker stopped and started on its data directory (the lite index is rebuilt from the
  store): seconds to ready.

Per phase: msg/s, the broker's CPU seconds and its resident memory after the phase (VmRSS, and its two parts:
RssAnon, the heap, and RssFile, pages of mapped store files the kernel can drop), and the number of consume
queue directories on disk (lite topics own none). Prints one JSON line per phase.

``--queue-per-lite N`` measures instead the design not taken, in this process: N consume queues (the store's
``ConsumeQueue``, default segment size) with one unit each, as one queue per lite topic would need: seconds,
resident memory and open files added, and the disk blocks used.

    python bench/lite_topics.py [--lite-topics 100000] [--messages 100000]
    python bench/lite_topics.py --queue-per-lite 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from pocketmq.client import Admin, AsyncProducer, ClientConfig, Message
from pocketmq.common.topic import MessageType
from pocketmq.store.api import StoreConfig
from pocketmq.store.consume_queue import UNIT, ConsumeQueue
from pocketmq.testing.processes import broker_process, process_cpu_s, rss_mib

BODY = b"x" * 1024
QUEUES = 8
IN_FLIGHT = 100
NORMAL_TOPICS = [f"bench_normal_{i}" for i in range(10)]
PARENT = "bench_lite_parent"


def send_all(config: ClientConfig, make, count: int) -> None:
    async def run() -> None:
        async with AsyncProducer(config) as producer:
            turns = iter(range(count))

            async def worker() -> None:
                for i in turns:
                    await producer.send(make(i))

            await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))

    asyncio.run(run())


def normal_message(i: int) -> Message:
    return Message(NORMAL_TOPICS[i % len(NORMAL_TOPICS)], BODY)


def lite_message(lite_topics: int):
    return lambda i: Message.create(PARENT, BODY, lite_topic=f"session-{i % lite_topics}")


def consume_queue_dirs(data_dir: Path) -> int:
    root = data_dir / "consumequeue"
    return sum(1 for topic in root.iterdir() for _ in topic.iterdir()) if root.is_dir() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lite-topics", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=100_000, help="messages of the normal and steady phases")
    parser.add_argument("--queue-per-lite", type=int, help="measure N consume queues instead (see above)")
    args = parser.parse_args()
    if args.queue_per_lite:
        queue_per_lite(args.queue_per_lite)
        return
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-") as tmp:
        workdir = Path(tmp)
        broker = broker_process(
            workdir, "bench", extra_args=["--flush", "async", "--remoting-port", "0", "--namesrv-port", "0"]
        ).start()
        try:
            config = ClientConfig(namesrv_addr=broker.namesrv)
            with Admin(config) as admin:
                for topic in NORMAL_TOPICS:
                    admin.create_topic(topic, queues=QUEUES)
                admin.create_topic(PARENT, queues=QUEUES, message_type=MessageType.LITE)
            pid = broker.proc.pid
            report("start", 0, 0.0, 0.0, pid, workdir)
            phases = [
                ("normal", normal_message, args.messages),
                ("lite_create", lite_message(args.lite_topics), args.lite_topics),
                ("lite_steady", lite_message(args.lite_topics), args.messages),
                ("normal_again", normal_message, args.messages),
            ]
            for name, make, count in phases:
                send_all(config, make, min(count, 1000))  # warm-up (the lite ones create their first topics)
                cpu, start = process_cpu_s(pid), time.perf_counter()
                send_all(config, make, count)
                report(name, count, time.perf_counter() - start, process_cpu_s(pid) - cpu, pid, workdir)
            broker.stop()
            start = time.perf_counter()
            broker.start(timeout_s=300)
            report("restart", 0, time.perf_counter() - start, process_cpu_s(broker.proc.pid), broker.proc.pid, workdir)
        finally:
            broker.stop()


def queue_per_lite(count: int) -> None:
    """Stops early, saying so, when the process runs out of open files (each queue holds its segment open)."""
    units = StoreConfig.consume_queue_segment_units
    rss_before, fds_before = rss_mib(os.getpid()), len(os.listdir("/proc/self/fd"))
    queues: list[ConsumeQueue] = []
    error = None
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-") as tmp:
        start = time.perf_counter()
        try:
            for i in range(count):
                queue = ConsumeQueue(Path(tmp) / f"lite-{i}" / "0", f"lite-{i}", 0, units)
                queues.append(queue)
                queue.put(0, UNIT.pack(1, 100, 0))
        except OSError as exc:
            error = exc.strerror
        seconds = time.perf_counter() - start
        line = {
            "bench": "lite_topics",
            "phase": "queue_per_lite",
            "queues": len(queues),
            "error": error,
            "open_files_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            "seconds": round(seconds, 2),
            "rss_added_mib": round(rss_mib(os.getpid()) - rss_before, 1),
            "open_files_added": len(os.listdir("/proc/self/fd")) - fds_before,
            "disk_mib": round(sum(p.stat().st_blocks for p in Path(tmp).rglob("0000*")) * 512 / 2**20, 1),
            "segment_bytes_each": units * UNIT.size,
        }
        for queue in queues:
            queue.close()
    print(json.dumps(line), flush=True)


def report(phase: str, messages: int, seconds: float, broker_cpu_s: float, pid: int, workdir: Path) -> None:
    line = {
        "bench": "lite_topics",
        "phase": phase,
        "messages": messages,
        "seconds": round(seconds, 2),
        "msg_per_s": round(messages / seconds) if messages else None,
        "broker_cpu_s": round(broker_cpu_s, 2),
        "broker_rss_mib": rss_mib(pid),
        "broker_rss_anon_mib": rss_mib(pid, "RssAnon"),
        "broker_rss_file_mib": rss_mib(pid, "RssFile"),
        "consume_queue_dirs": consume_queue_dirs(workdir / "data"),
    }
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
