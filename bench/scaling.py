"""Scaling: a real ``pocketmq serve``'s memory per topic, queue, in-flight POP message and pending timer, and its
produce throughput against concurrent producers.

Each case starts its own broker (ASYNC_FLUSH) and prints one JSON line per step:

- ``topics``: empty topics of 8 queues created through the SDK's ``AsyncAdmin`` (4 creates in flight; it has no
  batch create), up to each of ``--topics`` (10, 1,000; 10,000 take minutes).
- ``topics_seeded``: for 0 and each of ``--seeded-topics`` (10, 1,000, 10,000), a broker started on a data
  directory whose topic table already holds that many such topics (the same entries in memory as creates make).
- ``topic_create`` (not in the default cases): on such a broker, ``--creates`` (200) more topics created one at
  a time: the median and p99 milliseconds of a create against the table's size.
- ``pop``: ``max(--pop)`` messages of 128 B sent first, then popped by two ``AsyncSimpleConsumer``s with an
  invisible time of one hour and never acked, up to each of ``--pop`` in flight (10,000, 100,000).
- ``revive``: ``--revive`` messages of 128 B popped by two ``AsyncSimpleConsumer``s with an invisible time of
  ``--revive-invisible-s`` and never acked: the seconds from the last one's due time until revive has handed
  every one back (``pocketmq_pop_revive_messages_total``: each a retry copy to pop again), the broker's CPU per
  message over that time, and its memory before and after.
- ``timers``: messages of 128 B whose delivery time is one hour ahead, up to each of ``--timers`` pending
  (100,000; ``--large`` adds 1,000,000); then a clean stop and a start on the same data directory: seconds from
  the start to ready (the process starts from a standby that has imported the broker: interpreter start-up and
  imports, about a second, are not in it), the broker's own start, the store's recovery and the timer's rebuild
  (from its log), and the memory once settled after it; ``timers_crash_restart`` starts after a kill -9, from
  the wheel the broker saved while the timers arrived and the records after it, ``timers_restart`` after a clean
  stop from the wheel saved at the stop, ``timers_restart_rebuild`` (stopped again, the saved wheel removed)
  reads every timer record back. The case's first line is a clean restart with no timer pending, to compare.
- ``backlog``: ``--backlog`` messages of 128 B sent (1,000,000; ``--backlog 10000000`` for ten million), a clean
  stop, the page cache dropped where the kernel allows it (root on Linux; the line says whether it was), a start
  on the same data directory, then all of them popped and acked in batches by two ``AsyncSimpleConsumer``s:
  messages a second over each tenth of the backlog (the first tenths read cold from the disk, unless the cache
  could not be dropped), the broker's CPU per message, and its memory at the end. With ``--backlog-window N``
  it consumes windows instead of everything (ten million take hours to pop): at the start of each tenth, a new
  group's offsets are reset to the time that tenth's sends began, the page cache is dropped, and the group pops
  and acks N messages: the throughput of cold reads at each depth of the backlog.
- ``producers``: for each of ``--producers`` (1, 10, 100), that many ``AsyncProducer``s (each its own client
  instance and connection) send 1 KiB messages one at a time for ``--seconds``: messages a second, the broker's
  CPU per message and its memory at the end, with the producers connected.

Memory is read from /proc/<pid>/status once the broker has settled (its heap steady and its CPU under 5% of a
core over two half-second samples: background work and garbage collection done): VmRSS, and its parts RssAnon
(the heap) and RssFile (mapped pages of the store's files, which the kernel can drop). A per-item figure is the
growth of VmRSS (and of RssAnon) from the case's first line, divided by the items added since.

    python bench/scaling.py [--cases topics,topics_seeded,topic_create,pop,timers,producers,revive,backlog]
                            [--topics 10,1000] [--creates 200]
                            [--seeded-topics 10,1000,10000] [--pop 10000,100000] [--revive 100000] [--backlog N]
                            [--backlog-window N]
                            [--revive-invisible-s 60] [--timers 100000] [--large]
                            [--producers 1,10,100] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.timer.snapshot import SNAPSHOT_FILE
from pocketmq.broker.topics import topic_config_to_json
from pocketmq.client import Admin, AsyncAdmin, AsyncProducer, AsyncSimpleConsumer, ClientConfig, Message
from pocketmq.client.consumer_admin import ConsumerAdmin
from pocketmq.common.properties import TIMER_DELIVER_MS
from pocketmq.common.topic import TopicConfig
from pocketmq.runtime.files import atomic_write_json
from pocketmq.testing.processes import PocketProcess, broker_process, process_cpu_s, rss_mib
from pocketmq.testing.scrape import metric

QUEUES = 8
CREATES_IN_FLIGHT = 4
CREATE_TIMEOUT_S = 120.0  # each create rewrites the whole topic table: slow with thousands, on a loaded machine
SENDS_IN_FLIGHT = 8
SEND_BATCH = 100
SMALL_BODY = b"x" * 128
BODY = b"x" * 1024
POP_TOPIC = "bench_scaling_pop"
POP_GROUP = "bench_scaling_pop_group"
POP_CONSUMERS = 2
POP_BATCH = 32
INVISIBLE_MS = 3_600_000
REVIVE_PATIENCE_S = 600  # the revive case gives up this long after the last due time
TIMER_TOPIC = "bench_scaling_timer"
TIMER_AHEAD_MS = 3_600_000
PRODUCE_TOPIC = "bench_scaling_produce"
SETTLE_INTERVAL_S = 0.5
SETTLE_QUIET_SAMPLES = 2
SETTLE_IDLE_CORE_SHARE = 0.05
SETTLE_TIMEOUT_S = 120.0


@contextmanager
def running_broker(seeded_topics: int = 0) -> Iterator[PocketProcess]:
    """A broker on a fresh data directory; with ``seeded_topics``, its topic table holds that many topics when
    it starts."""
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-") as tmp:
        proc = broker_process(Path(tmp), "bench-scaling", extra_args=["--flush", "async", "--metrics-port", "0"])
        if seeded_topics:
            seed_topic_table(Path(tmp) / "data", seeded_topics)
        proc.start(timeout_s=300)
        try:
            yield proc
        finally:
            proc.stop()


def settled_memory(pid: int) -> dict:
    """The broker's memory once its heap is steady and its CPU near idle (or after SETTLE_TIMEOUT_S, saying so)."""
    started = time.monotonic()
    anon, cpu_s, quiet = rss_mib(pid, "RssAnon"), process_cpu_s(pid), 0
    while quiet < SETTLE_QUIET_SAMPLES and time.monotonic() - started < SETTLE_TIMEOUT_S:
        time.sleep(SETTLE_INTERVAL_S)
        now_anon, now_cpu_s = rss_mib(pid, "RssAnon"), process_cpu_s(pid)
        steady = abs(now_anon - anon) <= max(0.5, anon * 0.005)
        idle = now_cpu_s - cpu_s < SETTLE_IDLE_CORE_SHARE * SETTLE_INTERVAL_S
        quiet = quiet + 1 if steady and idle else 0
        anon, cpu_s = now_anon, now_cpu_s
    return {
        "rss_mib": rss_mib(pid),
        "rss_anon_mib": rss_mib(pid, "RssAnon"),
        "rss_file_mib": rss_mib(pid, "RssFile"),
        "settle_s": round(time.monotonic() - started, 1),
        "settled": quiet >= SETTLE_QUIET_SAMPLES,
    }


