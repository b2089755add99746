"""``pocketmq serve``: one broker process: its remoting port, its gRPC port, and (unless ``--namesrv`` names
external ones) an embedded name server.

Start order: name server, remoting front end (bound first: its port is baked into message ids), gRPC front
end when ``pocketmq.server.grpc_server`` is importable, then the broker services (store recovery,
registration). Once everything listens it prints the addresses and writes the ready file
(``{"remoting": ..., "namesrv": ... | null, "grpc": ... | null, "metrics": ... | null, "console": ... | null}``;
``--console-port`` serves the web console and ``/metrics`` (docs/console.md), ``--metrics-port`` Prometheus
``/metrics`` alone, docs/metrics.md). SIGTERM or SIGINT stops it cleanly, in
the reverse order: front ends stop taking requests, the broker unregisters and persists, the name server goes.

Configuration: defaults < ``--config FILE`` (TOML ``[broker]`` section or RocketMQ ``broker.conf``) <
``POCKETMQ_*`` environment < flags; ``--set key=value`` sets any ``BrokerConfig`` field. ``--tls-*`` flags
(docs/security.md): one certificate serves every port of the process, reloaded when its files change.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import logging
import os
import sys
from collections.abc import Awaitable, Callable

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.cli.listening import listening
from pocketmq.cli.running import StopSignals, configure_logging, write_ready_file
from pocketmq.cli.tls_cmd import add_server_tls_options, server_tls_overrides
from pocketmq.client.config import default_namesrv_addr
from pocketmq.common.config import load_config
from pocketmq.common.errors import ConfigError
from pocketmq.console.server import ConsoleServer, console_client_config
from pocketmq.metrics.http import MetricsHttpServer
from pocketmq.protocol.tls import ServerTls
from pocketmq.protocol.transport import RemotingServer
from pocketmq.runtime import busy_poll
from pocketmq.runtime.open_files import raise_open_files_limit
from pocketmq.server.remoting_broker import build_broker_router

log = logging.getLogger(__name__)

GRPC_STOP_GRACE_S = 2.0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run a broker (with an embedded name server unless --namesrv)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--remoting-port", type=int, help="remoting (RocketMQ 4.x protocol) port, default 10911")
    p.add_argument("--port", dest="grpc_port", type=int, help="gRPC (RocketMQ 5 protocol) port, default 8081")
    p.add_argument("--namesrv-port", type=int, help="port of the embedded name server, default 9876")
    p.add_argument(
        "--namesrv",
        dest="namesrv_addr",
        metavar="HOST:PORT[;HOST:PORT]",
        help="external name server(s); no embedded one is started",
    )
    p.add_argument("--data-dir", help="where the store and metadata live, default ./data")
    p.add_argument("--flush", dest="flush_mode", choices=("async", "sync"), help="ASYNC_FLUSH (default) or SYNC_FLUSH")
    p.add_argument("--broker-name", help="default broker-a")
    p.add_argument("--cluster-name", "--cluster", dest="cluster_name", help="default DefaultCluster")
    p.add_argument("--broker-id", type=int, help="0 (default) is the master of its group; > 0 a slave")
    p.add_argument(
        "--role",
        dest="broker_role",
        choices=("async_master", "sync_master", "slave"),
        help="replication role (docs/ha.md), default async_master",
    )
    p.add_argument(
        "--advertise",
        metavar="HOST:PORT",
        help="remoting address others and clients must use (default --host and the bound port)",
    )
    p.add_argument(
        "--enable-slave-acting-master",
        action="store_true",
        default=None,
        help="a slave runs delay delivery and POP revive while its master is gone (docs/ha.md)",
    )
    p.add_argument(
        "--enable-remote-escape",
        action="store_true",
        default=None,
        help="what an acting slave must write goes to another group's master (docs/ha.md)",
    )
    p.add_argument("--config", help="TOML file ([broker] section) or RocketMQ broker.conf")
    p.add_argument("--host", help="address to bind, default 127.0.0.1")
    p.add_argument("--advertise-host", help="IPv4 address clients are told to use, default --host")
    p.add_argument("--register-interval-ms", type=int, help="re-registration period with the name servers")
    p.add_argument(
        "--broker-expire-ms", type=int, help="embedded name server: drop a broker silent this long (default 120000)"
    )
    p.add_argument("--namesrv-scan-interval-ms", type=int, help="embedded name server: expiry scan period")
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any broker setting (field name or broker.conf key); repeatable",
    )
    p.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics over HTTP on this port (0: any)")
    p.add_argument(
        "--console-port", type=int, help="serve the web console (and /metrics) over HTTP on this port (0: any)"
    )
    p.add_argument(
        "--busy-poll-us",
        type=int,
        help="while requests come close together, poll the sockets this long before sleeping (default 200; 0: never)",
    )
    p.add_argument("--ready-file", help="write the listening addresses here as JSON once ready")
    p.add_argument(
        "--controller",
        metavar="etcd://HOST:PORT[,HOST:PORT...]",
        help="elect the group's master through etcd (one endpoint, or the members of an etcd cluster); "
        "--broker-id names this broker in its group (docs/failover.md)",
    )
    add_server_tls_options(p)
    p.set_defaults(func=run)


def broker_config_from_args(args: argparse.Namespace) -> BrokerConfig:
    overrides: dict[str, object] = {}
    sources: dict[str, str] = {}
    for item in args.settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = value.strip()
        sources[key.strip()] = f"--set {key.strip()}"
    for name in (
        "remoting_port",
        "grpc_port",
        "namesrv_port",
        "namesrv_addr",
        "data_dir",
        "flush_mode",
        "broker_name",
        "cluster_name",
        "host",
        "advertise_host",
        "register_interval_ms",
        "broker_id",
        "broker_role",
        "metrics_port",
        "console_port",
        "enable_slave_acting_master",
        "enable_remote_escape",
        "busy_poll_us",
    ):
        value = getattr(args, name)
        if value is not None:
            overrides[name] = value
    overrides.update(server_tls_overrides(args))
    if args.advertise:
        host, sep, port = args.advertise.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"--advertise {args.advertise!r}: expected HOST:PORT")
        overrides["advertise_host"], overrides["advertise_port"] = host, port
    return load_config(BrokerConfig, file=args.config, section="broker", overrides=overrides, override_sources=sources)


def run(args: argparse.Namespace) -> int:
    configure_logging()
    config = broker_config_from_args(args)
    raise_open_files_limit(config.remoting_max_connections)
    namesrv_overrides = {"broker_expire_ms": args.broker_expire_ms, "scan_interval_ms": args.namesrv_scan_interval_ms}
    with asyncio.Runner(loop_factory=busy_poll.loop_factory(config.busy_poll_us)) as runner:
        if args.controller:
            from pocketmq.cli.controlled_serve import serve_controlled

            runner.run(serve_controlled(config, args.controller, args.ready_file, serve))
        else:
            runner.run(serve(config, namesrv_overrides=namesrv_overrides, ready_file=args.ready_file))
    return 0


OPEN_BROKER_WARNING = (
    "WARNING: access control is off and this broker listens on {host}, beyond this machine: anyone who reaches "
    "its ports can delete topics holding messages (DELETE_TOPIC_IN_BROKER), move any group's offsets, change and "
    "persist settings (UPDATE_BROKER_CONFIG), remove or fake brokers in the name server's routes "
    "(UNREGISTER_BROKER, REGISTER_BROKER), read the whole commit log (HA_PULL_COMMIT_LOG) and forge POP acks "
    "(ESCAPE_PUT_MESSAGE). Turn on authentication_enabled and authorization_enabled (docs/security.md)."
)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def warn_if_open(config: BrokerConfig) -> None:
    """At every start: a broker reachable from other machines without access control says what that allows."""
    if not config.access_control_enabled and not is_loopback(config.host):
        print(OPEN_BROKER_WARNING.format(host=config.host), file=sys.stderr, flush=True)
        log.warning("event=access_control_off host=%s", config.host)


async def serve(
    config: BrokerConfig,
    *,
    namesrv_overrides: dict | None = None,
    ready_file: str | None = None,
    until: Callable[[], Awaitable[None]] | None = None,
    on_broker: Callable[[Broker], None] = lambda broker: None,
) -> None:
    """Serve until ``until()`` returns (by default a stop signal; under a controller, also a change of role)."""
    if until is None:
        until = StopSignals().wait  # caught from here on: a stop that comes while starting is a clean one
    warn_if_open(config)
    namesrv = None
    tls_settings = config.tls_settings()
    # one certificate for every port of the process (remoting, gRPC, the embedded name server)
    tls = ServerTls(tls_settings) if tls_settings.serves_tls else None
    if config.namesrv_addr is None:
        from pocketmq.namesrv.config import NamesrvConfig
        from pocketmq.namesrv.server import NameServer

        settings = {k: v for k, v in (namesrv_overrides or {}).items() if v is not None}
        namesrv = NameServer(
            NamesrvConfig(
                host=config.host,
                port=config.namesrv_port,
                authentication_enabled=config.access_control_enabled,
                inner_access_key=config.inner_access_key,
                inner_secret_key=config.inner_secret_key,
                **settings,
            ),
            tls=tls,
        )
        with listening("the embedded name server", "--namesrv-port", config.host, config.namesrv_port):
            await namesrv.start()
        config = dataclasses.replace(config, namesrv_addr=namesrv.address)
    broker = Broker(config)
    on_broker(broker)
    remoting = RemotingServer(
        build_broker_router(broker),
        config.host,
        config.remoting_port,
        limits=config.connection_limits(),
        metrics=broker.metrics,
        tls=tls,
    )
    grpc = None
    metrics = None
    console = None
    try:
        with listening("remoting", "--remoting-port", config.host, config.remoting_port):
            await remoting.start()
        if tls is not None:
            tls.start_reloading(broker.metrics)
        grpc = _grpc_front_end(broker, config, tls)
        with listening("gRPC", "--port", config.host, config.grpc_port):
            grpc_port = await grpc.start() if grpc is not None else None
        await broker.start(remoting_port=remoting.port, grpc_port=grpc_port)
        if config.metrics_port is not None:
            metrics = MetricsHttpServer(broker.metrics, config.host, config.metrics_port)
            with listening("metrics", "--metrics-port", config.host, config.metrics_port):
                await metrics.start()
        if config.console_port is not None:
            console = embedded_console(config, broker, tls)
            with listening("the console", "--console-port", config.host, config.console_port):
                await console.start()
        addresses = {
            "remoting": f"{config.host}:{remoting.port}",
            "namesrv": namesrv.address if namesrv is not None else None,
            "grpc": f"{config.host}:{grpc_port}" if grpc_port is not None else None,
            "metrics": metrics.address if metrics is not None else None,
            "console": console.url if console is not None else None,
        }
        tls_mode = tls.mode.value if tls is not None else None
        print(ready_message(config, addresses, embedded=namesrv is not None, tls_mode=tls_mode), flush=True)
        if ready_file:
            write_ready_file(ready_file, addresses)
        await until()
        log.info("event=stopping broker=%s", config.broker_name)
    finally:
        if console is not None:
            await console.stop()
        if metrics is not None:
            await metrics.stop()
        await remoting.stop()
        if grpc is not None:
            await grpc.stop(GRPC_STOP_GRACE_S)
        await broker.shutdown()
        if namesrv is not None:
            await namesrv.stop()
        if tls is not None:
            await tls.stop_reloading()


def ready_message(
    config: BrokerConfig, addresses: dict[str, str | None], *, embedded: bool, tls_mode: str | None = None
) -> str:
    """What a person starting a broker reads: where each protocol listens, and a first command to try (not when
    TLS is enforced: a plaintext command would be refused)."""
    namesrv = addresses["namesrv"] or str(config.namesrv_addr)
    rows = [
        ("name server", namesrv + (" (embedded)" if embedded else "")),
        ("remoting", f"{addresses['remoting']} (RocketMQ 4 clients, the PocketMQ SDK and CLI)"),
        ("gRPC", f"{addresses['grpc']} (RocketMQ 5 clients)" if addresses["grpc"] else "off"),
    ]
    if addresses["metrics"]:
        rows.append(("metrics", f"http://{addresses['metrics']}/metrics"))
    if addresses.get("console"):
        rows.append(("console", f"{addresses['console']}/ (and /metrics)"))
    if tls_mode is not None:
        rows.append(("TLS", tls_mode))
    cli = sys.argv[0] if os.path.basename(sys.argv[0]) == "pocketmq" else "pocketmq"  # .venv/bin/pocketmq
    n = "" if namesrv == default_namesrv_addr() else f" -n {namesrv}"
    lines = [
        f"pocketmq broker {config.broker_name} ready, data in {config.data_dir}",
        *(f"  {name:<12} {value}" for name, value in rows),
    ]
    if tls_mode != "enforcing":
        lines.append(f"try: {cli} send hello --body 'hi'{n} && {cli} tail hello --from-beginning --max 1{n}")
    return "\n".join(lines)


def embedded_console(config: BrokerConfig, broker: Broker, tls: ServerTls | None) -> ConsoleServer:
    """The console inside this broker: it talks to the cluster through the broker's name server, as its own
    client would (over TLS when the broker's connections are), over HTTPS when the broker serves TLS, asking
    for a user's credentials when access control is on."""
    settings = config.tls_settings()
    client = console_client_config(
        str(config.namesrv_addr),
        tls=settings.opens_tls,
        ca_file=settings.ca_file,
        tls_cert_file=settings.cert_file,
        tls_key_file=settings.key_file,
    )
    return ConsoleServer(
        client,
        config.host,
        int(config.console_port or 0),
        login_required=config.access_control_enabled,
        ssl_context=tls.remoting if tls is not None else None,
        metrics=broker.metrics,
    )


def _grpc_front_end(broker: Broker, config: BrokerConfig, tls: ServerTls | None):
    """The gRPC front end, or None when this build has none yet."""
    try:
        from pocketmq.server.grpc_server import GrpcFrontEnd
    except ModuleNotFoundError as exc:
        if exc.name != "pocketmq.server.grpc_server":
            raise
        log.info("event=grpc_front_end_absent")
        return None
    return GrpcFrontEnd(broker, config.host, config.grpc_port, tls=tls)
