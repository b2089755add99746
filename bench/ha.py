"""High-availability speed: POP revive of messages stored on another broker group, SYNC replication, failover.

- ``remote_revive``: broker A (``pocketmq serve``, a real process with its embedded name server) stores
  REVIVE_MESSAGES 1 KiB messages in an 8-queue topic (sent first, not timed). Broker B runs in this process on
  a ManualClock; its revive queues hold CKs naming A for every message (32 per CK, what the escape bridge of
  A's acting slave writes; ``pocketmq.testing.escaped_checkpoints``). The clock passes their invisible time
  and revive passes run until every message is a retry copy on B: each pass reads a batch of due CKs of every
  revive queue with one PULL per (queue, 256 offsets) from A. Reports messages per second and PULL RPCs. Target (issue 7): 5,000.
- ``sync_replication``: SDK sends (1 KiB; SYNC_MESSAGES in batches of 32, then SYNC_MESSAGES / 5 single sends
  one at a time) to a SYNC_MASTER with one slave, against the same broker without a slave (ASYNC_MASTER):
  msg/s, and p50 / p99 latency of the single sends.
- ``sync_ack``: what a POP ack costs when it must reach the slave before it is answered (docs/ha.md): ACK_MESSAGES
  1 KiB messages popped in batches of 32 by the SDK's ``AsyncSimpleConsumer`` and acked one at a time, each ack
  awaited, against a SYNC_MASTER with one slave and the same broker without a slave (ASYNC_MASTER); for a normal
  group and a FIFO (orderly) group, whose acks also carry the FIFO POP state to the slave. Acks per second and
  p50 / p99 ack latency.
- ``failover``: a master and its slave; kill -9 of the master, then the SDK pull consumer pulls a message sent
  before, refreshing its route after each failed pull; time from the kill to the first message read through
  the slave.

Each case prints one JSON line; every phase has a deadline.

    python bench/ha.py [--revive-messages 100000] [--sync-messages 5000] [--ack-messages 2000]
                       [--cases remote_revive,sync,sync_ack,failover]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

from pocketmq.client import AsyncAdmin, AsyncProducer, AsyncSimpleConsumer, ClientConfig, Message
from pocketmq.testing.processes import broker_process, namesrv_process

BODY = b"x" * 1024
TOPIC = "bench_ha"
GROUP = "bench_ha_group"
QUEUES = 8
BATCH = 32
REVIVE_TARGET_MSG_PER_S = 5_000
PHASE_DEADLINE_S = 300


async def produce(config: ClientConfig, messages: int) -> dict[int, list[int]]:
    """Send ``messages`` in batches of 32; (queue id -> queue offsets) of what was stored."""
    async with AsyncAdmin(config) as admin:
        await admin.create_topic(TOPIC, queues=QUEUES)
    stored: dict[int, list[int]] = {}
    async with AsyncProducer(config) as producer:
        for start in range(0, messages, BATCH):
            result = await producer.send_batch([Message(TOPIC, BODY) for _ in range(min(BATCH, messages - start))])
            first = result.queue_offset
            stored.setdefault(result.queue_id, []).extend(range(first, first + min(BATCH, messages - start)))
    return stored


# -- revive of messages stored on another broker -----------------------------------------------------------------
class CountingRemoting:
    """The broker's remoting client, counting PULLs (what one revive pass costs in RPCs)."""

    def __init__(self, inner):
        self._inner = inner
        self.pulls = 0

    async def invoke(self, addr, request, timeout_s):
        from pocketmq.protocol.codes import RequestCode

        self.pulls += request.code == RequestCode.PULL_MESSAGE
        return await self._inner.invoke(addr, request, timeout_s)