def per_item(memory: dict, baseline: dict, items: int, name: str, unit: str) -> dict:
    """Growth of VmRSS and of RssAnon from ``baseline`` per ``name`` added (``items`` of them), in ``unit``
    (KiB or bytes)."""
    scale = 1024 if unit == "kib" else 1024 * 1024
    if items <= 0:
        return {}
    return {
        f"{figure}_{unit}_per_{name}": round((memory[f"{figure}_mib"] - baseline[f"{figure}_mib"]) * scale / items, 2)
        for figure in ("rss", "rss_anon")
    }


def emit(case: str, **fields) -> dict:
    line = {"bench": "scaling", "case": case, **fields}
    print(json.dumps(line), flush=True)
    return line


async def send_batches(config: ClientConfig, make, start: int, stop: int) -> None:
    """Messages ``make(i)`` for i in [start, stop), SEND_BATCH a send, SENDS_IN_FLIGHT sends in flight."""
    starts = iter(range(start, stop, SEND_BATCH))
    async with AsyncProducer(config) as producer:

        async def worker() -> None:
            for first in starts:
                await producer.send_batch([make(i) for i in range(first, min(stop, first + SEND_BATCH))])

        await asyncio.gather(*(worker() for _ in range(SENDS_IN_FLIGHT)))


