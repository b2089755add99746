"""The remoting transport: one connection type for both sides, a request router, a server and a client pool.

A connection decodes frames as bytes arrive. Replies complete the pending call with the same ``opaque``;
requests are handled concurrently (4.x clients keep long polls open on the connection they also send on)
and answered out of order. A malformed frame closes that connection only.

A handler returns its reply (or None) when it can answer at once, else an awaitable of it. Replies given at once
skip the task a waiting handler needs, and the replies to every request that arrived in one read leave in one
socket write: with many requests in flight that saves a task, a loop turn and a syscall per request. The requests
of one read are handed to a ``RequestRouter`` together (``serve_all``), so a handler may serve a run of them in
one go (the broker stores the single sends of one read in one append).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Awaitable, Callable

from pocketmq.errors import PocketMQError, RemotingError, RemotingTimeoutError
from pocketmq.protocol.codes import ResponseCode, canonical_request_code
from pocketmq.protocol.command import FrameDecoder, MalformedFrameError, RemotingCommand

log = logging.getLogger(__name__)

Reply = RemotingCommand | None
Handler = Callable[["RemotingConnection", RemotingCommand], Reply | Awaitable[Reply]]
# Handles several requests of one code at once (those of one socket read): one outcome per request, in order,
# the exception that refused a request standing for its error reply.
BatchHandler = Callable[["RemotingConnection", list[RemotingCommand]], list[Reply | Awaitable[Reply] | Exception]]

MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION = 4096
# A call's timeout fires within this of its deadline: one timer per connection, set for the earliest deadline
# pending, sweeps the calls (RocketMQ's scanResponseTable runs every second), where a timer per call cost ~3.5 µs
# of a client's ~30 µs per send. Sweeps are at least this far apart.
TIMEOUT_SWEEP_S = 0.05
_WRITE_BUFFER_HIGH_BYTES = 4 * 1024 * 1024


class RequestRouter:
    """Maps request codes to handlers; answers unknown codes and handler errors with the right code.

    A connection hands the router all the requests of one read (``serve_all``): a run of consecutive requests
    whose codes have a batch handler goes to it in one call (the broker merges single sends into one store
    append that way); the others go one by one to their handler.
    """

    def __init__(self) -> None:
        self._handlers: dict[int, Handler] = {}
        self._batch_handlers: dict[int, BatchHandler] = {}

    def register(self, code: int, handler: Handler, batch_handler: BatchHandler | None = None) -> None:
        """``batch_handler``, when given, must do what ``handler`` does for each request of its list."""
        self._handlers[int(code)] = handler
        if batch_handler is not None:
            self._batch_handlers[int(code)] = batch_handler

    def codes(self) -> list[int]:
        return sorted(self._handlers)

    def __call__(self, conn: "RemotingConnection", request: RemotingCommand) -> Reply | Awaitable[Reply]:
        """The reply at once when the handler gives it at once, else an awaitable of it (errors become replies)."""
        code = canonical_request_code(request.code)
        handler = self._handlers.get(code)
        if handler is None:
            return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                    remark=f"request code {request.code} not supported")
        try:
            outcome = handler(conn, request)
        except Exception as exc:
            return self._error_reply(conn, request, exc)
        return self._reply_of(conn, request, outcome)

    def serve_all(self, conn: "RemotingConnection", requests: list[RemotingCommand]
                  ) -> list[Reply | Awaitable[Reply]]:
        """What ``__call__`` gives for each of ``requests`` (handled in order), through the batch handlers."""
        batch_handlers = self._batch_handlers
        if not batch_handlers:
            return [self(conn, request) for request in requests]
        outcomes: list[Reply | Awaitable[Reply]] = []
        start, count = 0, len(requests)
        while start < count:
            batch_handler = batch_handlers.get(canonical_request_code(requests[start].code))
            end = start + 1
            if batch_handler is None:
                outcomes.append(self(conn, requests[start]))
                start = end
                continue
            while end < count and batch_handlers.get(canonical_request_code(requests[end].code)) is batch_handler:
                end += 1
            run = requests[start:end]
            try:
                run_outcomes = batch_handler(conn, run)
            except Exception as exc:
                run_outcomes = [exc] * len(run)
            for request, outcome in zip(run, run_outcomes):
                if isinstance(outcome, Exception):
                    outcomes.append(self._error_reply(conn, request, outcome))
                else:
                    outcomes.append(self._reply_of(conn, request, outcome))
            start = end
        return outcomes

    def _reply_of(self, conn: "RemotingConnection", request: RemotingCommand,
                  outcome: Reply | Awaitable[Reply]) -> Reply | Awaitable[Reply]:
        if outcome is None or isinstance(outcome, RemotingCommand):
            return outcome
        return self._finish(conn, request, outcome)

    async def _finish(self, conn: "RemotingConnection", request: RemotingCommand,
                      outcome: Awaitable[Reply]) -> Reply:
        try:
            return await outcome
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._error_reply(conn, request, exc)

    @staticmethod
    def _error_reply(conn: "RemotingConnection", request: RemotingCommand, exc: Exception) -> RemotingCommand:
        if isinstance(exc, PocketMQError):
            return request.response(exc.response_code, remark=str(exc))
        # a bug in one handler must not take the connection down
        log.error("event=handler_failed code=%s remote=%s", request.code, conn.remote_address, exc_info=exc)
        return request.response(ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")


def _serve_each(handler: Handler) -> Callable[["RemotingConnection", list[RemotingCommand]], list]:
    """``serve_all`` for a plain handler: each request on its own."""
    return lambda conn, requests: [handler(conn, request) for request in requests]


class RemotingConnection(asyncio.Protocol):
    """One TCP connection speaking remoting frames, usable as client and server at once."""

    def __init__(self, handler: Handler | None, *, name: str = "", coalesce_writes: bool = False):
        self._handler = handler
        # The requests of one read are served together when the handler can (RequestRouter.serve_all).
        self._serve_all = (None if handler is None
                           else handler.serve_all if isinstance(handler, RequestRouter) else _serve_each(handler))
        # With coalesce_writes, the first frame written in a turn of the loop goes out at once (a lone request
        # waits for nothing) and the others of that turn gather into one socket write at the start of the next
        # turn (clients with many requests in flight save a syscall per request); close() sends them first.
        self._coalesce_writes = coalesce_writes
        self._outbox: list[bytes] | None = None  # None: nothing written this turn yet
        self._decoder = FrameDecoder()
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, tuple[asyncio.Future, float]] = {}  # opaque -> (reply, deadline in loop time)
        self._sweeper: asyncio.TimerHandle | None = None  # while calls are pending
        self._sweep_at = 0.0  # when the sweeper runs, in loop time
        self._tasks: set[asyncio.Task] = set()
        self._closed = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._close_callbacks: list[Callable[["RemotingConnection"], None]] = []
        self.name = name
        self.remote_address = ""
        self.attributes: dict[str, object] = {}  # what upper layers learn about the peer (client id ...)

    # -- asyncio.Protocol -------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self.remote_address = f"{peer[0]}:{peer[1]}"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket

            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        try:
            commands = self._decoder.feed(data)
        except MalformedFrameError as exc:
            log.warning("event=malformed_frame remote=%s reason=%s", self.remote_address, exc)
            self.close()
            return
        replies: list[bytes] = []  # answered at once: sent together after the loop
        requests: list[RemotingCommand] = []
        for cmd in commands:
            if cmd.is_response:
                call = self._pending.pop(cmd.opaque, None)
                if call is not None and not call[0].done():
                    call[0].set_result(cmd)
            elif self._handler is None:
                continue  # a peer that does not serve requests ignores them, as 4.x clients do
            elif len(self._tasks) + len(requests) >= MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION:
                # counted as if each admitted request of this read needed a task: the bound holds either way
                if not cmd.is_oneway:
                    replies.append(cmd.response(ResponseCode.SYSTEM_BUSY,
                                                remark="too many requests in flight").encode())
            else:
                requests.append(cmd)
        if requests:
            # a lone request (one send at a time) skips the grouping of serve_all: the same outcome, cheaper
            outcomes = [self._handler(self, requests[0])] if len(requests) == 1 else self._serve_all(self, requests)
            for cmd, outcome in zip(requests, outcomes):  # type: ignore[misc,arg-type]
                if outcome is None or isinstance(outcome, RemotingCommand):
                    if outcome is not None and not cmd.is_oneway:
                        replies.append(outcome.encode())
                else:
                    task = asyncio.get_running_loop().create_task(self._serve(cmd, outcome))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        if replies and not self.is_closed:
            if self._transport.get_write_buffer_size() <= _WRITE_BUFFER_HIGH_BYTES:  # type: ignore[union-attr]
                self._transport.write(b"".join(replies) if len(replies) > 1 else replies[0])  # type: ignore
            else:  # the peer does not read: replies wait for the buffer to drain, as a waiting handler's do
                task = asyncio.get_running_loop().create_task(self._write_when_writable(replies))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed.set()
        self._writable.set()
        error = RemotingError(f"connection to {self.remote_address or self.name} closed")
        for fut, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(error)
        self._pending.clear()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for task in list(self._tasks):
            task.cancel()
        for callback in self._close_callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("event=close_callback_failed remote=%s", self.remote_address)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- API ----------------------------------------------------------------------------------------------------
    @property
    def is_closed(self) -> bool:
        return self._closed.is_set() or self._transport is None or self._transport.is_closing()

    def on_close(self, callback: Callable[["RemotingConnection"], None]) -> None:
        self._close_callbacks.append(callback)

    def write(self, cmd: RemotingCommand) -> None:
        if self.is_closed:
            raise RemotingError(f"connection to {self.remote_address or self.name} is closed")
        if not self._coalesce_writes:
            self._transport.write(cmd.encode())  # type: ignore[union-attr]
            return
        if self._outbox is None:
            self._transport.write(cmd.encode())  # type: ignore[union-attr]
            self._outbox = []
            asyncio.get_running_loop().call_soon(self._flush_outbox)
        else:
            self._outbox.append(cmd.encode())

    def _flush_outbox(self) -> None:
        if self._outbox and not self.is_closed:
            self._transport.write(b"".join(self._outbox))  # type: ignore[union-attr]
        self._outbox = None

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``request`` and wait for its reply."""
        if not self._writable.is_set():
            await self._writable.wait()
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        deadline = loop.time() + timeout_s
        self._pending[request.opaque] = (fut, deadline)
        if self._sweeper is None or deadline + TIMEOUT_SWEEP_S < self._sweep_at:
            self._sweep_timeouts_at(deadline)
        try:
            self.write(request)
            return await fut
        except _ReplyTimeout:
            raise RemotingTimeoutError(
                f"no reply from {self.remote_address or self.name} within {timeout_s:.1f}s (code {request.code})"
            ) from None
        finally:
            self._pending.pop(request.opaque, None)

    def _sweep_timeouts_at(self, when: float) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        self._sweep_at = when
        self._sweeper = asyncio.get_running_loop().call_at(when, self._sweep_timeouts)

    def _sweep_timeouts(self) -> None:
        """Fail the calls past their deadline; come again at the earliest deadline still pending."""
        self._sweeper = None
        now = asyncio.get_running_loop().time()
        earliest = None
        for fut, deadline in list(self._pending.values()):
            if fut.done():
                continue
            if deadline <= now:
                fut.set_exception(_ReplyTimeout())
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._sweep_timeouts_at(max(earliest, now + TIMEOUT_SWEEP_S))

    def invoke_oneway(self, request: RemotingCommand) -> None:
        request.flag |= 0x2
        self.write(request)

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._flush_outbox()
            self._transport.close()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def _serve(self, request: RemotingCommand, outcome: Awaitable[Reply]) -> None:
        response = await outcome
        if response is None or request.is_oneway or self.is_closed:
            return
        if self._transport.get_write_buffer_size() > _WRITE_BUFFER_HIGH_BYTES:  # type: ignore[union-attr]
            await self._writable.wait()
        if not self.is_closed:
            self.write(response)

    async def _write_when_writable(self, frames: list[bytes]) -> None:
        await self._writable.wait()
        if not self.is_closed:
            self._transport.write(b"".join(frames))  # type: ignore[union-attr]

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "open"
        return f"<RemotingConnection {self.remote_address or self.name} {state} pending={len(self._pending)}>"


