"""One proxy worker: a grpc.aio server on the shared port (SO_REUSEPORT) serving ``ProxyServicer``, and the SDK
client instance it reaches the brokers with (routes, heartbeats as a producer of its clients' topics, the
brokers' transaction checks). With TLS served the public port is the worker's own TLS front (shared with the other
workers' fronts) piping to its gRPC server on a private Unix socket (server/grpc_tls_front.py).

``reserve_port(host, port)`` is the parent's: a socket bound with SO_REUSEPORT (port 0: the OS picks) that
never listens, held while the workers run, so the port stays the proxy's when a worker restarts; the kernel
spreads connections over the workers' listening sockets only.
"""

from __future__ import annotations

import logging
import os
import socket

import grpc

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.config import ClientConfig
from pocketmq.client.instance import ClientInstance
from pocketmq.client.producer import ProducerOptions
from pocketmq.protocol.grpc_service import add_messaging_service
from pocketmq.protocol.tls import ServerTls, TlsSettings
from pocketmq.proxy.access import UsersRefresher, proxy_gate
from pocketmq.proxy.groups import GroupSettings
from pocketmq.proxy.options import ProxyOptions
from pocketmq.proxy.sender import ProxySender
from pocketmq.proxy.servicer import ProxyServicer
from pocketmq.proxy.users import BrokerUsers
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.runtime.periodic import PeriodicTask
from pocketmq.server.client_metrics import MetricsSink
from pocketmq.server.grpc_server import MAX_GRPC_MESSAGE_BYTES
from pocketmq.server.grpc_tls_front import GrpcTlsFront
from pocketmq.server.sessions import SessionRegistry

log = logging.getLogger(__name__)

SENDER_GROUP = "POCKETMQ_PROXY"  # the producer group of the workers' plain sends


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` with SO_REUSEPORT that never listens; its port is the workers'."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _broker_tls(tls: TlsSettings) -> dict:
    """The ClientConfig fields of TLS to the brokers and name servers: the CA to verify them, and this process's
    certificate for those that require one."""
    if not tls.opens_tls:
        return {}
    return {"tls": True, "ca_file": tls.ca_file, "tls_cert_file": tls.cert_file, "tls_key_file": tls.key_file}


class ProxyWorker:
    def __init__(self, options: ProxyOptions, *, clock: Clock = SYSTEM_CLOCK):
        self.options = options
        config = ClientConfig(
            namesrv_addr=options.namesrv_addr,
            instance_name=f"proxy-{os.getpid()}",
            request_timeout_s=options.request_timeout_s,
            access_key=options.access_key,
            secret_key=options.secret_key,
            **_broker_tls(options.tls),
        )
        self.instance = ClientInstance(config, clock=clock)
        self.sender = ProxySender(
            config,
            ProducerOptions(
                group=SENDER_GROUP,
                send_timeout_s=options.request_timeout_s,
                max_message_bytes=options.max_message_bytes,
            ),
            instance=self.instance,
        )
        self._admin = AsyncAdmin(config, instance=self.instance)
        self.sessions = SessionRegistry(options.client_channel_expire_ms)
        groups = GroupSettings(self._admin, clock, options.group_settings_ttl_ms)
        self._interceptors: list[grpc.aio.ServerInterceptor] = []
        gate = None
        if options.access_control_enabled:
            users = BrokerUsers(self._admin, clock, options.users_ttl_ms)
            self._interceptors.append(UsersRefresher(users))
            gate = proxy_gate(
                users,
                authentication_enabled=options.authentication_enabled,
                authorization_enabled=options.authorization_enabled,
            )
        # TLS served: each worker's front shares the public port and pipes to its own gRPC server
        self._tls = ServerTls(options.tls) if options.tls.serves_tls else None
        self._front = (
            GrpcTlsFront(self._tls, options.host, options.grpc_port, reuse_port=True) if self._tls is not None else None
        )
        self.servicer = ProxyServicer(
            options,
            self.instance,
            self.sender,
            groups,
            self.sessions,
            clock,
            gate=gate,
            client_peer=self._front.client_peer if self._front is not None else None,
        )
        self.metrics_sink = MetricsSink()
        self._expiry = PeriodicTask(
            "proxy-session-expiry",
            lambda: self.sessions.expire(clock.now_ms()),
            options.client_scan_interval_ms,
            clock=clock,
        )
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        """Start the client instance, then serve on the options' port, shared with the other workers."""
        await self.instance.start()
        await self.sender.start()
        await self._admin.start()
        server = grpc.aio.server(
            interceptors=self._interceptors,
            options=[
                ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
                ("grpc.so_reuseport", 1),  # every worker listens on the one port
            ],
        )
        add_messaging_service(self.servicer, server)
        self.metrics_sink.add_to(server)
        host = f"[{self.options.host}]" if ":" in self.options.host else self.options.host
        address = self._front.internal_address if self._front is not None else f"{host}:{self.options.grpc_port}"
        if not server.add_insecure_port(address):
            raise RuntimeError(f"cannot bind gRPC to {address}")
        await server.start()
        self._server = server
        if self._front is not None and self._tls is not None:
            await self._front.start()
            self._tls.start_reloading()
        self._expiry.start()
        self.servicer.consumers.renewer.start()
        log.info("event=proxy_worker_listening pid=%d port=%d", os.getpid(), self.options.grpc_port)

    async def stop(self, grace_s: float = 5.0) -> None:
        await self._expiry.stop()
        await self.servicer.consumers.renewer.stop()
        self.sessions.close_all()
        if self._front is not None and self._tls is not None:
            await self._front.stop()
            await self._tls.stop_reloading()
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
        await self._admin.shutdown()
        await self.sender.shutdown()
        await self.instance.shutdown()
        log.info("event=proxy_worker_stopped pid=%d calls=%d", os.getpid(), self.servicer.calls)

    def __repr__(self) -> str:
        return f"<ProxyWorker pid={os.getpid()} {self.servicer!r} sessions={len(self.sessions)}>"
