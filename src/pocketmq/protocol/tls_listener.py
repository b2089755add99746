"""A listening port that serves TLS and plaintext side by side, as RocketMQ's servers do in permissive mode.

Each accepted connection's first byte is looked at without being consumed (``MSG_PEEK``): ``0x16`` opens a TLS
handshake, and the socket is handed to asyncio with the server's SSL context; anything else is plaintext and is
handed over as it is, unless the mode is ``enforcing``, which closes it at once (the client sees its connection
closed, not a hang). The protocol of a connection (``protocol_factory``) sees the decrypted bytes either way.

Clients of both protocols served here speak first (a remoting request, an HTTP/2 preface, a ClientHello), so
the server never has to guess from silence. A connection that says nothing within ``FIRST_BYTE_TIMEOUT_S``, or
whose handshake takes longer than ``HANDSHAKE_TIMEOUT_S``, is closed; at most ``max_pending`` connections wait
for either at once (those past it are closed as they arrive).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

from pocketmq.protocol.limits import OPEN_FILES, LimitReporter
from pocketmq.protocol.tls import TLS_HANDSHAKE_RECORD, ServerTls, TlsMode
from pocketmq.runtime.rate_limited_log import RateLimitedLog

log = logging.getLogger(__name__)

FIRST_BYTE_TIMEOUT_S = 10.0
HANDSHAKE_TIMEOUT_S = 10.0
DEFAULT_MAX_PENDING = 1_024
ACCEPT_RETRY_S = 1.0  # out of file descriptors: wait this long before accepting again (as asyncio's servers do)
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class SniffingListener:
    """Accepts on host:port and hands each connection, TLS or plaintext as its first byte says, to a protocol of
    ``protocol_factory``. ``tls.grpc`` is used instead of ``tls.remoting`` when ``alpn_h2``."""

    def __init__(
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        tls: ServerTls,
        host: str,
        port: int,
        *,
        alpn_h2: bool = False,
        max_pending: int = DEFAULT_MAX_PENDING,
        reporter: LimitReporter | None = None,
        reuse_port: bool = False,
    ):
        """``reuse_port``: bind with SO_REUSEPORT, sharing the port with other processes that do (the proxy's
        workers)."""
        self._protocol_factory = protocol_factory
        self._reuse_port = reuse_port
        self._tls = tls
        self._host = host
        self._requested_port = port
        self._alpn_h2 = alpn_h2
        self._max_pending = max_pending
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task | None = None
        self._pending: set[asyncio.Task] = set()
        self._log = RateLimitedLog(log, 10.0)
        self._reporter = reporter or LimitReporter()  # failed accepts count as the open files limit, as elsewhere
        self.plaintext_connections = 0
        self.tls_connections = 0
        self.refused_connections = 0

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.create_server(
            (self._host, self._requested_port), family=family, backlog=1024, reuse_port=self._reuse_port
        )
        sock.setblocking(False)
        self._sock = sock
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop(), name=f"tls-accept-{self.port}")

    @property
    def running(self) -> bool:
        return self._sock is not None

    @property
    def port(self) -> int:
        assert self._sock is not None, "listener not started"
        return self._sock.getsockname()[1]

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        listener = self._sock
        assert listener is not None
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._reporter.exceeded(
                        OPEN_FILES, f"{self._host}:{self.port}", f"reason={exc!r} (accepting again in 1 s)"
                    )
                    await asyncio.sleep(ACCEPT_RETRY_S)
                continue  # a connection reset before it was accepted: nothing to do
            if len(self._pending) >= self._max_pending:
                self.refused_connections += 1
                self._log.warning("pending", "event=tls_pending_full port=%d max=%d", self.port, self._max_pending)
                conn.close()
                continue
            task = loop.create_task(self._open(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _open(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        peer = _peer_text(conn)
        try:
            async with asyncio.timeout(FIRST_BYTE_TIMEOUT_S):
                first = await _peek_first_byte(loop, conn)
        except (TimeoutError, OSError):
            conn.close()
            return
        if not first:  # closed before saying anything
            conn.close()
            return
        if first[0] != TLS_HANDSHAKE_RECORD:
            if self._tls.mode is TlsMode.ENFORCING:
                self.refused_connections += 1
                self._log.warning(
                    "plaintext", "event=plaintext_refused port=%d remote=%s mode=enforcing", self.port, peer
                )
                conn.close()
                return
            self.plaintext_connections += 1
            try:
                await loop.connect_accepted_socket(self._protocol_factory, conn)
            except OSError:
                conn.close()
            return
        context = self._tls.grpc if self._alpn_h2 else self._tls.remoting
        try:
            await loop.connect_accepted_socket(
                self._protocol_factory, conn, ssl=context, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S
            )
        except (OSError, TimeoutError, ConnectionError) as exc:  # ssl.SSLError is an OSError
            self.refused_connections += 1
            self._log.warning(
                f"handshake:{type(exc).__name__}",
                "event=tls_handshake_failed port=%d remote=%s reason=%s",
                self.port,
                peer,
                exc,
            )
            conn.close()
            return
        self.tls_connections += 1

    async def stop(self) -> None:
        if self._accepting is not None:
            for task in (self._accepting, *self._pending):
                task.cancel()
            await asyncio.gather(self._accepting, *self._pending, return_exceptions=True)
            self._accepting = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __repr__(self) -> str:
        where = f"{self._host}:{self.port}" if self._sock is not None else "stopped"
        return (
            f"<SniffingListener {where} {self._tls.mode.value} tls={self.tls_connections} "
            f"plaintext={self.plaintext_connections} refused={self.refused_connections}>"
        )


async def _peek_first_byte(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> bytes:
    """The connection's first byte, left in the socket for whoever reads it next (b"" when the peer closed)."""
    readable: asyncio.Future[None] = loop.create_future()
    fd = conn.fileno()

    def ready() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
    return conn.recv(1, socket.MSG_PEEK)


def _peer_text(conn: socket.socket) -> str:
    try:
        host, port = conn.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"
