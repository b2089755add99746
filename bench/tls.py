"""What TLS costs per message: SDK sends (1 KiB) through ``pocketmq serve`` in plaintext and over TLS, in one run.

Setups, each on a fresh broker:

- ``plain``: a broker without TLS (``--tls-mode disabled``), a plaintext client: today's path;
- ``permissive_plain``: a broker serving TLS and plaintext on each port, a plaintext client (what the sniffing
  costs a client that does not use TLS);
- ``permissive_tls``: the same broker, a TLS client that verifies the dev CA.

Cases (bench/produce.py's): ``one_at_a_time`` (the synchronous ``Producer``) and ``in_flight_100`` (the asyncio
core, 100 sends in flight). With ``--grpc`` it also times the official Python client's sync sends (one thread)
on the gRPC port of the permissive broker, with and without ``tls_enable`` (through the sniffing front; wall and
client CPU only).

Brokers run with ``--busy-poll-us 0``, so that their CPU time is their work, not polling: on a loaded machine the
CPU microseconds per message say more than the wall-clock rates. Setups alternate ``--rounds`` times; the best
round of each counts. Prints one JSON line per setup and case:
msg/s, microseconds per message, and the client's and broker's CPU microseconds per message.

    python bench/tls.py [--messages 10000] [--rounds 2] [--grpc] [--grpc-messages 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from produce import TOPIC, in_flight_100, one_at_a_time, run_case

from pocketmq.cli.main import main as cli_main
from pocketmq.client import Admin, ClientConfig
from pocketmq.testing.processes import broker_process

CASES = {"one_at_a_time": one_at_a_time, "in_flight_100": in_flight_100}
SETUPS = ("plain", "permissive_plain", "permissive_tls")
GRPC_TOPIC = "bench_tls_grpc"


def per_message(timing: dict, messages: int) -> dict:
    result = {
        "msg_per_s": round(messages / timing["seconds"]),
        "us_per_msg": round(timing["seconds"] / messages * 1e6, 1),
    }
    for side in ("client", "broker"):
        if f"{side}_cpu_s" in timing:
            result[f"{side}_cpu_us_per_msg"] = round(timing[f"{side}_cpu_s"] / messages * 1e6, 1)
    return result


def grpc_sends(endpoint: str, tls: bool, messages: int, ca_file: Path, home: Path) -> dict:
    """The official client's sync sends, timed in a process of its own (wall and client CPU after a warm-up)."""
    env = {**os.environ, "HOME": str(home), "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(ca_file)}
    home.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        [sys.executable, __file__, "--grpc-client", json.dumps({"endpoint": endpoint, "tls": tls, "n": messages})],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def run_grpc_client(spec: dict) -> None:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    producer = Producer(ClientConfiguration(spec["endpoint"], Credentials()), [GRPC_TOPIC], tls_enable=spec["tls"])
    producer.startup()

    def send(count: int) -> None:
        for _ in range(count):
            msg = Message()
            msg.topic = GRPC_TOPIC
            msg.body = b"x" * 1024
            producer.send(msg)

    try:
        send(200)  # warm-up
        start, cpu = time.perf_counter(), time.process_time()
        send(spec["n"])
        elapsed_s = time.perf_counter() - start
        print(json.dumps({"seconds": round(elapsed_s, 3), "client_cpu_s": round(time.process_time() - cpu, 2)}))
    finally:
        producer.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000, help="SDK messages per case (default 10000)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the setups (default 2)")
    parser.add_argument("--grpc", action="store_true", help="also the official client on the gRPC port")
    parser.add_argument("--grpc-messages", type=int, default=2_000)
    parser.add_argument("--grpc-client", help=argparse.SUPPRESS)  # internal: run the official client with a spec
    args = parser.parse_args()
    if args.grpc_client:
        run_grpc_client(json.loads(args.grpc_client))
        return
    best: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-tls-") as tmp:
        certs = Path(tmp) / "certs"
        assert cli_main(["tls", "dev-cert", str(certs)]) == 0
        ca = str(certs / "ca.pem")
        tls_args = ["--tls-cert-file", str(certs / "server.pem"), "--tls-key-file", str(certs / "server-key.pem")]
        for round_no in range(args.rounds):
            for broker_kind in ("plain", "permissive"):
                # no busy-polling: the broker's CPU then counts its work, not its polling
                extra = ["--busy-poll-us", "0", *(["--tls-mode", "disabled"] if broker_kind == "plain" else tls_args)]
                broker = broker_process(Path(tmp) / f"{broker_kind}-{round_no}", "bench", extra_args=extra).start()
                try:
                    plain = ClientConfig(namesrv_addr=broker.namesrv)
                    with Admin(plain) as admin:
                        admin.create_topic(TOPIC, queues=8)
                    setups = (
                        {"plain": plain}
                        if broker_kind == "plain"
                        else {
                            "permissive_plain": plain,
                            "permissive_tls": ClientConfig(namesrv_addr=broker.namesrv, tls=True, ca_file=ca),
                        }
                    )
                    for setup, config in setups.items():
                        for case in CASES:
                            timing = run_case(case, config, args.messages, broker.proc.pid, profile=False)
                            keep(best, (setup, case), timing)
                    if args.grpc and broker_kind == "permissive":
                        for tls in (False, True):
                            home = Path(tmp) / f"grpc-{round_no}-{tls}"
                            timing = grpc_sends(broker.grpc, tls, args.grpc_messages, Path(ca), home)
                            keep(best, (f"grpc_{'tls' if tls else 'plain'}", "official_one_at_a_time"), timing)
                finally:
                    broker.stop()
    for (setup, case), timing in best.items():
        messages = args.grpc_messages if setup.startswith("grpc") else args.messages
        print(
            json.dumps(
                {
                    "bench": "tls",
                    "setup": setup,
                    "case": case,
                    "messages": messages,
                    **timing,
                    **per_message(timing, messages),
                }
            ),
            flush=True,
        )


def keep(best: dict, key: tuple[str, str], timing: dict) -> None:
    if key not in best or timing["seconds"] < best[key]["seconds"]:
        best[key] = timing


if __name__ == "__main__":
    main()