class _ReplyTimeout(Exception):
    """Set on a pending call's future when its time is up (turned into RemotingTimeoutError by invoke)."""


class RemotingServer:
    """Listens on host:port and serves each connection with ``handler``."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0):
        self._handler = handler
        self._host = host
        self._port = port
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[RemotingConnection] = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._make_connection, self._host, self._port, reuse_address=True)

    def _make_connection(self) -> RemotingConnection:
        conn = RemotingConnection(self._handler)
        self.connections.add(conn)
        conn.on_close(self.connections.discard)
        return conn

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.sockets[0].getsockname()[1]

    @property
    def host(self) -> str:
        return self._host

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for conn in list(self.connections):
            conn.close()
        await self._server.wait_closed()
        self._server = None

    def __repr__(self) -> str:
        where = f"{self._host}:{self.port}" if self._server else "stopped"
        return f"<RemotingServer {where} connections={len(self.connections)}>"


def host_port(address: str) -> tuple[str, int]:
    """``HOST:PORT`` split; RemotingError for anything else."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RemotingError(f"bad address {address!r}: expected HOST:PORT")
    return host, int(port)


@contextlib.contextmanager
def connect_errors(address: str):
    """A connect to ``address`` that times out or fails raises RemotingTimeoutError or RemotingError (retriable)."""
    try:
        yield
    except TimeoutError:
        raise RemotingTimeoutError(f"connect to {address} timed out") from None
    except OSError as exc:
        raise RemotingError(f"cannot connect to {address}: {exc.strerror or exc}") from None