# -- topics ------------------------------------------------------------------------------------------------------------
async def create_topics(config: ClientConfig, start: int, stop: int) -> None:
    names = iter(range(start, stop))
    admin = AsyncAdmin(config)
    await admin.start()
    try:

        async def worker() -> None:
            for i in names:
                await admin.create_topic(topic_name(i), queues=QUEUES)

        await asyncio.gather(*(worker() for _ in range(CREATES_IN_FLIGHT)))
    finally:
        await admin.shutdown()


def topic_name(n: int) -> str:
    return f"bench_scaling_topic_{n}"


def seed_topic_table(data_dir: Path, count: int) -> None:
    """Write a topic table of ``count`` topics where the broker keeps it, as ``count`` creates would leave it."""
    path = BrokerConfig(data_dir=data_dir).metadata_dir() / "topics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    table = {topic_name(n): topic_config_to_json(TopicConfig(topic_name(n), QUEUES, QUEUES)) for n in range(count)}
    atomic_write_json(path, {"topicConfigTable": table, "dataVersion": count})


def topics_case(steps: list[int]) -> None:
    with running_broker() as proc:
        config = ClientConfig(namesrv_addr=proc.namesrv, request_timeout_s=CREATE_TIMEOUT_S)
        baseline = emit("topics", topics=0, queues=0, **settled_memory(proc.pid))
        created = 0
        for target in steps:
            started = time.perf_counter()
            asyncio.run(create_topics(config, created, target))
            create_s, created = time.perf_counter() - started, target
            memory = settled_memory(proc.pid)
            emit(
                "topics",
                topics=created,
                queues=created * QUEUES,
                create_s=round(create_s, 1),
                **memory,
                **per_topic_and_queue(memory, baseline, created),
            )


def seeded_topics_case(steps: list[int]) -> None:
    baseline = None
    for count in [0, *steps]:
        started = time.perf_counter()
        with running_broker(seeded_topics=count) as proc:
            ready_s = time.perf_counter() - started
            memory = settled_memory(proc.pid)
        baseline = baseline or memory
        emit(
            "topics_seeded",
            topics=count,
            queues=count * QUEUES,
            ready_s=round(ready_s, 2),
            **memory,
            **per_topic_and_queue(memory, baseline, count),
        )


async def time_creates(config: ClientConfig, first: int, creates: int) -> list[float]:
    """Milliseconds of each of ``creates`` topic creates, one at a time."""
    admin = AsyncAdmin(config)
    await admin.start()
    try:
        times_ms = []
        for n in range(first, first + creates):
            started = time.perf_counter()
            await admin.create_topic(topic_name(n), queues=QUEUES)
            times_ms.append((time.perf_counter() - started) * 1000)
        return times_ms
    finally:
        await admin.shutdown()


