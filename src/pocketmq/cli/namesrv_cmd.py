"""``pocketmq namesrv [--host H] [--port N] [--config FILE] [--ready-file PATH]``: a standalone name server.

Prints ``namesrv listening on HOST:PORT`` once listening, writes the ready file then, and stops cleanly on
SIGTERM or SIGINT. Settings: ``NamesrvConfig`` (file section ``[namesrv]``, ``POCKETMQ_*`` env, these flags).
"""

from __future__ import annotations

import argparse
import asyncio

from pocketmq.cli.listening import listening
from pocketmq.cli.running import configure_logging, run_until_signalled, write_ready_file
from pocketmq.cli.tls_cmd import add_server_tls_options, server_tls_overrides
from pocketmq.common.config import load_config
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.server import NameServer


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "namesrv",
        help="run a standalone name server",
        description="Run a name server: brokers register with it, clients ask it for routes.",
    )
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (default 9876; 0: the OS picks)")
    parser.add_argument("--config", metavar="FILE", help="TOML file (section [namesrv]) or namesrv.conf")
    parser.add_argument(
        "--ready-file", metavar="PATH", help="once listening, write the addresses here as JSON (atomically)"
    )
    add_server_tls_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(
        NamesrvConfig,
        file=args.config,
        section="namesrv",
        overrides={"host": args.host, "port": args.port, **server_tls_overrides(args)},
    )
    configure_logging()
    namesrv = NameServer(config)

    async def start() -> None:
        with listening("the name server", "--port", config.host, config.port):
            await namesrv.start()
        print(f"namesrv listening on {namesrv.address}", flush=True)
        if args.ready_file:
            write_ready_file(args.ready_file, {"namesrv": namesrv.address})

    asyncio.run(run_until_signalled(start, namesrv.stop))
    return 0
