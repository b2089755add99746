"""The SDK's send rate: 1 KiB messages through ``pocketmq.client`` to a ``pocketmq serve`` this script starts.

For each flush mode (ASYNC_FLUSH, then SYNC_FLUSH; each on a fresh broker and data directory) three cases run
against one 8-queue topic, each after a warm-up:

- ``one_at_a_time``: the synchronous ``Producer.send``, one message at a time (a user's plain loop);
- ``in_flight_100``: the asyncio core, 100 sends in flight on one ``AsyncProducer``;
- ``in_flight_100_auto_batch``: the same with ``ProducerOptions(auto_batch=True)`` (the sends of one loop turn
  travel as one batch; each still gets its own result);
- ``batch_32``: the synchronous ``Producer.send_batch`` of 32 messages, one batch at a time.

Prints one JSON line per case. Targets on the 2-core machine (issue 3): 5,000 msg/s one at a time, 40,000 msg/s
with 100 in flight or batched. ``--profile CASE`` runs cProfile over the client side of that case and prints
the top functions (cumulative) to stderr.

``--placement`` pins the processes (Linux): ``same-cpu`` runs the broker and this script on CPU 0, ``split-cpus``
the broker on CPU 0 and this script on CPU 1; ``any`` (default) leaves it to the scheduler. It matters for one
send at a time on the project's VM, where waking a process that sleeps on the other vCPU costs far more than the
send itself (docs/benchmarks.md).

``--broker-busy-poll-us N`` starts the broker with ``--busy-poll-us N`` (default: the broker's own default);
``--client-busy-poll-us N`` gives the SDK ``ClientConfig(sync_reply_busy_poll_us=N)`` (default 0). Both poll
their sockets up to that long before sleeping (docs/broker.md, docs/benchmarks.md).

``--access-control off,on`` runs the cases without access control, then on a broker with authentication and
authorization on, sending as a normal user whose policy allows Pub on the topic (docs/security.md): every
request signed by the SDK, its signature and the policy checked by the broker.

    python bench/produce.py [--messages 20000] [--flush async,sync] [--cases one_at_a_time,in_flight_100,batch_32]
                            [--placement any|same-cpu|split-cpus] [--broker-busy-poll-us N]
                            [--client-busy-poll-us 0] [--access-control off|on|off,on]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from pocketmq.client import Admin, AsyncProducer, ClientConfig, Message, Producer, ProducerOptions
from pocketmq.protocol.codes import AUTH_CREATE_ACL, AUTH_CREATE_USER
from pocketmq.testing.processes import broker_process, process_cpu_s

BODY = b"x" * 1024
TOPIC = "bench_produce"
QUEUES = 8
IN_FLIGHT = 100
BATCH = 32
WARMUP_MESSAGES = 1000
TARGETS_MSG_PER_S = {
    "one_at_a_time": 5_000,
    "in_flight_100": 40_000,
    "in_flight_100_auto_batch": 40_000,
    "batch_32": 40_000,
}
ROOT, ROOT_SECRET = "bench-root", "bench-root-secret"
USER, USER_SECRET = "bench-user", "bench-user-secret"
ACCESS_CONTROL_ENV = {
    "POCKETMQ_AUTHENTICATION_ENABLED": "true",
    "POCKETMQ_AUTHORIZATION_ENABLED": "true",
    "POCKETMQ_ACL_ROOT_USER": ROOT,
    "POCKETMQ_ACL_ROOT_PASSWORD": ROOT_SECRET,
    "POCKETMQ_INNER_ACCESS_KEY": "bench-inner",
    "POCKETMQ_INNER_SECRET_KEY": "bench-inner-secret",
}
PLACEMENTS = {"any": None, "same-cpu": ({0}, {0}), "split-cpus": ({0}, {1})}  # (broker CPUs, client CPUs)


def one_at_a_time(config: ClientConfig, messages: int) -> None:
    with Producer(config) as producer:
        for _ in range(messages):
            producer.send(Message(TOPIC, BODY))


def in_flight_100(config: ClientConfig, messages: int, options: ProducerOptions | None = None) -> None:
    async def run() -> None:
        async with AsyncProducer(config, options) as producer:
            remaining = messages

            async def worker() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    await producer.send(Message(TOPIC, BODY))

            await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))

    asyncio.run(run())


def in_flight_100_auto_batch(config: ClientConfig, messages: int) -> None:
    in_flight_100(config, messages, ProducerOptions(auto_batch=True))


def batch_32(config: ClientConfig, messages: int) -> None:
    with Producer(config) as producer:
        for _ in range(messages // BATCH):
            producer.send_batch([Message(TOPIC, BODY) for _ in range(BATCH)])


CASES = {
    "one_at_a_time": one_at_a_time,
    "in_flight_100": in_flight_100,
    "in_flight_100_auto_batch": in_flight_100_auto_batch,
    "batch_32": batch_32,
}


def run_case(name: str, config: ClientConfig, messages: int, broker_pid: int, profile: bool) -> dict:
    """Time one case; wall seconds and the CPU seconds the client (this process) and the broker spent."""
    CASES[name](config, WARMUP_MESSAGES)
    profiler = cProfile.Profile() if profile else None
    start, client_cpu, broker_cpu = time.perf_counter(), time.process_time(), process_cpu_s(broker_pid)
    if profiler:
        profiler.enable()
    CASES[name](config, messages)
    if profiler:
        profiler.disable()
    elapsed_s = time.perf_counter() - start
    if profiler:
        print(f"--- client profile of {name} ---", file=sys.stderr)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    return {
        "seconds": round(elapsed_s, 3),
        "client_cpu_s": round(time.process_time() - client_cpu, 2),
        "broker_cpu_s": round(process_cpu_s(broker_pid) - broker_cpu, 2),
    }


def pin(pid: int, cpus: set[int]) -> None:
    """Pin every thread of ``pid`` (0: this process) to ``cpus``; threads started later inherit it."""
    for tid in os.listdir(f"/proc/{pid or os.getpid()}/task"):
        os.sched_setaffinity(int(tid), cpus)


def bench_flush_mode(
    flush: str,
    cases: list[str],
    messages: int,
    profile_case: str | None,
    placement: str,
    broker_busy_poll_us: int | None,
    client_busy_poll_us: int,
    access_control: str,
) -> None:
    broker_args = ["--flush", flush]
    if broker_busy_poll_us is not None:
        broker_args += ["--busy-poll-us", str(broker_busy_poll_us)]
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-") as tmp:
        broker = broker_process(Path(tmp), "bench", extra_args=broker_args)
        if access_control == "on":
            broker.env.update(ACCESS_CONTROL_ENV)
        broker.start()
        try:
            if PLACEMENTS[placement]:
                broker_cpus, client_cpus = PLACEMENTS[placement]
                pin(broker.proc.pid, broker_cpus)
                pin(0, client_cpus)
            config = ClientConfig(namesrv_addr=broker.namesrv, sync_reply_busy_poll_us=client_busy_poll_us)
            if access_control == "on":
                config = replace(config, access_key=ROOT, secret_key=ROOT_SECRET)
            with Admin(config) as admin:
                admin.create_topic(TOPIC, queues=QUEUES)
                if access_control == "on":
                    make_sender(admin)
                    config = replace(config, access_key=USER, secret_key=USER_SECRET)
            for name in cases:
                count = messages - messages % BATCH if name == "batch_32" else messages
                timing = run_case(name, config, count, broker.proc.pid, profile_case == name)
                elapsed_s = timing["seconds"]
                print(
                    json.dumps(
                        {
                            "bench": "produce",
                            "case": name,
                            "flush": f"{flush.upper()}_FLUSH",
                            "messages": count,
                            "body_bytes": len(BODY),
                            "placement": placement,
                            "broker_busy_poll_us": broker_busy_poll_us,
                            "client_busy_poll_us": client_busy_poll_us,
                            "access_control": access_control,
                            **timing,
                            "msg_per_s": round(count / elapsed_s),
                            "mb_per_s": round(count * len(BODY) / elapsed_s / 2**20, 1),
                            "target_msg_per_s": TARGETS_MSG_PER_S[name],
                        }
                    ),
                    flush=True,
                )
        finally:
            broker.stop()


def make_sender(admin: Admin) -> None:
    """The normal user the cases send as: Pub on the topic, nothing else."""
    user = {"username": USER, "password": USER_SECRET, "userType": "Normal", "userStatus": "enable"}
    admin.auth_change(AUTH_CREATE_USER, {"username": USER}, user)
    entry = {"resource": f"Topic:{TOPIC}", "actions": ["Pub"], "sourceIps": [], "decision": "Allow"}
    acl = {"subject": f"User:{USER}", "policies": [{"policyType": "Custom", "entries": [entry]}]}
    admin.auth_change(AUTH_CREATE_ACL, {"subject": f"User:{USER}"}, acl)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="messages per case (default 20000)")
    parser.add_argument("--flush", default="async,sync", help="flush modes, comma-separated (default async,sync)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--profile", choices=list(CASES), help="cProfile the client side of this case")
    parser.add_argument(
        "--placement",
        choices=list(PLACEMENTS),
        default="any",
        help="pin the broker and this script to one CPU or to two (default: not pinned)",
    )
    parser.add_argument(
        "--broker-busy-poll-us",
        type=int,
        default=None,
        help="the broker's --busy-poll-us (default: the broker's default)",
    )
    parser.add_argument(
        "--client-busy-poll-us",
        type=int,
        default=0,
        help="sync sends poll their socket this long for the reply before sleeping (default 0)",
    )
    parser.add_argument(
        "--access-control", default="off", help="off, on, or off,on: both, one after the other (default off)"
    )
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases: {', '.join(sorted(unknown))}")
    for flush in args.flush.split(","):
        for access_control in args.access_control.split(","):
            bench_flush_mode(
                flush,
                cases,
                args.messages,
                args.profile,
                args.placement,
                args.broker_busy_poll_us,
                args.client_busy_poll_us,
                access_control,
            )


if __name__ == "__main__":
    main()