async def remote_revive_case(tmp: Path, messages: int) -> dict:
    from pocketmq.broker.broker import Broker
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.pop.read_routing import ReaderRouter
    from pocketmq.cluster.breaker import BreakerBoard
    from pocketmq.cluster.remote_reader import RemoteMessageReader
    from pocketmq.runtime.clock import ManualClock
    from pocketmq.testing.escaped_checkpoints import append_checkpoints, remote_checkpoints

    a = broker_process(tmp / "a", "bench-a").start()
    try:
        stored = await produce(ClientConfig(namesrv_addr=a.namesrv), messages)
        clock = ManualClock()
        config = dataclasses.replace(
            BrokerConfig(data_dir=tmp / "b", remoting_port=0, grpc_port=0),
            broker_name="bench-b",
            namesrv_addr=a.namesrv,
            pop_revive_interval_ms=3_600_000,
        )
        b = Broker(config, clock=clock)
        await b.start(remoting_port=10911)
        try:
            remoting = CountingRemoting(b.remoting_client)
            board = BreakerBoard()
            revive = b.pop.revive
            revive.readers = ReaderRouter(
                b.broker_name,
                revive.readers.local,
                lambda name: RemoteMessageReader(name, b.namesrv_client(), remoting, breakers=board, clock=clock),
            )
            await append_checkpoints(
                b, remote_checkpoints(TOPIC, GROUP, "bench-a", stored, pop_time_ms=clock.now_ms(), invisible_ms=10_000)
            )
            clock.advance(10_001)
            started = time.perf_counter()
            while revive.metrics.get("retried", 0) < messages:
                if time.perf_counter() - started > PHASE_DEADLINE_S or revive.metrics.get("rewrites", 0):
                    raise RuntimeError(f"revive did not finish: {dict(revive.metrics)}")
                await revive.run_once(clock.now_ms())
            elapsed_s = time.perf_counter() - started
        finally:
            await b.shutdown()
    finally:
        a.stop()
    rate = messages / elapsed_s
    return {
        "case": "remote_revive",
        "messages": messages,
        "seconds": round(elapsed_s, 2),
        "msgs_per_s": round(rate),
        "pull_rpcs": remoting.pulls,
        "target_msgs_per_s": REVIVE_TARGET_MSG_PER_S,
        "meets_target": rate >= REVIVE_TARGET_MSG_PER_S,
    }


# -- SYNC replication and failover (a group of master + slave processes) ------------------------------------------
def group_process(tmp: Path, namesrv: str, name: str, broker_id: int, role: str):
    return broker_process(
        tmp / name,
        name,
        namesrv=namesrv,
        extra_args=[
            "--cluster",
            "bench",
            "--broker-name",
            "bench-group",
            "--broker-id",
            str(broker_id),
            "--role",
            role,
            "--register-interval-ms",
            "500",
            "--set",
            "ha_master_lookup_interval_ms=200",
            "--set",
            "ha_metadata_sync_interval_ms=300",
        ],
    )


async def until_stored(config: ClientConfig) -> None:
    """Send probes until one is SEND_OK (a SYNC master answers SLAVE_NOT_AVAILABLE until its slave follows)."""
    from pocketmq.client.producer import SendStatus

    async with AsyncProducer(config) as producer:
        deadline = time.monotonic() + 30
        while (await producer.send(Message(TOPIC, b"probe"))).status is not SendStatus.SEND_OK:
            if time.monotonic() > deadline:
                raise RuntimeError("no SEND_OK within 30 s")
            await asyncio.sleep(0.1)