class RemotingClient:
    """A pool of one connection per address, (re)connected on demand.

    ``handler`` serves requests the remote side initiates on these connections (NOTIFY_CONSUMER_IDS_CHANGED,
    CHECK_TRANSACTION_STATE ...).
    """

    def __init__(self, handler: Handler | None = None, *, connect_timeout_s: float = 3.0):
        self._handler = handler
        self._connect_timeout_s = connect_timeout_s
        self._connections: dict[str, RemotingConnection] = {}
        self._connecting: dict[str, asyncio.Future] = {}

    async def connection(self, address: str) -> RemotingConnection:
        conn = self._connections.get(address)
        if conn is not None and not conn.is_closed:
            return conn
        pending = self._connecting.get(address)
        if pending is not None:
            return await asyncio.shield(pending)
        fut = asyncio.get_running_loop().create_future()
        self._connecting[address] = fut
        try:
            conn = await self._connect(address)
            self._connections[address] = conn
            fut.set_result(conn)
            return conn
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: waiters re-raise it
            raise
        finally:
            del self._connecting[address]

    async def _connect(self, address: str) -> RemotingConnection:
        host, port = host_port(address)
        loop = asyncio.get_running_loop()
        with connect_errors(address):
            async with asyncio.timeout(self._connect_timeout_s):
                _, conn = await loop.create_connection(
                    lambda: RemotingConnection(self._handler, name=address, coalesce_writes=True), host, port)
        conn.remote_address = address
        return conn

    async def invoke(self, address: str, request: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        conn = self._connections.get(address)
        if conn is None or conn.is_closed:  # the usual case, an open connection, skips a coroutine call
            conn = await self.connection(address)
        try:
            return await conn.invoke(request, timeout_s)
        except RemotingTimeoutError:
            raise
        except RemotingError:
            self._connections.pop(address, None)
            raise

    async def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        conn = await self.connection(address)
        conn.invoke_oneway(request)

    def drop(self, address: str) -> None:
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            await conn.wait_closed()

    def __repr__(self) -> str:
        return f"<RemotingClient connections={len(self._connections)}>"
