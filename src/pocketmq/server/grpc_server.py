"""The gRPC v2 front end: a grpc.aio server on the broker's event loop, serving ``MessagingService``.

``GrpcFrontEnd(broker, host, port)``: ``await start()`` binds (port 0: the OS picks) and returns the bound
port; ``await stop(grace_s)`` ends every client stream, then lets in-flight requests finish for up to
``grace_s``. The front end may start before ``broker.start()`` (the broker needs the bound port to advertise
it); requests that arrive before the broker has started are answered INTERNAL_SERVER_ERROR ("starting").

Limits: messages up to ``MAX_GRPC_MESSAGE_BYTES`` each way (a 4 MiB body plus its envelope must pass: grpc's
own 4 MiB default would refuse it with RESOURCE_EXHAUSTED); at most ``max_inflight_sends`` SendMessage
requests at once, beyond which a send is answered TOO_MANY_REQUESTS. Sessions of clients that stop sending
heartbeats expire after the broker's ``client_channel_expire_ms`` (120 s by default), checked every
``client_scan_interval_ms`` (a periodic task, ``grpc-session-expiry``, on the front end's clock).

TLS (``tls``, docs/security.md): the grpc server then binds a private Unix socket and the public port is a
``GrpcTlsFront`` that serves TLS and plaintext clients on it (server/grpc_tls_front.py).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import grpc

from pocketmq.protocol.grpc_service import add_messaging_service
from pocketmq.protocol.tls import ServerTls
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.periodic import PeriodicTask
from pocketmq.server.client_metrics import MetricsSink
from pocketmq.server.grpc_servicer import DEFAULT_MAX_INFLIGHT_SENDS, MessagingServicer
from pocketmq.server.grpc_tls_front import GrpcTlsFront
from pocketmq.server.sessions import SessionRegistry

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

MAX_GRPC_MESSAGE_BYTES = 130 * 1024 * 1024  # as the Apache proxy


class GrpcFrontEnd:
    def __init__(
        self,
        broker: Broker,
        host: str,
        port: int,
        *,
        clock: Clock | None = None,
        heartbeat_timeout_ms: int | None = None,
        scan_interval_ms: int | None = None,
        max_inflight_sends: int = DEFAULT_MAX_INFLIGHT_SENDS,
        tls: ServerTls | None = None,
    ):
        self._broker = broker
        # TLS served: the public port is a front that sniffs each connection (server/grpc_tls_front.py)
        self._front = GrpcTlsFront(tls, host, port) if tls is not None and tls.settings.serves_tls else None
        self._host = host
        self._requested_port = port
        self._clock = clock or broker.clock
        self.sessions = SessionRegistry(heartbeat_timeout_ms or broker.config.client_channel_expire_ms)
        broker.gray.add_member_source(self.sessions.consumers_of)  # POP clients count in their group's gray split
        broker.consumers.add_online_source(self.sessions.online_consumers)  # and show in consumer listings
        self.servicer = MessagingServicer(
            broker,
            self.sessions,
            self._clock,
            max_inflight_sends=max_inflight_sends,
            client_peer=self._front.client_peer if self._front is not None else None,
        )
        self.metrics_sink = MetricsSink()
        self._server: grpc.aio.Server | None = None
        self._expiry = PeriodicTask(
            "grpc-session-expiry",
            lambda: self.sessions.expire(self._clock.now_ms()),
            scan_interval_ms or broker.config.client_scan_interval_ms,
            clock=self._clock,
            metrics=broker.metrics,
        )
        self.port: int | None = None

    async def start(self) -> int:
        """Bind and serve; returns the bound port. Raises RuntimeError when the address cannot be bound."""
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),  # a port in use must fail to bind, not be shared
            ]
        )
        add_messaging_service(self.servicer, server)
        self.metrics_sink.add_to(server)  # what Python push consumers export to when no collector is configured
        host = f"[{self._host}]" if ":" in self._host else self._host
        address = self._front.internal_address if self._front else f"{host}:{self._requested_port}"
        bound = server.add_insecure_port(address)
        if not bound:  # older grpc versions report a failed bind as port 0
            raise RuntimeError(f"cannot bind gRPC to {address}")
        await server.start()
        self._server = server
        self.port = await self._front.start() if self._front is not None else bound
        self._expiry.start()
        self.servicer.consumers.start()  # auto-renewed invisibility of push consumers' messages
        log.info(
            "event=grpc_listening host=%s port=%d heartbeat_timeout_ms=%d",
            self._host,
            self.port,
            self.sessions.heartbeat_timeout_ms,
        )
        return self.port

    async def stop(self, grace_s: float = 5.0) -> None:
        """End client streams, then stop; requests in flight get up to ``grace_s`` to finish."""
        await self._expiry.stop()
        await self.servicer.consumers.stop()
        self.sessions.close_all()
        if self._front is not None:
            await self._front.stop()
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
            log.info("event=grpc_stopped port=%s", self.port)

    def __repr__(self) -> str:
        state = f"port={self.port}" if self._server is not None else "stopped"
        return f"<GrpcFrontEnd {self._host} {state} sessions={len(self.sessions)}>"