def topic_create_case(steps: list[int], creates: int) -> None:
    for count in [0, *steps]:
        with running_broker(seeded_topics=count) as proc:
            config = ClientConfig(namesrv_addr=proc.namesrv, request_timeout_s=CREATE_TIMEOUT_S)
            times_ms = sorted(asyncio.run(time_creates(config, count, creates)))
        emit(
            "topic_create",
            topics=count,
            creates=creates,
            median_ms=round(times_ms[len(times_ms) // 2], 2),
            p99_ms=round(times_ms[min(len(times_ms) - 1, len(times_ms) * 99 // 100)], 2),
        )


def per_topic_and_queue(memory: dict, baseline: dict, topics: int) -> dict:
    return {
        **per_item(memory, baseline, topics, "topic", "kib"),
        **per_item(memory, baseline, topics * QUEUES, "queue", "kib"),
    }


# -- POP messages in flight --------------------------------------------------------------------------------------------
async def pop_until(config: ClientConfig, count: int, invisible_ms: int = INVISIBLE_MS) -> int:
    """Pop ``count`` messages (never acked) with an invisible time of ``invisible_ms``; the number popped."""
    popped = asked = 0  # asked: popped, or asked for by a receive under way (no consumer asks beyond ``count``)

    async def loop(client: AsyncSimpleConsumer) -> None:
        nonlocal popped, asked
        while asked < count:
            wanted = min(POP_BATCH, count - asked)
            asked += wanted
            got = await client.receive(wanted, invisible_ms, await_duration_ms=1000)
            popped += len(got)
            asked -= wanted - len(got)
            if not got:
                return  # the topic holds no more visible messages

    await with_consumers(config, POP_GROUP, POP_TOPIC, loop)
    return popped


async def with_consumers(config: ClientConfig, group: str, topic: str, loop) -> None:
    """Run ``loop(consumer)`` on POP_CONSUMERS started ``AsyncSimpleConsumer``s of ``group`` on ``topic`` at
    once, then shut them down."""
    clients = [AsyncSimpleConsumer(group, {topic: "*"}, config) for _ in range(POP_CONSUMERS)]
    for client in clients:
        await client.start()
    try:
        await asyncio.gather(*(loop(c) for c in clients))
    finally:
        for client in clients:
            await client.shutdown()


def pop_case(steps: list[int]) -> None:
    with running_broker() as proc:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        with Admin(config) as admin:
            admin.create_topic(POP_TOPIC, queues=QUEUES)
        asyncio.run(send_batches(config, lambda i: Message(POP_TOPIC, SMALL_BODY), 0, max(steps)))
        baseline = emit("pop", in_flight=0, stored=max(steps), **settled_memory(proc.pid))
        in_flight = 0
        for target in steps:
            started = time.perf_counter()
            in_flight += asyncio.run(pop_until(config, target - in_flight))
            pop_s = time.perf_counter() - started
            memory = settled_memory(proc.pid)
            emit(
                "pop",
                in_flight=in_flight,
                pop_s=round(pop_s, 1),
                **memory,
                **per_item(memory, baseline, in_flight, "message", "bytes"),
            )


def revive_case(count: int, invisible_s: float) -> None:
    with running_broker() as proc:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        with Admin(config) as admin:
            admin.create_topic(POP_TOPIC, queues=QUEUES)
        asyncio.run(send_batches(config, lambda i: Message(POP_TOPIC, SMALL_BODY), 0, count))
        baseline = emit("revive", in_flight=0, stored=count, **settled_memory(proc.pid))
        started = time.perf_counter()
        popped = asyncio.run(pop_until(config, count, int(invisible_s * 1000)))
        pop_s = time.perf_counter() - started
        last_due = time.monotonic() + invisible_s
        memory = settled_memory(proc.pid)
        emit("revive", in_flight=popped, pop_s=round(pop_s, 1), **memory)

        def revived() -> int:
            return int(metric(proc, "pocketmq_pop_revive_messages_total", group=POP_GROUP))

        cpu_s = process_cpu_s(proc.pid)
        while revived() < popped:  # revive's own pace is what is measured: polled each 100 ms
            if time.monotonic() > last_due + REVIVE_PATIENCE_S:
                break
            time.sleep(0.1)
        done = time.monotonic()
        handed_back, revive_cpu_s = revived(), process_cpu_s(proc.pid) - cpu_s
        memory = settled_memory(proc.pid)
        emit(
            "revive",
            revived=handed_back,
            seconds_after_last_due=round(done - last_due, 1),
            broker_cpu_us_per_message=round(revive_cpu_s / max(handed_back, 1) * 1e6),
            **memory,
            **per_item(memory, baseline, handed_back, "message", "bytes"),
        )


# -- a deep backlog ----------------------------------------------------------------------------------------------------
BACKLOG_TOPIC = "bench_scaling_backlog"
BACKLOG_GROUP = "bench_scaling_backlog_group"
BACKLOG_TENTHS = 10


def drop_page_cache() -> bool:
    """Write back and drop the kernel's clean page cache (root on Linux), so the reads that follow come from the
    disk; whether the kernel took the request."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


async def consume_backlog(config: ClientConfig, group: str, count: int, pid: int, *, marks: int) -> list[dict]:
    """Pop and ack ``count`` messages of ``group`` (POP_CONSUMERS consumers, batches of POP_BATCH, each batch's
    ack awaited): messages a second, the broker's CPU per message and the lowest queue offset popped over each of
    ``marks`` equal parts."""
    part = max(1, count // marks)
    consumed, parts, lowest_offset = 0, [], None
    mark_consumed, mark_s, mark_cpu_s = 0, time.perf_counter(), process_cpu_s(pid)

    async def loop(client: AsyncSimpleConsumer) -> None:
        nonlocal consumed, mark_consumed, mark_s, mark_cpu_s, lowest_offset
        while consumed < count:
            got = await client.receive(POP_BATCH, 60_000, await_duration_ms=1000)
            if not got:
                return  # the topic holds no more visible messages
            await client.ack_batch(got)
            consumed += len(got)
            lowest = min(message.queue_offset for message in got)
            lowest_offset = lowest if lowest_offset is None else min(lowest, lowest_offset)
            if consumed >= part * (len(parts) + 1):
                now_s, cpu_s, done = time.perf_counter(), process_cpu_s(pid), consumed - mark_consumed
                parts.append(
                    {
                        "consumed": consumed,
                        "msg_per_s": round(done / (now_s - mark_s)),
                        "broker_cpu_us_per_msg": round((cpu_s - mark_cpu_s) / done * 1e6),
                        "lowest_queue_offset": lowest_offset,
                    }
                )
                mark_consumed, mark_s, mark_cpu_s, lowest_offset = consumed, now_s, cpu_s, None

    await with_consumers(config, group, BACKLOG_TOPIC, loop)
    return parts


async def reset_group(config: ClientConfig, group: str, timestamp_ms: int) -> None:
    """``group``'s offsets of the backlog topic moved to its first messages stored at or after ``timestamp_ms``."""
    admin = AsyncAdmin(config)
    await admin.start()
    try:
        await ConsumerAdmin(admin).reset_offset(group, BACKLOG_TOPIC, timestamp_ms)
    finally:
        await admin.shutdown()


def backlog_case(count: int, window: int) -> None:
    """``window`` 0: the whole backlog consumed once, a line per tenth; else ``window`` messages from the start of
    each tenth, cold, a line per window."""
    tenth = max(1, count // BACKLOG_TENTHS)
    window = min(window, tenth)
    with running_broker() as proc:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        with Admin(config) as admin:
            admin.create_topic(BACKLOG_TOPIC, queues=QUEUES)
        started = time.perf_counter()
        tenth_started_ms = []  # when the sends of each tenth began: where a window's group is reset to
        for first in range(0, count, tenth):
            tenth_started_ms.append(int(time.time() * 1000))
            asyncio.run(
                send_batches(config, lambda i: Message(BACKLOG_TOPIC, SMALL_BODY), first, min(count, first + tenth))
            )
        emit("backlog", stored=count, send_s=round(time.perf_counter() - started, 1), **settled_memory(proc.pid))
        proc.stop()
        cache_dropped = drop_page_cache()
        proc.start(timeout_s=900)
        config = ClientConfig(namesrv_addr=proc.namesrv)  # a restart with port 0 listens on new ports
        started = time.perf_counter()
        if not window:
            for part in asyncio.run(consume_backlog(config, BACKLOG_GROUP, count, proc.pid, marks=BACKLOG_TENTHS)):
                emit("backlog", stored=count, cache_dropped=cache_dropped, **part)
        for depth, timestamp_ms in enumerate(tenth_started_ms if window else []):
            group = f"{BACKLOG_GROUP}_{depth}"
            asyncio.run(reset_group(config, group, timestamp_ms))
            cache_dropped = drop_page_cache()
            (part,) = asyncio.run(consume_backlog(config, group, window, proc.pid, marks=1))
            emit("backlog_window", stored=count, depth=depth * tenth, cache_dropped=cache_dropped, **part)
        emit(
            "backlog",
            stored=count,
            consume_s=round(time.perf_counter() - started, 1),
            cache_dropped=cache_dropped,
            **settled_memory(proc.pid),
        )


# -- pending timers ----------------------------------------------------------------------------------------------------
def timer_message(deliver_ms: int):
    return lambda i: Message.create(TIMER_TOPIC, SMALL_BODY, properties={TIMER_DELIVER_MS: str(deliver_ms)})


def restart(proc: PocketProcess, *, timer_snapshot: bool = True, crash: bool = False) -> dict:
    """A clean stop and a start on the same data directory: seconds to ready as this process saw it, and from the
    broker's log of the start: its own seconds from its first line to ``broker_started``, the store's recovery
    (to ``store_recovered``), the timer's rebuild (from the line before ``timer_rebuilt``) and that line.
    ``timer_snapshot=False`` removes the saved wheel, so the start reads the timer records back; ``crash``
    stops the broker with kill -9 (the wheel it saved while running is what the start finds)."""
    if crash:
        proc.kill()
    else:
        proc.stop()
    if not timer_snapshot:
        (BrokerConfig(data_dir=proc.workdir / "data").metadata_dir() / SNAPSHOT_FILE).unlink(missing_ok=True)
    started = time.perf_counter()
    proc.start(timeout_s=900)
    ready_s = time.perf_counter() - started
    lines = proc.log_tail(400).splitlines()
    first = max(n for n, line in enumerate(lines) if "event=namesrv_started" in line)
    rebuilt = next(n for n in range(first, len(lines)) if "event=timer_rebuilt" in lines[n])
    up = next(n for n in range(first, len(lines)) if "event=broker_started" in lines[n])
    recovered = next(n for n in range(first, len(lines)) if "event=store_recovered" in lines[n])
    return {
        "ready_s": round(ready_s, 2),
        "broker_start_s": round(log_time(lines[up]) - log_time(lines[first]), 2),
        "store_recovery_s": round(log_time(lines[recovered]) - log_time(lines[first]), 2),
        "timer_rebuild_s": round(log_time(lines[rebuilt]) - log_time(lines[rebuilt - 1]), 2),
        "timer_rebuilt": lines[rebuilt].split("event=timer_rebuilt ")[-1],
    }


def log_time(line: str) -> float:
    """The timestamp of a broker log line (``2026-11-27 22:11:44,034 INFO ...``), in seconds."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def timers_case(steps: list[int]) -> None:
    with running_broker() as proc:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        with Admin(config) as admin:
            admin.create_topic(TIMER_TOPIC, queues=QUEUES)
        baseline = emit("timers_restart", pending=0, **restart(proc), **settled_memory(proc.pid))
        config = ClientConfig(namesrv_addr=proc.namesrv)  # the restart took new ports
        pending = 0
        for target in steps:
            started = time.perf_counter()
            deliver_ms = int(time.time() * 1000) + TIMER_AHEAD_MS
            asyncio.run(send_batches(config, timer_message(deliver_ms), pending, target))
            send_s, pending = time.perf_counter() - started, target
            memory = settled_memory(proc.pid)
            emit(
                "timers",
                pending=pending,
                send_s=round(send_s, 1),
                backlog=int(metric(proc, "pocketmq_timer_backlog_messages")),
                **memory,
                **per_item(memory, baseline, pending, "timer", "bytes"),
            )
        # the ways of starting, in one run: after a kill -9 (from the wheel saved while running, and the records
        # after it), after a clean stop (from the wheel saved at the stop), and reading every record back
        for case, timer_snapshot, crash in (
            ("timers_crash_restart", True, True),
            ("timers_restart", True, False),
            ("timers_restart_rebuild", False, False),
        ):
            restarted = restart(proc, timer_snapshot=timer_snapshot, crash=crash)
            memory = settled_memory(proc.pid)
            emit(
                case,
                pending=pending,
                **restarted,
                backlog=int(metric(proc, "pocketmq_timer_backlog_messages")),
                **memory,
                **per_item(memory, baseline, pending, "timer", "bytes"),
            )


# -- concurrent producers ----------------------------------------------------------------------------------------------
async def produce_for(config: ClientConfig, producers: int, seconds: float, pid: int) -> dict:
    """``producers`` producers, each its own client instance, sending one at a time for ``seconds``."""
    clients = [AsyncProducer(dataclasses.replace(config, instance_name=f"bench-{n}")) for n in range(producers)]
    for client in clients:
        await client.start()
        await client.send(Message(PRODUCE_TOPIC, BODY))  # warm-up: the route and the connection
    sent = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds

    async def one(client: AsyncProducer) -> None:
        nonlocal sent
        while loop.time() < deadline:
            await client.send(Message(PRODUCE_TOPIC, BODY))
            sent += 1

    try:
        cpu_s, started = process_cpu_s(pid), time.perf_counter()
        await asyncio.gather(*(one(c) for c in clients))
        elapsed_s, cpu_s = time.perf_counter() - started, process_cpu_s(pid) - cpu_s
        rss = {
            "rss_mib": rss_mib(pid),
            "rss_anon_mib": rss_mib(pid, "RssAnon"),
            "rss_file_mib": rss_mib(pid, "RssFile"),
        }
    finally:
        for client in clients:
            await client.shutdown()
    return {
        "producers": producers,
        "messages": sent,
        "seconds": round(elapsed_s, 1),
        "msg_per_s": round(sent / elapsed_s),
        "broker_cpu_us_per_msg": round(cpu_s / sent * 1e6) if sent else None,
        **rss,
    }


def producers_case(steps: list[int], seconds: float) -> None:
    with running_broker() as proc:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        with Admin(config) as admin:
            admin.create_topic(PRODUCE_TOPIC, queues=QUEUES)
        emit("producers", producers=0, **settled_memory(proc.pid))
        for producers in steps:
            emit("producers", **asyncio.run(produce_for(config, producers, seconds, proc.pid)))


def counts(text: str) -> list[int]:
    return sorted(int(part) for part in text.split(","))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="topics,topics_seeded,pop,revive,timers,producers")
    parser.add_argument("--topics", type=counts, default=[10, 1_000], help="topics created through Admin")
    parser.add_argument(
        "--seeded-topics", type=counts, default=[10, 1_000, 10_000], help="topics in the table at start"
    )
    parser.add_argument("--creates", type=int, default=200, help="topic_create: creates timed per table size")
    parser.add_argument("--pop", type=counts, default=[10_000, 100_000], help="POP messages in flight")
    parser.add_argument("--revive", type=int, default=100_000, help="expired POP messages revived")
    parser.add_argument(
        "--revive-invisible-s", type=float, default=60.0, help="their invisible time (longer than popping them takes)"
    )
    parser.add_argument("--timers", type=counts, default=[100_000], help="pending timer messages")
    parser.add_argument("--large", action="store_true", help="timers: add a step of 1,000,000")
    parser.add_argument("--backlog", type=int, default=1_000_000, help="messages stored, then consumed cold")
    parser.add_argument(
        "--backlog-window", type=int, default=0, help="backlog: consume this many from each tenth (0: everything)"
    )
    parser.add_argument("--producers", type=counts, default=[1, 10, 100])
    parser.add_argument("--seconds", type=float, default=10.0, help="producers: seconds each")
    args = parser.parse_args()
    cases = args.cases.split(",")
    if "topics" in cases:
        topics_case(args.topics)
    if "topics_seeded" in cases:
        seeded_topics_case(args.seeded_topics)
    if "topic_create" in cases:
        topic_create_case(args.seeded_topics, args.creates)
    if "pop" in cases:
        pop_case(args.pop)
    if "revive" in cases:
        revive_case(args.revive, args.revive_invisible_s)
    if "timers" in cases:
        timers_case(sorted({*args.timers, 1_000_000}) if args.large else args.timers)
    if "producers" in cases:
        producers_case(args.producers, args.seconds)
    if "backlog" in cases:
        backlog_case(args.backlog, args.backlog_window)


if __name__ == "__main__":
    main()
