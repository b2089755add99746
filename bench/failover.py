"""Failover time under the controller (docs/failover.md): a group of three brokers under ``--controller`` on a
single-node etcd started here, SYNC sends running all along; ``--runs`` times (20) the master is killed
(``kill -9``) once it acknowledged 20 sends with every broker in sync, and the time from the kill to the first
send acknowledged by the new master (its remaining slave following it) is measured; the old master is started
again before the next run. The checker of the repeated-failover test then runs on the whole series (every
acknowledged message on every broker, one master per epoch, epochs strictly increasing).

Prints one JSON line: the runs' seconds, p50 and max, and the sends acknowledged. Needs etcd 3.x on PATH
(without it the line says it was skipped; in CI it fails).

``--throughput``: what the controller costs SYNC sends instead. A SYNC master and its slave with static roles,
then the same two brokers under ``--controller`` (elected; single-node etcd), alternately ``--rounds`` times
each, fresh processes every round: ``bench/ha.py``'s SDK sends (1 KiB, ``--messages`` in batches of 32, then a
fifth of them one at a time). Prints one JSON line: every round, the medians by setup and their ratio
(controlled / static).

    python bench/failover.py [--runs 20]
    python bench/failover.py --throughput [--messages 5000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

from ha import TOPIC, send_speed, until_stored  # bench/ is the script's directory, first on sys.path

from pocketmq.client import AsyncAdmin, ClientConfig
from pocketmq.testing.controlled_group import ControlledGroup
from pocketmq.testing.etcd import EtcdCluster, etcd_problem, etcd_required
from pocketmq.testing.failover_rounds import Failover, failovers_in_a_row
from pocketmq.testing.ha_cluster import fast_namesrv, ha_broker


async def run(root: Path, runs: int) -> dict:
    etcd = EtcdCluster(root / "etcd").start()
    group = ControlledGroup(root, etcd.endpoint, size=3)

    def report(i: int, failover: Failover) -> None:
        print(f"run {i + 1}/{runs}: {failover.seconds:.2f}s, epoch {failover.epoch}", flush=True)

    try:
        failovers, traffic = await failovers_in_a_row(group, runs, report)  # the checker runs in it
    finally:
        await group.close()
        etcd.kill()
    seconds = sorted(f.seconds for f in failovers)
    return {
        "case": "failover_controller",
        "runs": runs,
        "p50_s": round(statistics.median(seconds), 3),
        "max_s": round(seconds[-1], 3),
        "seconds": [round(f.seconds, 3) for f in failovers],
        "acked_sends": len(traffic.acked),
        "sends": traffic.sent,
    }


async def static_round(root: Path, messages: int) -> dict:
    """A SYNC master and its slave with configured roles (the arguments of a controlled group otherwise)."""
    namesrv = fast_namesrv(root)
    brokers = [
        ha_broker(root, namesrv.namesrv, f"b{i}", "group-s", i, role, "--metrics-port", "0").start()
        for i, role in enumerate(("sync_master", "slave"))
    ]
    try:
        return await measure(namesrv.namesrv, messages)
    finally:
        for proc in [*brokers, namesrv]:
            proc.kill()


async def controlled_round(root: Path, etcd: EtcdCluster, messages: int) -> dict:
    group = ControlledGroup(root, etcd.endpoint).start()
    try:
        await group.master()
        assert group.namesrv is not None
        return await measure(group.namesrv.namesrv, messages)
    finally:
        await group.close()


async def measure(namesrv: str, messages: int) -> dict:
    config = ClientConfig(namesrv_addr=namesrv)
    async with AsyncAdmin(config) as admin:
        await admin.create_topic(TOPIC, queues=8)
    await until_stored(config)  # the slave follows: SYNC sends are acknowledged
    return await send_speed(config, messages)


async def throughput(root: Path, messages: int, rounds: int) -> dict:
    etcd = EtcdCluster(root / "etcd").start()
    by_setup: dict[str, list[dict]] = {"static": [], "controlled": []}
    try:
        for i in range(rounds):
            for setup in by_setup:
                (root / f"{setup}{i}").mkdir()
            by_setup["static"].append(await static_round(root / f"static{i}", messages))
            by_setup["controlled"].append(await controlled_round(root / f"controlled{i}", etcd, messages))
            print(f"round {i + 1}/{rounds}: {by_setup['static'][-1]} {by_setup['controlled'][-1]}", flush=True)
    finally:
        etcd.kill()
    medians = {
        setup: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for setup, results in by_setup.items()
    }
    ratio = {
        key: round(medians["controlled"][key] / medians["static"][key], 3)
        for key in ("batch32_msgs_per_s", "single_msgs_per_s")
    }
    return {
        "case": "sync_throughput_controller",
        "messages": messages,
        "rounds": by_setup,
        "medians": medians,
        "controlled_over_static": ratio,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--throughput", action="store_true", help="SYNC sends with the controller and without")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    problem = etcd_problem()
    if problem is not None:  # skipped, as the failover tests are (an error in CI)
        if etcd_required():
            raise SystemExit(f"bench/failover.py needs etcd 3.x: {problem}")
        print(json.dumps({"case": "failover_controller", "skipped": problem}))
        return
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        if args.throughput:
            print(json.dumps(asyncio.run(throughput(Path(tmp), args.messages, args.rounds))))
        else:
            print(json.dumps(asyncio.run(run(Path(tmp), args.runs))))


if __name__ == "__main__":
    main()
