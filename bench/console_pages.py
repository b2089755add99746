"""How fast the web console's pages and API answer with many topics and groups (docs/console.md).

A real ``pocketmq serve --console-port`` process; ``--topics`` topics (4 queues each) and ``--groups`` groups are
created through the admin client, a few messages sent, and then each page, fragment and API call is fetched
``--rounds`` times over one keep-alive connection. Prints the median and worst time of each, in ms, and
whether the worst is under the budget (300 ms for a page).

    python bench/console_pages.py [--topics 1000] [--groups 100] [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.config import ClientConfig
from pocketmq.client.producer import AsyncProducer
from pocketmq.common.message import Message
from pocketmq.testing.processes import broker_process

BUDGET_MS = 300.0
PATHS = [
    "/cluster",
    "/fragments/cluster",
    "/topics",
    "/fragments/topics",
    "/fragments/topics/bench_t0",
    "/groups",
    "/fragments/groups",
    "/fragments/groups/bench-g0",
    "/messages?topic=bench_t0&key=k0",
    "/config",
    "/api/cluster",
    "/api/topics",
    "/api/groups",
    "/api/groups/bench-g0",
]


async def populate(namesrv: str, topics: int, groups: int) -> None:
    # a topic change persists the topic table: thousands of them take a while, so the requests may wait long
    config = ClientConfig(namesrv_addr=namesrv, instance_name="bench-console", request_timeout_s=60)
    async with AsyncAdmin(config) as admin:
        for start in range(0, topics, 10):
            await asyncio.gather(
                *(
                    admin.create_topic(f"bench_t{i}", queues=4, route_wait_s=0)
                    for i in range(start, min(topics, start + 10))
                )
            )
        for start in range(0, groups, 50):
            await asyncio.gather(*(admin.create_group(f"bench-g{i}") for i in range(start, min(groups, start + 50))))
    async with AsyncProducer(config) as producer:
        for i in range(20):
            await producer.send(Message.create("bench_t0", f"m{i}", keys=f"k{i % 3}"))


async def measure(base: str, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {path: [] for path in PATHS}
    async with aiohttp.ClientSession() as session:
        for _ in range(rounds):
            for path in PATHS:
                start = time.perf_counter()
                async with session.get(base + path) as response:
                    await response.read()
                    assert response.status == 200, (path, response.status)
                times[path].append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        broker = broker_process(Path(workdir), "broker-bench", extra_args=["--console-port", "0"]).start()
        try:
            started = time.perf_counter()
            asyncio.run(populate(broker.namesrv, args.topics, args.groups))
            print(f"created {args.topics} topics and {args.groups} groups in {time.perf_counter() - started:.1f} s")
            times = asyncio.run(measure(broker.address("console"), args.rounds))
        finally:
            broker.stop()
    rows = {
        path: {"median_ms": round(statistics.median(t), 1), "worst_ms": round(max(t), 1), "ok": max(t) < BUDGET_MS}
        for path, t in times.items()
    }
    width = max(map(len, rows))
    for path, row in rows.items():
        print(f"{path:<{width}}  median {row['median_ms']:>7.1f} ms  worst {row['worst_ms']:>7.1f} ms  "
              f"{'ok' if row['ok'] else 'OVER ' + str(BUDGET_MS)}")  # fmt: skip
    print(json.dumps({"topics": args.topics, "groups": args.groups, "pages": rows}))


if __name__ == "__main__":
    main()
