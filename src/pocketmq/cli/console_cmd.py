"""``pocketmq console``: the web console alone, for a whole cluster through its name server (docs/console.md).

It talks to the brokers over the remoting protocol with the SDK's admin client (the client options: ``-n``,
``--tls``, ``--ca-file`` ... are those of every client command). ``--login`` asks every visitor for a user of
the brokers (HTTP basic auth: the user's name and password are signed into each request, so the brokers'
policies decide what each user sees and does); without it, a request without credentials reaches the brokers
as the client options' ``--access-key`` (or unsigned). ``--https-cert-file`` and ``--https-key-file`` serve
the console over TLS.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ssl

from pocketmq.cli.listening import listening
from pocketmq.cli.output import add_client_options, client_config
from pocketmq.cli.running import configure_logging, run_until_signalled, write_ready_file
from pocketmq.common.errors import ConfigError
from pocketmq.console.server import CONSOLE_CONNECT_TIMEOUT_S, CONSOLE_REQUEST_TIMEOUT_S, ConsoleServer

DEFAULT_PORT = 8080


def register(subparsers) -> None:
    p = subparsers.add_parser("console", help="run the web console for a cluster", description=__doc__.split("\n\n")[0])
    add_client_options(p, json_output=False)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: the OS picks)")
    p.add_argument(
        "--login",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="ask every visitor for a user of the brokers (access control on; default off)",
    )
    p.add_argument("--https-cert-file", help="serve HTTPS with this certificate (PEM)")
    p.add_argument("--https-key-file", help="the key of --https-cert-file")
    p.add_argument("--ready-file", metavar="PATH", help="once listening, write its URL here as JSON")
    p.set_defaults(func=run)


def https_context(cert_file: str | None, key_file: str | None) -> ssl.SSLContext | None:
    if cert_file is None:
        if key_file is not None:  # without the certificate the console would serve the logins in plain HTTP
            raise ConfigError("--https-key-file needs --https-cert-file")
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def run(args: argparse.Namespace) -> int:
    configure_logging()
    config = dataclasses.replace(
        client_config(args),
        instance_name="console",
        request_timeout_s=CONSOLE_REQUEST_TIMEOUT_S,
        connect_timeout_s=CONSOLE_CONNECT_TIMEOUT_S,
    )
    console = ConsoleServer(
        config,
        args.host,
        args.port,
        login_required=args.login,
        ssl_context=https_context(args.https_cert_file, args.https_key_file),
    )

    async def start() -> None:
        with listening("the console", "--port", args.host, args.port):
            await console.start()
        print(f"pocketmq console for {config.namesrv_addr} at {console.url}/", flush=True)
        if args.ready_file:
            write_ready_file(args.ready_file, {"console": console.url})

    asyncio.run(run_until_signalled(start, console.stop))
    return 0
