"""Blocking remoting connections for the synchronous ``Producer``'s sends: the calling thread writes the request
and waits for the reply itself.

Why not the client loop thread: a synchronous call handed to the loop costs two thread hand-offs (a self-pipe write
to wake the loop, a lock to wake the caller) and the loop's own turn, as much CPU as the rest of a lone send
(measured on the project's 2-vCPU VM: 4,650 sends/s one at a time this way, 1,600-2,900 through the loop).

A channel serves one call at a time; ``BlockingChannels`` keeps the idle ones per broker address, so each thread
that sends gets a channel of its own. Channels send no heartbeat: brokers never send them requests of their own.
A channel that failed or timed out is closed, so a late reply can never be taken for the next call's; an idle one
the broker closed (a restart) is noticed before it is reused, and those to a broker that left every route are
closed when the client's routes drop it.

``ClientConfig.sync_reply_busy_poll_us`` (0 by default) makes the caller poll the socket that long for its reply
before it sleeps, yielding its CPU between looks: a reply caught while polling wakes nobody. It pays off when the
broker busy-polls too (``serve --busy-poll-us``, runtime/busy_poll.py; docs/benchmarks.md), and costs CPU.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import struct
import time

from pocketmq.auth.signature import Credentials
from pocketmq.common.errors import ClientError, RemotingError, RemotingTimeoutError
from pocketmq.protocol.command import FrameDecoder, MalformedFrameError, RemotingCommand
from pocketmq.protocol.transport import connect_errors, host_port

_RECV_BYTES = 256 * 1024
# A wait ran out: a timeout, or a send or recv that SO_SNDTIMEO/SO_RCVTIMEO cut short (on a TLS socket, as a "want")
_WAIT_RAN_OUT = (TimeoutError, BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
_TIMEVAL = struct.Struct("@ll")  # struct timeval of SO_RCVTIMEO/SO_SNDTIMEO: seconds, microseconds


class BlockingChannel:
    """One TCP connection to ``address``, used by one thread at a time."""

    def __init__(
        self,
        address: str,
        *,
        connect_timeout_s: float,
        busy_poll_s: float = 0.0,
        ssl_context: ssl.SSLContext | None = None,
    ):
        host, port = host_port(address)
        with connect_errors(address):
            sock = socket.create_connection((host, port), timeout=connect_timeout_s)
            if ssl_context is not None:
                try:
                    sock = ssl_context.wrap_socket(sock, server_hostname=host)  # the handshake, within the timeout
                except BaseException:
                    sock.close()
                    raise
        self._sock = sock
        self._tls = ssl_context is not None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A blocking socket whose waits the kernel bounds (SO_RCVTIMEO/SO_SNDTIMEO): one syscall per recv, where
        # a Python socket timeout would poll before every recv.
        self._sock.settimeout(None)
        self._wait_limit_s = -1.0  # none set yet: the kernel's default waits forever
        self.address = address
        # A TLS socket takes no recv flags (MSG_DONTWAIT): no polling for the reply on it
        self._busy_poll_s = 0.0 if self._tls else busy_poll_s
        self._decoder = FrameDecoder()

    def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``request`` and return its reply; RemotingError (or RemotingTimeoutError) when there is none."""
        deadline_s = time.monotonic() + timeout_s
        try:
            self._send(request.encode(), deadline_s)
            while True:
                for command in self._decoder.feed(self._receive(deadline_s)):
                    if command.is_response and command.opaque == request.opaque:
                        return command
                    # anything else is a request of the broker's: this channel serves none (4.x clients ignore them)
        except _WAIT_RAN_OUT:
            raise RemotingTimeoutError(
                f"no reply from {self.address} within {timeout_s:.1f}s (code {request.code})"
            ) from None
        except MalformedFrameError as exc:
            raise RemotingError(f"malformed reply from {self.address}: {exc}") from None
        except OSError as exc:
            raise RemotingError(f"connection to {self.address} failed: {exc.strerror or exc}") from None

    def invoke_oneway(self, request: RemotingCommand, timeout_s: float) -> None:
        """Write ``request`` (flagged oneway: the broker answers nothing) within ``timeout_s``."""
        request.flag |= 0x2
        try:
            self._send(request.encode(), time.monotonic() + timeout_s)
        except _WAIT_RAN_OUT:
            raise RemotingTimeoutError(f"could not write to {self.address} within {timeout_s:.1f}s") from None
        except OSError as exc:
            raise RemotingError(f"connection to {self.address} failed: {exc.strerror or exc}") from None

    def _send(self, frame: bytes, deadline_s: float) -> None:
        """All of ``frame``, by the deadline (SO_SNDTIMEO bounds each send call, not their sum)."""
        view = memoryview(frame)
        while True:
            remaining_s = deadline_s - time.monotonic()
            if remaining_s <= 0:
                raise TimeoutError
            self._limit_waits(remaining_s)
            view = view[self._sock.send(view) :]
            if not view:
                return

    @property
    def peer_closed(self) -> bool:
        """Has the broker closed this idle channel (a restart, say)? Looked at before reusing it: a send on it
        would fail a message that never reached the broker."""
        if self._tls:
            return self._tls_peer_closed()
        try:
            return not self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False  # open, nothing to read: the usual case
        except OSError:
            return True

    def _tls_peer_closed(self) -> bool:
        """``peer_closed`` on a TLS socket, which cannot peek: bytes waiting on an idle channel are either TLS
        records the server sends after the handshake (session tickets) or its close; a read without waiting tells
        which (the broker sends these channels nothing else)."""
        if not select.select([self._sock], [], [], 0)[0]:
            return False
        self._sock.setblocking(False)
        try:
            return not self._sock.recv(_RECV_BYTES)  # application data here would be out of turn: not reusable
        except ssl.SSLWantReadError:
            return False
        except OSError:
            return True
        finally:
            self._sock.setblocking(True)

    def _receive(self, deadline_s: float) -> bytes:
        """The next bytes from the broker, waited for until the deadline at most."""
        remaining_s = deadline_s - time.monotonic()
        if remaining_s <= 0:
            raise TimeoutError
        data = self._poll(min(remaining_s, self._busy_poll_s)) if self._busy_poll_s else None
        if data is None:
            if self._busy_poll_s:  # the poll used some of the time left
                remaining_s = deadline_s - time.monotonic()
                if remaining_s <= 0:
                    raise TimeoutError
            self._limit_waits(remaining_s)
            data = self._sock.recv(_RECV_BYTES)
        if not data:
            raise RemotingError(f"connection to {self.address} closed")
        return data

    def _poll(self, poll_s: float) -> bytes | None:
        """What arrives within ``poll_s``, read without sleeping; None if nothing did."""
        poll_until_s = time.monotonic() + poll_s
        while True:
            try:
                return self._sock.recv(_RECV_BYTES, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if time.monotonic() >= poll_until_s:
                    return None
                os.sched_yield()  # let a broker sharing this CPU run: its reply is what we wait for

    def _limit_waits(self, limit_s: float) -> None:
        """Bound the kernel's waits on this socket by about ``limit_s``: changed only when it differs by more than
        10 ms, so a run of calls with one timeout sets it once (a wait may end up to 10 ms past its deadline)."""
        if self._wait_limit_s < 0 or abs(limit_s - self._wait_limit_s) > 0.01:
            seconds, micros = divmod(max(int(limit_s * 1e6), 1000), 1_000_000)
            limit = _TIMEVAL.pack(seconds, micros)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
            self._wait_limit_s = limit_s

    def close(self) -> None:
        self._sock.close()

    def __repr__(self) -> str:
        return f"<BlockingChannel {self.address}>"


class BlockingChannels:
    """The idle channels of one producer per broker address; a call takes one (or opens one) and gives it back
    when it succeeded. Safe to use from several threads at once. After ``close`` it refuses calls, and a channel
    given back by a call that was running closes."""

    def __init__(
        self,
        *,
        connect_timeout_s: float,
        busy_poll_s: float = 0.0,
        ssl_context: ssl.SSLContext | None = None,
        credentials: Credentials | None = None,
    ):
        self._credentials = credentials  # signs every request (docs/security.md)
        self._connect_timeout_s = connect_timeout_s
        self._busy_poll_s = busy_poll_s
        self._ssl_context = ssl_context
        self._idle: dict[str, list[BlockingChannel]] = {}
        self._closed = False

    def invoke(self, address: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        return self._on_channel(BlockingChannel.invoke, address, request, timeout_s)

    def invoke_oneway(self, address: str, request: RemotingCommand, timeout_s: float) -> None:
        """``request`` oneway, on an idle channel to ``address`` (the one the last call used: it follows it)."""
        self._on_channel(BlockingChannel.invoke_oneway, address, request, timeout_s)

    def _on_channel(self, call, address: str, request: RemotingCommand, timeout_s: float):
        """``call(channel, request, timeout_s)`` on an idle channel to ``address`` (or a new one), given back after."""
        if self._closed:
            raise ClientError("producer is shut down")
        if self._credentials is not None:
            self._credentials.sign(request.ext_fields, request.body)
        channel = self._take_idle(address) or BlockingChannel(
            address,
            connect_timeout_s=min(self._connect_timeout_s, timeout_s),
            busy_poll_s=self._busy_poll_s,
            ssl_context=self._ssl_context,
        )
        try:
            reply = call(channel, request, timeout_s)
        except BaseException:
            channel.close()
            raise
        if self._closed:
            channel.close()
        else:
            self._idle.setdefault(address, []).append(channel)
        return reply

    def _take_idle(self, address: str) -> BlockingChannel | None:
        idle = self._idle.get(address)
        while idle:
            try:
                channel = idle.pop()
            except IndexError:  # another thread took the last one
                return None
            if not channel.peer_closed:
                return channel
            channel.close()
        return None

    def drop(self, address: str) -> None:
        """Close the idle channels to ``address`` (a broker that left every route)."""
        for channel in self._idle.pop(address, []):
            channel.close()

    def close(self) -> None:
        self._closed = True
        for address in list(self._idle):
            self.drop(address)

    def __repr__(self) -> str:
        return f"<BlockingChannels idle={sum(map(len, self._idle.values()))}>"
