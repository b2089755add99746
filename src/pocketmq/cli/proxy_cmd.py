"""``pocketmq proxy --namesrv ADDR [--host H] [--grpc-port P] [--workers N] [--ready-file PATH]``: the gRPC proxy
(access control: ``--authentication-enabled --authorization-enabled --access-key AK --secret-key SK``; TLS: the
``--tls-*`` flags of ``serve``).

N worker processes share the gRPC port P (SO_REUSEPORT): each serves the official RocketMQ 5 clients and speaks
remoting to the brokers the name server lists (docs/grpc.md, "Proxy"). This process reserves the port, starts
the workers (spawned, not forked: grpc does not survive a fork), prints ``proxy listening on HOST:PORT workers
N`` once every worker listens, writes the ready file (``grpc``), starts a worker again when one dies, and stops
them all on SIGTERM or SIGINT. Every log line names its process (``pid=``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import multiprocessing
import os
from multiprocessing.process import BaseProcess

from pocketmq.broker.pop.renewal import DEFAULT_AUTO_RENEW_INVISIBLE_MS, DEFAULT_RENEW_AHEAD_MS
from pocketmq.cli.output import add_credential_options, credentials_of
from pocketmq.cli.running import StopSignals, configure_logging, write_ready_file
from pocketmq.cli.tls_cmd import add_server_tls_options
from pocketmq.protocol.tls import TlsSettings
from pocketmq.proxy.options import DEFAULT_GRPC_PORT, DEFAULT_USERS_TTL_MS, ProxyOptions
from pocketmq.proxy.restarts import RestartBackoff
from pocketmq.proxy.worker import ProxyWorker, reserve_port

log = logging.getLogger(__name__)

WORKER_START_TIMEOUT_S = 60.0
WORKER_STOP_TIMEOUT_S = 15.0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "proxy",
        help="run the gRPC proxy: N processes serving RocketMQ 5 clients over the brokers' remoting",
        description="Run the gRPC proxy: worker processes sharing one gRPC port, reaching brokers over remoting.",
    )
    parser.add_argument("--namesrv", required=True, metavar="HOST:PORT[;HOST:PORT]", help="the name server(s)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--grpc-port", type=int, default=DEFAULT_GRPC_PORT, help="gRPC port (default 8081; 0: the OS picks)"
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes (default: CPUs)")
    parser.add_argument(
        "--auto-renew-invisible-ms",
        type=int,
        default=DEFAULT_AUTO_RENEW_INVISIBLE_MS,
        metavar="MS",
        help="a push consumer's message stays invisible this long, renewed while the client lives (default 60000)",
    )
    parser.add_argument(
        "--auto-renew-ahead-ms",
        type=int,
        default=DEFAULT_RENEW_AHEAD_MS,
        metavar="MS",
        help="renew that long before the invisible time runs out (default 10000)",
    )
    parser.add_argument(
        "--authentication-enabled",
        action="store_true",
        help="check each client's signature against the brokers' users (as their authentication_enabled)",
    )
    parser.add_argument(
        "--authorization-enabled",
        action="store_true",
        help="check each call against the brokers' policies (as their authorization_enabled)",
    )
    add_credential_options(parser)
    add_server_tls_options(parser)
    parser.add_argument(
        "--users-ttl-ms",
        type=int,
        default=DEFAULT_USERS_TTL_MS,
        metavar="MS",
        help="read the brokers' users and policies again after this long (default 3000; an unknown user: at once)",
    )
    parser.add_argument(
        "--ready-file", metavar="PATH", help="once every worker listens, write the address here as JSON (atomically)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_logging(with_pid=True)
    access_key, secret_key = credentials_of(args)
    options = ProxyOptions(
        namesrv_addr=args.namesrv,
        host=args.host,
        grpc_port=args.grpc_port,
        workers=args.workers,
        auto_renew_invisible_ms=args.auto_renew_invisible_ms,
        auto_renew_ahead_ms=args.auto_renew_ahead_ms,
        authentication_enabled=args.authentication_enabled,
        authorization_enabled=args.authorization_enabled,
        access_key=access_key,
        secret_key=secret_key,
        users_ttl_ms=args.users_ttl_ms,
        tls=TlsSettings.parse(
            mode=args.tls_mode,
            cert_file=args.tls_cert_file,
            key_file=args.tls_key_file,
            ca_file=args.tls_ca_file,
            client_auth=args.tls_client_auth or "none",
            outgoing=bool(args.tls_enable),
        ),
    )
    reservation = reserve_port(options.host, options.grpc_port)
    try:
        options = dataclasses.replace(options, grpc_port=reservation.getsockname()[1])
        asyncio.run(_supervise(options, args.ready_file))
    finally:
        reservation.close()
    return 0


async def _supervise(options: ProxyOptions, ready_file: str | None) -> None:
    signals = StopSignals()  # before any worker starts: a stop while starting is a clean one
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    loop = asyncio.get_running_loop()
    workers: list[BaseProcess] = []
    started_at_s: list[float] = []
    backoffs = [RestartBackoff() for _ in range(options.workers)]
    starting, stopping = True, False

    def start_worker(index: int, first: bool = False) -> None:
        if stopping:
            return
        # workers report whether they listen while the proxy starts: nobody reads the queue after that
        report = ready if starting else None
        process = context.Process(target=_worker_main, args=(options, report), name=f"pocketmq-proxy-{index}")
        process.start()
        if first:
            workers.append(process)
            started_at_s.append(loop.time())
        else:
            workers[index], started_at_s[index] = process, loop.time()
        loop.add_reader(process.sentinel, on_exit, index, process)
        log.info("event=proxy_worker_started index=%d pid=%d", index, process.pid)

    def on_exit(index: int, process: BaseProcess) -> None:
        loop.remove_reader(process.sentinel)
        process.join()
        if stopping:
            return
        delay_s = backoffs[index].next_delay_s(loop.time() - started_at_s[index])
        log.warning(
            "event=proxy_worker_exited index=%d pid=%d exitcode=%s restart_in_s=%.1f",
            index,
            process.pid,
            process.exitcode,
            delay_s,
        )
        loop.call_later(delay_s, start_worker, index)

    try:
        for index in range(options.workers):
            start_worker(index, first=True)
        for _ in range(options.workers):
            outcome = await loop.run_in_executor(None, ready.get, True, WORKER_START_TIMEOUT_S)
            if isinstance(outcome, str):
                raise RuntimeError(f"a proxy worker failed to start: {outcome}")
        starting = False
        print(f"proxy listening on {options.grpc_addr} workers {options.workers}", flush=True)
        if ready_file:
            write_ready_file(ready_file, {"grpc": options.grpc_addr})
        await signals.wait()
    finally:
        stopping = True
        for process in workers:
            if process.is_alive():
                process.terminate()
        for process in workers:
            await loop.run_in_executor(None, process.join, WORKER_STOP_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join()


def _worker_main(options: ProxyOptions, ready) -> None:
    """A worker process: serve until SIGTERM or SIGINT; tell the parent through ``ready`` (unless None) when
    listening (its pid) or why not."""
    configure_logging(with_pid=True)
    worker = ProxyWorker(options)

    async def main() -> None:
        signals = StopSignals()
        try:
            await worker.start()
        except Exception as exc:
            log.exception("event=proxy_worker_start_failed")
            if ready is not None:
                ready.put(f"{type(exc).__name__}: {exc}")
            await worker.stop()
            return
        if ready is not None:
            ready.put(os.getpid())
        try:
            await signals.wait()
        finally:
            await worker.stop()

    asyncio.run(main())
