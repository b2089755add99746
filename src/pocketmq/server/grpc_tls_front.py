"""TLS and plaintext gRPC on one port, in front of a grpc.aio server that cannot tell them apart by itself.

A grpcio server's port is either secure or insecure. RocketMQ's proxy serves both on one port, choosing per
connection by its first bytes, and the official clients count on it: the Java client starts TLS by default, the
Python and Node clients speak plaintext unless told otherwise. So with TLS on, the gRPC server listens on a Unix
socket in a private directory (reachable by this user only, never from the network), and this front owns the
public port: a ``SniffingListener`` looks at each connection's first byte, finishes the TLS handshake itself
(ALPN ``h2``, the process's certificate, client certificates when asked for) or refuses plaintext under
``enforcing``, and pipes the decrypted HTTP/2 bytes to the Unix socket and back.

What it costs: the bytes of every gRPC call cross the event loop twice more (docs/benchmarks.md).

The client's address: the gRPC server sees every call come from the Unix socket. So the front binds the socket of
each connection it opens to the gRPC server to a name of its own in the private directory (``peer-<n>``, unlinked
once connected: the kernel keeps the name as the socket's address), which grpc reports as the call's peer
(``unix:<dir>/peer-<n>``), and keeps which client address each name stands for while the connection lives (and
a minute more, ``forget_peer``): ``client_peer`` turns the peer grpc reports into the client's
(``ipv4:1.2.3.4:5``), for access control's source address ranges and the born host of a message. No client can name such a socket: the directory is this user's
only and the gRPC server listens nowhere else.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import socket
import tempfile
from pathlib import Path

from pocketmq.protocol.tls import ServerTls
from pocketmq.protocol.tls_listener import SniffingListener

log = logging.getLogger(__name__)

# How long the client address of a connection that ended stays known (``GrpcTlsFront.forget_peer``).
PEER_RETENTION_S = 60.0


class _PipeEnd(asyncio.Protocol):
    """One end of a byte pipe: what arrives here is written to the other end. Either end closing closes both;
    a full write buffer on one end stops reading on the other (backpressure both ways)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.other: _PipeEnd | None = None
        self._early: list[bytes] = []  # what arrived before the other end was connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        other = self.other
        if other is None or other.transport is None:
            self._early.append(data)
            return
        other.transport.write(data)

    def joined(self, other: _PipeEnd) -> None:
        """``other`` is connected: pass on what arrived meanwhile, and from now on as it comes."""
        self.other = other
        if self._early and other.transport is not None:
            other.transport.write(b"".join(self._early))
        self._early = []

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()


class _ClientEnd(_PipeEnd):
    """The end facing a gRPC client; connecting it opens the end facing the gRPC server's Unix socket."""

    def __init__(self, front: GrpcTlsFront):
        super().__init__()
        self._front = front
        self._local_peer: str | None = None  # the peer the gRPC server sees for this client (``client_peer``)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        transport.pause_reading()  # type: ignore[attr-defined]  # until the server end is open: bounded early bytes
        self._front.track(asyncio.get_running_loop().create_task(self._open_server_end(transport)))

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._local_peer is not None:
            self._front.forget_peer(self._local_peer)

    async def _open_server_end(self, transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        try:
            sock, local_peer = await self._front.connect_for(transport.get_extra_info("peername"))
            try:
                _, server_end = await loop.create_unix_connection(_PipeEnd, sock=sock)
            except OSError:
                sock.close()
                self._front.forget_peer(local_peer)
                raise
        except OSError as exc:
            log.warning("event=grpc_front_connect_failed reason=%s", exc)
            if self.transport is not None:
                self.transport.close()
            return
        if self.transport is None:  # the client left meanwhile
            server_end.transport.close()  # type: ignore[union-attr]
            self._front.forget_peer(local_peer)
            return
        self._local_peer = local_peer
        server_end.joined(self)
        self.joined(server_end)
        self.transport.resume_reading()


class GrpcTlsFront:
    """The public gRPC port with TLS (``start`` returns it); the gRPC server binds ``internal_address``."""

    def __init__(
        self,
        tls: ServerTls,
        host: str,
        port: int,
        *,
        peer_retention_s: float = PEER_RETENTION_S,
        reuse_port: bool = False,
    ):
        """``reuse_port``: the public port is shared with other processes' fronts (SO_REUSEPORT: the proxy's
        workers), each with its own gRPC server and private directory."""
        self._dir = Path(tempfile.mkdtemp(prefix="pocketmq-grpc-"))  # mode 0700: this user only
        self.socket_path = str(self._dir / "grpc.sock")
        self._listener = SniffingListener(
            lambda: _ClientEnd(self), tls, host, port, alpn_h2=True, reuse_port=reuse_port
        )
        self._tasks: set[asyncio.Task] = set()
        self._names = itertools.count()
        self._peers: dict[str, str] = {}  # peer the gRPC server sees -> the client's, as grpc writes a peer
        self._peer_retention_s = peer_retention_s

    def client_peer(self, peer: str) -> str:
        """The client's address (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``) for the peer grpc reports of a call that
        came through this front; ``peer`` itself for any other."""
        return self._peers.get(peer, peer)

    async def connect_for(self, client_address) -> tuple[socket.socket, str]:
        """A socket connected to the gRPC server's Unix socket, bound to a name that stands for
        ``client_address`` (a peername) until ``forget_peer``; and the peer the gRPC server will see."""
        path = str(self._dir / f"peer-{next(self._names)}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.bind(path)
            local_peer = f"unix:{path}"
            self._peers[local_peer] = _grpc_peer(client_address)  # before the server can accept it
            try:
                await asyncio.get_running_loop().sock_connect(sock, self.socket_path)
            except BaseException:
                self.forget_peer(local_peer)
                raise
            finally:
                os.unlink(path)  # the name stays the socket's address; the file is not needed
        except BaseException:
            sock.close()
            raise
        return sock, local_peer

    def forget_peer(self, local_peer: str) -> None:
        """Forget ``local_peer`` once the calls its client sent before leaving have surely asked for it: a
        handler that asked after the client left and found nothing would not know the client's address, and an
        entry denying that address would not match (a send followed by a close at once must still be denied)."""
        asyncio.get_running_loop().call_later(self._peer_retention_s, self._peers.pop, local_peer, None)

    @property
    def internal_address(self) -> str:
        return f"unix:{self.socket_path}"

    def track(self, task: asyncio.Task) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self) -> int:
        await self._listener.start()
        return self._listener.port

    async def stop(self) -> None:
        await self._listener.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"<GrpcTlsFront {self._listener!r} -> {self.internal_address}>"


def _grpc_peer(address) -> str:
    """A peername as grpc writes a peer; ``unknown`` when there is none (then no source range matches)."""
    if not isinstance(address, tuple) or len(address) < 2:
        return "unknown"
    host, port = address[0], address[1]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
