"""The gRPC proxy with 1 worker against 2 workers (and the broker's embedded gRPC front end beside them): CLIENTS
official RocketMQ 5 Python producers at once, each its own process sending MESSAGES sync sends of SIZE bytes
(``bench/produce_grpc.py``'s client), through one broker.

Each target is measured ROUNDS times, alternating, and the best round counts; a round's rate is the sum of the
clients' own rates (each times its sends after a warm-up). Beside it: CPU seconds per 1,000 messages of the
proxy's processes and of the broker during the round. Prints one JSON line.

    python bench/proxy_grpc.py [--clients 4] [--messages 2000] [--size 1024] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CLIENT = Path(__file__).with_name("produce_grpc.py")
TOPIC = "bench_grpc"  # produce_grpc.py's


def clients_round(endpoint: str, home: Path, *, clients: int, messages: int, size: int) -> float:
    """The summed rate of ``clients`` client processes sending at once."""
    spec = {"endpoint": endpoint, "topic": TOPIC, "workload": "send", "messages": messages, "size": size, "threads": 1}
    procs = [
        subprocess.Popen(
            [sys.executable, str(CLIENT), "--client", json.dumps(spec)],
            env=dict(os.environ, HOME=str(home)),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(clients)
    ]
    total = 0.0
    for proc in procs:
        out, _ = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"a client failed with {proc.returncode}")
        total += json.loads(out.strip().splitlines()[-1])["msgs_per_s"]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--messages", type=int, default=2000, help="per client")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from pocketmq.client import Admin, ClientConfig
    from pocketmq.testing.processes import broker_process, namesrv_process, process_cpu_s, proxy_process

    with tempfile.TemporaryDirectory(prefix="pmq-bench-proxy-") as tmp:
        tmp_path = Path(tmp)
        namesrv = namesrv_process(tmp_path / "namesrv").start()
        broker = broker_process(tmp_path / "broker", "broker-a", namesrv=namesrv.namesrv).start()
        proxies = {
            workers: proxy_process(tmp_path / f"proxy-{workers}", namesrv.namesrv, workers=workers).start(90)
            for workers in (1, 2)
        }
        try:
            with Admin(ClientConfig(namesrv_addr=namesrv.namesrv)) as admin:
                admin.create_topic(TOPIC, queues=8)
            targets = {
                "embedded": (broker.grpc, []),
                **{f"proxy_{w}": (p.grpc, worker_pids(p)) for w, p in proxies.items()},
            }
            best: dict[str, dict] = {}
            for _ in range(args.rounds):
                for name, (endpoint, pids) in targets.items():
                    cpu_before = [process_cpu_s(pid) for pid in [broker.pid, *pids]]
                    rate = clients_round(
                        endpoint, tmp_path, clients=args.clients, messages=args.messages, size=args.size
                    )
                    cpu = [process_cpu_s(pid) - before for pid, before in zip([broker.pid, *pids], cpu_before)]
                    sent_k = args.clients * (args.messages + 200) / 1000  # produce_grpc.py warms up with 200
                    if rate > best.get(name, {}).get("msgs_per_s", 0):
                        best[name] = {
                            "msgs_per_s": round(rate),
                            "broker_cpu_s_per_1k": round(cpu[0] / sent_k, 3),
                            "proxy_cpu_s_per_1k": round(sum(cpu[1:]) / sent_k, 3) if pids else None,
                        }
            print(
                json.dumps(
                    {
                        "bench": "proxy_grpc",
                        "client": "rocketmq-python-client (official, Producer, sync send, 1 thread per process)",
                        "clients": args.clients,
                        "messages_per_client": args.messages,
                        "body_bytes": args.size,
                        "cpus": os.cpu_count(),
                        "load_avg_1m": os.getloadavg()[0],
                        "best": best,
                    }
                )
            )
        finally:
            for proxy in proxies.values():
                proxy.stop()
            broker.stop()
            namesrv.stop()


def worker_pids(proxy) -> list[int]:
    """The proxy's worker processes, as its log names them."""
    return [int(pid) for pid in re.findall(r"event=proxy_worker_listening pid=(\d+)", proxy.log_path.read_text())]


if __name__ == "__main__":
    main()
