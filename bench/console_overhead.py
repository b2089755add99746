"""What an open console tab and tracing at the default sampling cost one-at-a-time sends (docs/console.md, trace.md).

Two ``pocketmq serve`` processes, each with its own data directory and embedded name server:

- ``plain``: no console port, ``trace_enabled=false``;
- ``console``: ``--console-port``, tracing on at the default ``trace_sample_ratio`` (0.01), and while its sends
  are measured a poller does what three open browser tabs do: it loads the cluster, topics and group pages,
  then fetches the fragments they poll at the pages' htmx intervals (``/fragments/cluster`` every 5 s,
  ``/fragments/topics`` every 10 s, ``/fragments/groups/GROUP`` every 5 s);
- ``trace`` (with ``--modes plain,trace,console``): tracing on at the default ratio, no console: what of the
  difference is the tracer's.

``--rounds`` times, on fresh brokers each round, in turn (the order rotates each round, so a drift in the
machine's load hits every mode alike), the SDK's synchronous ``Producer.send`` sends
``--messages`` 1 KiB messages one at a time to the broker under test, after a warm-up; enough that a measurement
spans several polls. Prints one JSON line per measurement (msg/s, broker CPU µs per message, the polls made),
then the medians of both and their ratio (the console's rule: at least 0.95).

    python bench/console_overhead.py [--messages 15000] [--rounds 6] [--modes plain,console]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from pocketmq.client import Admin, ClientConfig, Message, Producer
from pocketmq.testing.processes import PocketProcess, broker_process, process_cpu_s

BODY = b"x" * 1024
TOPIC = "bench_console_overhead"
GROUP = "bench-console-overhead"
QUEUES = 8
WARMUP_MESSAGES = 500
MIN_RATIO = 0.95
PAGES = ["/cluster", "/topics", f"/groups/{GROUP}"]
POLLS_S = {"/fragments/cluster": 5, "/fragments/topics": 10, f"/fragments/groups/{GROUP}": 5}  # as in pages.py


class TabPoller:
    """Three open console tabs, in a process of their own as a browser is (a thread of this one would change how
    the sending process is scheduled): page loads, then each live fragment at its interval."""

    def __init__(self, base_url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._results: multiprocessing.Queue = context.Queue()
        self._process = context.Process(target=poll_tabs, args=(base_url, self._stop, self._results), daemon=True)
        self.request_ms: list[float] = []

    def __enter__(self) -> TabPoller:
        self._process.start()
        assert self._results.get(timeout=60) == "pages loaded"  # the tabs are open before the sends start
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.request_ms = self._results.get(timeout=60)
        self._process.join()


def poll_tabs(base_url: str, stop, results) -> None:
    """The poller process: puts "pages loaded" to ``results``, then polls until ``stop`` is set and puts the time
    in ms of each fragment request."""
    request_ms: list[float] = []

    async def get(session: aiohttp.ClientSession, path: str) -> None:
        start = time.perf_counter()
        async with session.get(base_url + path) as response:
            await response.read()
            assert response.status == 200, (path, response.status)
        request_ms.append((time.perf_counter() - start) * 1000)

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            for path in PAGES:
                await get(session, path)
            request_ms.clear()
            results.put("pages loaded")
            due_s = dict.fromkeys(POLLS_S, time.monotonic())  # htmx loads each fragment at once ("load, every")
            while not stop.is_set():
                for path, every_s in POLLS_S.items():
                    if time.monotonic() >= due_s[path]:
                        await get(session, path)
                        due_s[path] += every_s
                await asyncio.to_thread(stop.wait, max(0.0, min(due_s.values()) - time.monotonic()))

    asyncio.run(run())
    results.put(request_ms)


def send_one_at_a_time(config: ClientConfig, messages: int) -> None:
    with Producer(config) as producer:
        for _ in range(messages):
            producer.send(Message(TOPIC, BODY))


def measure(broker: PocketProcess, messages: int, mode: str) -> dict:
    console = mode == "console"
    config = ClientConfig(namesrv_addr=broker.namesrv)
    send_one_at_a_time(config, WARMUP_MESSAGES)
    poller = TabPoller(broker.address("console")) if console else None
    if poller:
        poller.__enter__()
    try:
        start_s, broker_cpu_s = time.perf_counter(), process_cpu_s(broker.pid)
        send_one_at_a_time(config, messages)
        elapsed_s = time.perf_counter() - start_s
        broker_cpu_s = process_cpu_s(broker.pid) - broker_cpu_s
    finally:
        if poller:
            poller.__exit__()
    row = {
        "bench": "console_overhead",
        "mode": mode,
        "messages": messages,
        "seconds": round(elapsed_s, 3),
        "msg_per_s": round(messages / elapsed_s),
        "broker_cpu_us_per_msg": round(broker_cpu_s / messages * 1e6, 1),
    }
    if poller:
        row["console_requests"] = len(poller.request_ms)
        row["console_request_ms_max"] = round(max(poller.request_ms), 1)
    return row


MODE_ARGS = {
    "plain": ["--set", "trace_enabled=false"],
    "trace": [],  # tracing: on by default, at the default ratio
    "console": ["--console-port", "0"],
}


def start_broker(workdir: Path, mode: str, busy_poll_us: int | None) -> PocketProcess:
    extra = MODE_ARGS[mode] + ([] if busy_poll_us is None else ["--busy-poll-us", str(busy_poll_us)])
    broker = broker_process(workdir / mode, "bench", extra_args=extra).start()
    with Admin(ClientConfig(namesrv_addr=broker.namesrv)) as admin:
        admin.create_topic(TOPIC, queues=QUEUES)
        admin.create_group(GROUP)
    return broker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=15_000, help="messages per measurement (default 15000)")
    parser.add_argument("--rounds", type=int, default=6, help="measurements of each mode (default 6)")
    parser.add_argument("--modes", default="plain,console", help="of plain, trace, console (default plain,console)")
    parser.add_argument(
        "--busy-poll-us",
        type=int,
        help="the brokers' --busy-poll-us (default: theirs); 0 keeps polling's spinning out of the CPU per message",
    )
    args = parser.parse_args()
    modes = args.modes.split(",")
    if not {"plain", "console"} <= set(modes) <= set(MODE_ARGS):
        parser.error("--modes: plain and console, and optionally trace")
    rows: dict[str, list[dict]] = {mode: [] for mode in modes}
    for round_no in range(args.rounds):
        shift = round_no % len(modes)
        order = modes[shift:] + modes[:shift]
        with tempfile.TemporaryDirectory(prefix="pocketmq-bench-") as tmp:
            # fresh brokers each round, started in the order they are measured: a process kept over the rounds
            # keeps whatever the scheduler gave it at start, which moved one mode's figures by tens of percent
            brokers = {mode: start_broker(Path(tmp), mode, args.busy_poll_us) for mode in order}
            try:
                for mode in order:
                    row = measure(brokers[mode], args.messages, mode)
                    rows[mode].append(row)
                    print(json.dumps({"round": round_no, **row}), flush=True)
            finally:
                for broker in brokers.values():
                    broker.stop()
    medians = {
        mode: {
            "msg_per_s": statistics.median(r["msg_per_s"] for r in mode_rows),
            "broker_cpu_us_per_msg": statistics.median(r["broker_cpu_us_per_msg"] for r in mode_rows),
        }
        for mode, mode_rows in rows.items()
    }
    ratio = medians["console"]["msg_per_s"] / medians["plain"]["msg_per_s"]
    # each round's own ratio too: its two measurements ran a minute apart, under much the same load
    round_ratios = [c["msg_per_s"] / p["msg_per_s"] for p, c in zip(rows["plain"], rows["console"])]
    summary = {
        "medians": medians,
        "throughput_ratio": round(ratio, 3),
        "median_round_ratio": round(statistics.median(round_ratios), 3),
        "ok": ratio >= MIN_RATIO,
    }
    print(json.dumps({"bench": "console_overhead", "summary": summary}), flush=True)


if __name__ == "__main__":
    main()
