"""The real processes of a chaos run, each behind the harness proxy: a name server and two broker groups (a
SYNC master and its slave each, both allowed to act as master), on pinned ports so that a restart keeps its
addresses.

Server ``i`` listens on 127.0.0.1 and advertises ``<prefix>.<10+i>`` (its proxy address, docs/chaos.md) with
the same port numbers; the brokers' remoting and gRPC ports both go through the proxy, the name server's too.
``serving(name)`` asks a process directly (not through the proxy), so a cut link never makes a healthy process
look down.
"""

from __future__ import annotations

import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.client import Admin, ClientConfig
from pocketmq.common.errors import PocketMQError
from pocketmq.runtime.ports import free_port
from pocketmq.testing.chaos.disk import BALLAST_NAME
from pocketmq.testing.chaos.peers import PeerNames
from pocketmq.testing.chaos.proxy import ChaosProxy
from pocketmq.testing.chaos.schedule import BROKERS, GROUPS, NAMESRV, SERVERS
from pocketmq.testing.processes import FAST_DELAY_LEVEL_ARGS, PocketProcess, broker_process, namesrv_process

CLUSTER = "chaos"
GROUP_NAMES = {"a": "group-a", "b": "group-b"}
SEGMENT_BYTES = (
    8 * 1024 * 1024
)  # small commit log segments and consume queues, so a tmpfs of a few dozen MiB holds a broker
CONSUME_QUEUE_UNITS = 50_000
REVIVE_INTERVAL_MS = 200  # revive's pass interval on every broker: the loop checker's yardstick
BROKER_ARGS = [
    "--cluster",
    CLUSTER,
    "--register-interval-ms",
    "500",
    "--set",
    f"pop_revive_interval_ms={REVIVE_INTERVAL_MS}",
    "--set",
    "ha_master_lookup_interval_ms=200",
    "--set",
    "ha_metadata_sync_interval_ms=300",
    "--set",
    "ha_slave_ack_timeout_ms=1000",
    "--set",
    f"commit_log_segment_bytes={SEGMENT_BYTES}",
    "--set",
    f"consume_queue_segment_units={CONSUME_QUEUE_UNITS}",
    "--enable-slave-acting-master",
    *FAST_DELAY_LEVEL_ARGS,
]


@dataclass
class Server:
    name: str
    proc: PocketProcess
    proxy_host: str
    ports: dict[str, int]  # "remoting"/"grpc" for a broker, "namesrv" for the name server
    paused: bool = False
    should_run: bool = True

    def proxied(self, kind: str) -> str:
        return f"{self.proxy_host}:{self.ports[kind]}"

    def direct(self, kind: str) -> str:
        return f"127.0.0.1:{self.ports[kind]}"

    @property
    def pid(self) -> int | None:
        p = self.proc.proc
        return p.pid if p is not None and p.poll() is None else None