async def send_speed(config: ClientConfig, messages: int) -> dict:
    """Batches of 32, then one single send at a time (latency of each)."""
    async with AsyncProducer(config) as producer:
        started = time.perf_counter()
        for start in range(0, messages, BATCH):
            await producer.send_batch([Message(TOPIC, BODY) for _ in range(min(BATCH, messages - start))])
        batch_s = time.perf_counter() - started
        latencies_ms = []
        for _ in range(messages // 5):
            sent_at = time.perf_counter()
            await producer.send(Message(TOPIC, BODY))
            latencies_ms.append((time.perf_counter() - sent_at) * 1000)
    cuts = statistics.quantiles(latencies_ms, n=100)
    return {
        "batch32_msgs_per_s": round(messages / batch_s),
        "single_msgs_per_s": round(len(latencies_ms) / (sum(latencies_ms) / 1000)),
        "single_p50_ms": round(cuts[49], 2),
        "single_p99_ms": round(cuts[98], 2),
    }


async def ack_speed(config: ClientConfig, messages: int, *, fifo: bool) -> dict:
    """``messages`` sent in batches, then popped 32 at a time and acked one by one, each ack awaited."""
    group = f"{GROUP}_{'fifo' if fifo else 'normal'}"
    async with AsyncAdmin(config) as admin:
        await admin.create_group(group, consume_message_orderly=fifo)
    async with AsyncProducer(config) as producer:
        for start in range(0, messages, BATCH):
            await producer.send_batch([Message(TOPIC, BODY) for _ in range(min(BATCH, messages - start))])
    latencies_ms: list[float] = []
    deadline = time.monotonic() + PHASE_DEADLINE_S
    async with AsyncSimpleConsumer(group, {TOPIC: "*"}, config) as consumer:
        while len(latencies_ms) < messages:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(latencies_ms)} of {messages} acked within {PHASE_DEADLINE_S} s")
            for message in await consumer.receive(BATCH, 60_000, await_duration_ms=1000):
                acked_at = time.perf_counter()
                await consumer.ack(message)  # the probes of until_stored too (an open one holds a FIFO queue)
                if message.body == BODY:
                    latencies_ms.append((time.perf_counter() - acked_at) * 1000)
    cuts = statistics.quantiles(latencies_ms, n=100)
    return {
        "acks_per_s": round(len(latencies_ms) / (sum(latencies_ms) / 1000)),
        "ack_p50_ms": round(cuts[49], 2),
        "ack_p99_ms": round(cuts[98], 2),
    }


async def measure_with_and_without_slave(tmp: Path, measure) -> dict:
    """``await measure(config)`` against an ASYNC master without a slave, then a SYNC master with one slave (each
    a fresh name server and group); the results by setup."""
    results = {}
    for label, with_slave in (("async_master_no_slave", False), ("sync_master_one_slave", True)):
        run_dir = tmp / label
        namesrv = namesrv_process(run_dir / "ns").start()
        procs = [
            namesrv,
            group_process(
                run_dir, namesrv.namesrv, "master", 0, "sync_master" if with_slave else "async_master"
            ).start(),
        ]
        try:
            if with_slave:
                procs.append(group_process(run_dir, namesrv.namesrv, "slave", 1, "slave").start())
            config = ClientConfig(namesrv_addr=namesrv.namesrv)
            async with AsyncAdmin(config) as admin:
                await admin.create_topic(TOPIC, queues=QUEUES)
            await until_stored(config)
            results[label] = await measure(config)
        finally:
            for proc in reversed(procs):
                proc.kill()
    return results


async def sync_case(tmp: Path, messages: int) -> dict:
    results = await measure_with_and_without_slave(tmp, lambda config: send_speed(config, messages))
    return {"case": "sync_replication", "messages": messages, "body_bytes": len(BODY), **results}


async def sync_ack_case(tmp: Path, messages: int) -> dict:
    async def both_groups(config: ClientConfig) -> dict:
        return {
            "normal": await ack_speed(config, messages, fifo=False),
            "fifo": await ack_speed(config, messages, fifo=True),
        }

    results = await measure_with_and_without_slave(tmp, both_groups)
    return {"case": "sync_ack", "messages": messages, "body_bytes": len(BODY), **results}