@dataclass
class ChaosCluster:
    root: Path
    proxy_prefix: str  # e.g. "127.42.7": servers advertise <prefix>.10 ...
    tmpfs_broker: str | None = None  # whose data dir is a tmpfs of tmpfs_mib (None: no tmpfs)
    tmpfs_mib: int = 96
    peers: PeerNames = field(default_factory=PeerNames)
    servers: dict[str, Server] = field(default_factory=dict)
    proxy: ChaosProxy | None = None
    mounted: Path | None = None

    # ---- start and stop ----------------------------------------------------------------------------------------
    def start(self) -> None:
        self.peers.set("sdk", os.getpid())
        proxy = self.proxy = ChaosProxy(self.peers)
        proxy.start()
        hosts = {name: f"{self.proxy_prefix}.{10 + i}" for i, name in enumerate(SERVERS)}
        ns_port = free_port(hosts[NAMESRV])
        config = self.root / "namesrv.toml"
        self.root.mkdir(parents=True, exist_ok=True)
        config.write_text("[namesrv]\nbroker_expire_ms = 2000\nscan_interval_ms = 200\n")
        # a later --port wins over namesrv_process's "--port 0"
        ns = namesrv_process(self.root / NAMESRV, extra_args=["--port", str(ns_port), "--config", str(config)])
        self._add(proxy, Server(NAMESRV, ns, hosts[NAMESRV], {"namesrv": ns_port}))
        namesrv_addr = self.servers[NAMESRV].proxied("namesrv")
        for group, (master, slave) in GROUPS.items():
            for broker_id, name in enumerate((master, slave)):
                host = hosts[name]
                ports = {"remoting": free_port(host), "grpc": free_port(host)}
                workdir = self.root / name
                if name == self.tmpfs_broker:
                    self._mount_tmpfs(workdir / "data")
                role = "sync_master" if broker_id == 0 else "slave"
                escape = ["--enable-remote-escape"] if broker_id else []
                proc = broker_process(
                    workdir,
                    GROUP_NAMES[group],
                    namesrv=namesrv_addr,
                    extra_args=[
                        *BROKER_ARGS,
                        *escape,
                        "--broker-id",
                        str(broker_id),
                        "--role",
                        role,
                        "--remoting-port",
                        str(ports["remoting"]),
                        "--port",
                        str(ports["grpc"]),
                        "--advertise",
                        f"{host}:{ports['remoting']}",
                        "--metrics-port",
                        "0",
                    ],
                )
                proc.log_path = workdir / f"{name}.log"
                proc.ready_file = workdir / f"{name}.ready.json"
                self._add(proxy, Server(name, proc, host, ports))

    def _add(self, proxy: ChaosProxy, server: Server) -> None:
        for port in server.ports.values():
            proxy.listen(server.name, server.proxy_host, port)
        server.proc.start()
        self.servers[server.name] = server
        self.peers.set(server.name, server.pid)

    def _mount_tmpfs(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        if os.system(f"mount -t tmpfs -o size={self.tmpfs_mib}m chaos-tmpfs {path} 2>/dev/null") != 0:
            raise PermissionError(f"cannot mount a tmpfs on {path} (needs root and CAP_SYS_ADMIN)")
        self.mounted = path

    def close(self, keep_tmpfs_copy: bool = False) -> None:
        """Kill everything; ``keep_tmpfs_copy``: copy the tmpfs data dir to ``<broker>/data-copy`` first (it is
        gone once unmounted), for a post-mortem."""
        for server in self.servers.values():
            if server.paused and server.proc.proc is not None:
                server.proc.proc.send_signal(signal.SIGCONT)
            server.proc.kill()
        if self.proxy is not None:
            self.proxy.close()
        if self.mounted is not None:
            if keep_tmpfs_copy:
                shutil.copytree(
                    self.mounted,
                    self.mounted.with_name("data-copy"),
                    dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(BALLAST_NAME),
                )
            os.system(f"umount -l {self.mounted} 2>/dev/null")

    # ---- addresses -----------------------------------------------------------------------------------------------
    @property
    def namesrv_addr(self) -> str:
        return self.servers[NAMESRV].proxied("namesrv")

    def grpc_endpoints(self) -> str:
        return ";".join(self.servers[b].proxied("grpc") for b in BROKERS)

    def data_dir(self, broker: str) -> Path:
        return self.root / broker / "data"

    def metrics_addr(self, broker: str) -> str | None:
        return self.servers[broker].proc.metrics

    # ---- process faults ----------------------------------------------------------------------------------------
    def kill(self, name: str) -> None:
        server = self.servers[name]
        server.should_run = False  # first: the sampler thread must not see the exit as a crash
        if server.paused:
            self.resume(name)
        server.proc.kill()
        self.peers.set(name, None)

    def stop(self, name: str) -> int | None:
        """A clean stop (SIGTERM); its exit status."""
        server = self.servers[name]
        server.should_run = False  # first: the sampler thread must not see the exit as a crash
        if server.paused:
            self.resume(name)
        code = server.proc.stop()
        self.peers.set(name, None)
        return code

    def restart(self, name: str) -> None:
        server = self.servers[name]
        server.proc.start(timeout_s=60)
        server.should_run = True
        self.peers.set(name, server.pid)

    def pause(self, name: str) -> None:
        server = self.servers[name]
        if server.proc.proc is not None and server.proc.proc.poll() is None:
            server.proc.proc.send_signal(signal.SIGSTOP)
            server.paused = True

    def resume(self, name: str) -> None:
        server = self.servers[name]
        if server.proc.proc is not None and server.paused:
            server.proc.proc.send_signal(signal.SIGCONT)
        server.paused = False

    # ---- health --------------------------------------------------------------------------------------------------
    def serving(self, name: str, timeout_s: float = 3.0) -> str | None:
        """None when ``name`` answers a request on its own port; else why not."""
        server = self.servers[name]
        if server.proc.proc is None or server.proc.proc.poll() is not None:
            code = server.proc.proc.returncode if server.proc.proc is not None else None
            return f"exited with {code}"
        try:
            with Admin(self._admin_config(name, timeout_s)) as admin:
                if name == NAMESRV:
                    admin.cluster_info()
                else:
                    admin.runtime_info(server.direct("remoting"))
        except (PocketMQError, OSError, TimeoutError) as exc:
            return f"no answer: {exc!r}"
        return None

    def commit_log_end(self, broker: str, timeout_s: float = 3.0) -> int | None:
        """Where ``broker``'s commit log ends (its max phys offset); None when it does not answer."""
        try:
            with Admin(self._admin_config(broker, timeout_s)) as admin:
                info = admin.runtime_info(self.servers[broker].direct("remoting"))
        except (PocketMQError, OSError, TimeoutError):
            return None
        return int(info["commitLogMaxOffset"]) if "commitLogMaxOffset" in info else None

    def _admin_config(self, name: str, timeout_s: float) -> ClientConfig:
        """An admin client's config that reaches ``name`` directly, past the proxy."""
        namesrv = self.servers[NAMESRV].direct("namesrv")
        return ClientConfig(
            namesrv_addr=self.servers[name].direct("namesrv") if name == NAMESRV else namesrv,
            request_timeout_s=timeout_s,
        )