async def slave_serves(slave_addr: str) -> None:
    """Wait until the slave has the topic (metadata sync) and answers a pull of offset 0 with the message."""
    from pocketmq.protocol.codes import RequestCode, ResponseCode
    from pocketmq.protocol.command import RemotingCommand
    from pocketmq.protocol.request_headers import PullMessageRequestHeader, PullSysFlag
    from pocketmq.protocol.transport import RemotingClient

    remoting = RemotingClient()
    try:
        deadline = time.monotonic() + 30
        while (
            await remoting.invoke(
                slave_addr,
                RemotingCommand.request(
                    RequestCode.PULL_MESSAGE,
                    PullMessageRequestHeader.ext_fields(
                        consumer_group=GROUP,
                        topic=TOPIC,
                        queue_id=0,
                        queue_offset=0,
                        max_msg_nums=1,
                        sys_flag=PullSysFlag.of(subscription=True),
                        commit_offset=0,
                        suspend_timeout_ms=0,
                        subscription="*",
                        sub_version=0,
                    ),
                ),
                5.0,
            )
        ).code != ResponseCode.SUCCESS:
            if time.monotonic() > deadline:
                raise RuntimeError("the slave does not serve the topic within 30 s")
            await asyncio.sleep(0.1)
    finally:
        await remoting.close()


async def failover_case(tmp: Path) -> dict:
    from pocketmq.client.pull_consumer import AsyncPullConsumer, PullStatus

    config_file = tmp / "namesrv.toml"
    config_file.write_text("[namesrv]\nbroker_expire_ms = 3000\nscan_interval_ms = 300\n")
    namesrv = namesrv_process(tmp / "ns", extra_args=["--config", str(config_file)]).start()
    master = group_process(tmp, namesrv.namesrv, "master", 0, "sync_master").start()
    slave = group_process(tmp, namesrv.namesrv, "slave", 1, "slave").start()
    try:
        config = ClientConfig(namesrv_addr=namesrv.namesrv)
        async with AsyncAdmin(config) as admin:
            await admin.create_topic(TOPIC, queues=1)
        await until_stored(config)  # the probe is on the slave too
        await slave_serves(slave.remoting)
        async with AsyncPullConsumer(GROUP, config) as consumer:
            queue = (await consumer.fetch_queues(TOPIC))[0]
            assert (await consumer.pull(queue, 0, 1)).status is PullStatus.FOUND
            master.kill()
            killed_at, attempts = time.perf_counter(), 0
            while True:
                attempts += 1
                try:
                    if (await consumer.pull(queue, 0, 1, timeout_s=1.0)).status is PullStatus.FOUND:
                        break
                except Exception:  # the dead master: connection refused until the route shows the slave
                    # The SDK keeps a route until its refresh; the bench refreshes after each failure.
                    await consumer.fetch_queues(TOPIC)
                if time.perf_counter() - killed_at > 60:
                    raise RuntimeError("nothing read through the slave within 60 s of the kill")
                await asyncio.sleep(0.05)
            failover_s = time.perf_counter() - killed_at
    finally:
        for proc in (slave, master, namesrv):
            proc.kill()
    return {"case": "failover", "seconds_to_first_read_through_slave": round(failover_s, 2), "pull_attempts": attempts}


def run_in_tmp(case, *args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(case(Path(tmp), *args))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revive-messages", type=int, default=100_000)
    parser.add_argument("--sync-messages", type=int, default=5_000)
    parser.add_argument("--ack-messages", type=int, default=2_000)
    parser.add_argument("--cases", default="remote_revive,sync,sync_ack,failover")
    args = parser.parse_args()
    cases = args.cases.split(",")
    if "remote_revive" in cases:
        print(json.dumps(run_in_tmp(remote_revive_case, args.revive_messages)), flush=True)
    if "sync" in cases:
        print(json.dumps(run_in_tmp(sync_case, args.sync_messages)), flush=True)
    if "sync_ack" in cases:
        print(json.dumps(run_in_tmp(sync_ack_case, args.ack_messages)), flush=True)
    if "failover" in cases:
        print(json.dumps(run_in_tmp(failover_case)), flush=True)


if __name__ == "__main__":
    main()
