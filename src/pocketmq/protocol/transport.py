"""The remoting transport: one connection type for both sides, a request router, a server and a client pool.

A connection decodes frames as bytes arrive. Replies complete the pending call with the same ``opaque``;
requests are handled concurrently (4.x clients keep long polls open on the connection they also send on)
and answered out of order. A malformed frame closes that connection only. What a connection may hold is bounded
(``protocol/limits.py``): past a bound it stops reading from the peer, or closes for a framing fault or a
missed deadline.

A handler returns its reply (or None) when it can answer at once, else an awaitable of it. Replies given at once
skip the task a waiting handler needs, and the replies to every request that arrived in one read leave in one
socket write: with many requests in flight that saves a task, a loop turn and a syscall per request. The requests
of one read are handed to a ``RequestRouter`` together (``serve_all``), so a handler may serve a run of them in
one go (the broker stores the single sends of one read in one append).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from time import perf_counter
from typing import cast

from pocketmq.auth.signature import Credentials
from pocketmq.common.errors import (
    ConnectTimeoutError,
    LimitExceededError,
    PocketMQError,
    RemotingError,
    RemotingTimeoutError,
)
from pocketmq.metrics.request_latency import RequestLatency
from pocketmq.protocol import limits as limit_names
from pocketmq.protocol.codes import ResponseCode, canonical_request_code
from pocketmq.protocol.command import FrameDecoder, MalformedFrameError, RemotingCommand
from pocketmq.protocol.error_codes import response_code_of
from pocketmq.protocol.limits import (
    CLIENT_LIMITS,
    METRIC_CONNECTIONS,
    ConnectionLimits,
    LimitReporter,
    watchdog_verdict,
)
from pocketmq.protocol.tls import ServerTls
from pocketmq.protocol.tls_listener import SniffingListener

log = logging.getLogger(__name__)

Reply = RemotingCommand | None
Handler = Callable[["RemotingConnection", RemotingCommand], Reply | Awaitable[Reply]]
# Handles several requests of one code at once (those of one socket read): one outcome per request, in order,
# the exception that refused a request standing for its error reply.
BatchHandler = Callable[["RemotingConnection", list[RemotingCommand]], list[Reply | Awaitable[Reply] | Exception]]

# A call's timeout fires within this of its deadline: one timer per connection, set for the earliest deadline
# pending, sweeps the calls (RocketMQ's scanResponseTable runs every second), where a timer per call cost ~3.5 µs
# of a client's ~30 µs per send. Sweeps are at least this far apart.
TIMEOUT_SWEEP_S = 0.05
# The replies of one read leave in writes of at most this many (and a batch handler's run is at most this long),
# so that the peer reads the first replies while the rest are served: a client and a broker of one thread each
# then work at once instead of in turns. With a hundred sends in flight and all their replies in one write, each
# side sat idle half the time (docs/benchmarks.md, "Replies written as they are ready").
REPLIES_PER_WRITE = 16
_LOG_ONLY = LimitReporter()  # connections without a server's reporter (clients): log lines, no metric


class RequestRouter:
    """Maps request codes to handlers; answers unknown codes and handler errors with the right code.

    A connection hands the router all the requests of one read (``serve_all``): a run of consecutive requests
    whose codes have a batch handler goes to it in one call (the broker merges single sends into one store
    append that way); the others go one by one to their handler.
    """

    def __init__(self) -> None:
        self._handlers: dict[int, Handler] = {}
        self._batch_handlers: dict[int, BatchHandler] = {}
        # from the handler's call to its reply, per request code (docs/metrics.md); unknown codes are not timed
        self.latency = RequestLatency()

    def register(self, code: int, handler: Handler, batch_handler: BatchHandler | None = None) -> None:
        """``batch_handler``, when given, must do what ``handler`` does for each request of its list."""
        self._handlers[int(code)] = handler
        if batch_handler is not None:
            self._batch_handlers[int(code)] = batch_handler

    def codes(self) -> list[int]:
        return sorted(self._handlers)

    def __call__(self, conn: RemotingConnection, request: RemotingCommand) -> Reply | Awaitable[Reply]:
        """The reply at once when the handler gives it at once, else an awaitable of it (errors become replies)."""
        code = canonical_request_code(request.code)
        handler = self._handlers.get(code)
        if handler is None:
            return request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f"request code {request.code} not supported"
            )
        started_s = perf_counter()
        try:
            outcome = handler(conn, request)
        except Exception as exc:
            outcome = self._error_reply(conn, request, exc)
        return self._reply_of(conn, request, outcome, code, started_s)

    def run_end(self, requests: list[RemotingCommand], start: int) -> int:
        """Where the run of ``requests`` from ``start`` that ``serve_all`` hands to one batch handler ends
        (``start + 1`` for a request whose code has none)."""
        batch_handlers = self._batch_handlers
        end = start + 1
        if not batch_handlers:
            return end
        batch_handler = batch_handlers.get(canonical_request_code(requests[start].code))
        if batch_handler is not None:
            count = len(requests)
            while end < count and batch_handlers.get(canonical_request_code(requests[end].code)) is batch_handler:
                end += 1
        return end

    def serve_all(self, conn: RemotingConnection, requests: list[RemotingCommand]) -> list[Reply | Awaitable[Reply]]:
        """What ``__call__`` gives for each of ``requests`` (handled in order), through the batch handlers."""
        outcomes: list[Reply | Awaitable[Reply]] = []
        start, count = 0, len(requests)
        while start < count:
            end = self.run_end(requests, start)
            batch_handler = self._batch_handlers.get(canonical_request_code(requests[start].code))
            if batch_handler is None:
                outcomes.append(self(conn, requests[start]))
                start = end
                continue
            run = requests[start:end]
            code, started_s = canonical_request_code(run[0].code), perf_counter()  # a run shares a handler
            try:
                run_outcomes = batch_handler(conn, run)
            except Exception as exc:
                run_outcomes = [exc] * len(run)
            for request, outcome in zip(run, run_outcomes):
                if isinstance(outcome, Exception):
                    outcome = self._error_reply(conn, request, outcome)
                outcomes.append(self._reply_of(conn, request, outcome, code, started_s))
            start = end
        return outcomes

    def _reply_of(
        self,
        conn: RemotingConnection,
        request: RemotingCommand,
        outcome: Reply | Awaitable[Reply],
        code: int,
        started_s: float,
    ) -> Reply | Awaitable[Reply]:
        if outcome is None or isinstance(outcome, RemotingCommand):
            self.latency.observe(code, perf_counter() - started_s)
            return outcome
        return self._finish(conn, request, outcome, code, started_s)

    async def _finish(
        self, conn: RemotingConnection, request: RemotingCommand, outcome: Awaitable[Reply], code: int, started_s: float
    ) -> Reply:
        try:
            reply = await outcome
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reply = self._error_reply(conn, request, exc)
        self.latency.observe(code, perf_counter() - started_s)
        return reply

    @staticmethod
    def _error_reply(conn: RemotingConnection, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        if isinstance(exc, PocketMQError):
            if isinstance(exc, LimitExceededError):
                conn.limit_exceeded(exc.limit, f"code={request.code} reason={exc}")
            return request.response(response_code_of(exc), remark=str(exc))
        # a bug in one handler must not take the connection down
        log.error("event=handler_failed code=%s remote=%s", request.code, conn.remote_address, exc_info=exc)
        return request.response(ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")


def _one_request(requests: list[RemotingCommand], start: int) -> int:
    """``run_end`` for a plain handler: each request on its own."""
    return start + 1


class RemotingConnection(asyncio.Protocol):
    """One TCP connection speaking remoting frames, usable as client and server at once.

    ``limits`` bound what the peer can make it hold (``protocol/limits.py``, docs/limits.md): frames are checked
    as they are decoded; requests are served in order while fewer than ``max_requests_in_flight`` are and the
    write buffer holds at most ``max_reply_buffer_bytes``; the others wait, decoded, and the connection stops
    reading until there is room (backpressure: a peer that does not read its replies gets no more served). With
    deadlines it closes itself when a frame takes too long to arrive or it is idle. ``admit``, given by a server,
    may refuse the connection as it opens.
    """

    def __init__(
        self,
        handler: Handler | None,
        *,
        name: str = "",
        coalesce_writes: bool = False,
        limits: ConnectionLimits = CLIENT_LIMITS,
        reporter: LimitReporter | None = None,
        admit: Callable[[RemotingConnection], bool] | None = None,
    ):
        self._handler = handler
        # The requests of one read are served together when the handler can (RequestRouter.serve_all), in runs
        # (RequestRouter.run_end) so that the limits are looked at between runs.
        self._serve_all = handler.serve_all if isinstance(handler, RequestRouter) else None
        self._run_end = handler.run_end if isinstance(handler, RequestRouter) else _one_request
        # With coalesce_writes, the first frame written in a turn of the loop goes out at once (a lone request
        # waits for nothing) and the others of that turn gather into one socket write at the start of the next
        # turn (clients with many requests in flight save a syscall per request); close() sends them first.
        self._coalesce_writes = coalesce_writes
        self._outbox: list[bytes] | None = None  # None: nothing written this turn yet
        self._limits = limits
        self._reporter = reporter or _LOG_ONLY
        self._admit = admit
        self._decoder = FrameDecoder(limits)
        self._transport: asyncio.Transport | None = None  # None until connected
        self._loop: asyncio.AbstractEventLoop  # set once connected (the loop serving the connection)
        self._pending: dict[int, tuple[asyncio.Future, float]] = {}  # opaque -> (reply, deadline in loop time)
        self._sweeper: asyncio.TimerHandle | None = None  # while calls are pending
        self._sweep_at = 0.0  # when the sweeper runs, in loop time
        self._tasks: set[asyncio.Task] = set()  # requests being served
        self._backlog: list[RemotingCommand] = []  # requests read, waiting for room to be served
        self._reading_paused = False
        self._frame_timeout_s = limits.frame_receive_timeout_ms / 1000
        self._last_active_s = 0.0  # loop time bytes last arrived or the write buffer last drained
        self._frame_started_s: float | None = None  # loop time the unfinished frame's first bytes arrived
        self._watchdog: asyncio.TimerHandle | None = None
        self._watchdog_at = math.inf
        self._closed = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._close_callbacks: list[Callable[[RemotingConnection], None]] = []
        self.name = name
        self.remote_address = ""
        self.remote_host = ""
        self.attributes: dict[str, object] = {}  # what upper layers learn about the peer (client id ...)

    # -- asyncio.Protocol -------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio.Protocol declares the base class; a stream connection is always given a full Transport.
        stream = self._transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()
        peer = stream.get_extra_info("peername")
        if peer:
            self.remote_host = str(peer[0])
            self.remote_address = f"{peer[0]}:{peer[1]}"
        if self._admit is not None and not self._admit(self):
            stream.abort()
            return
        if self._limits.max_reply_buffer_bytes is not None:
            # pause_writing comes once replies past the bound wait to be written: this connection stops reading
            stream.set_write_buffer_limits(high=self._limits.max_reply_buffer_bytes)
        if self._limits.has_deadlines:
            self._last_active_s = self._loop.time()
            self._on_watchdog()
        sock = stream.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        decoder = self._decoder
        try:
            commands = decoder.feed(data)
        except MalformedFrameError as exc:
            self._drop(exc.limit, f"reason={exc}")
            return
        if self._watchdog is not None:
            now = self._last_active_s = self._loop.time()
            if not decoder.buffered_bytes:
                self._frame_started_s = None
            elif commands or self._frame_started_s is None:  # a new frame began in this read
                self._frame_started_s = now
                if self._frame_timeout_s and now + self._frame_timeout_s < self._watchdog_at:
                    self._arm_watchdog(now + self._frame_timeout_s)
        requests: list[RemotingCommand] = []
        for cmd in commands:
            if cmd.is_response:
                call = self._pending.pop(cmd.opaque, None)
                if call is not None and not call[0].done():
                    call[0].set_result(cmd)
            elif self._handler is not None:  # a peer that does not serve requests ignores them, as 4.x clients do
                requests.append(cmd)
        if requests:
            self._backlog = self._backlog + requests if self._backlog else requests
            self._serve_backlog()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed.set()
        self._writable.set()
        error = RemotingError(f"connection to {self.remote_address or self.name} closed")
        for fut, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(error)
        self._pending.clear()
        self._backlog = []
        for timer in (self._sweeper, self._watchdog):
            if timer is not None:
                timer.cancel()
        self._sweeper = self._watchdog = None
        for task in list(self._tasks):
            task.cancel()
        for callback in self._close_callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("event=close_callback_failed remote=%s", self.remote_address)

    def pause_writing(self) -> None:
        self._writable.clear()
        if self._limits.max_reply_buffer_bytes is not None:
            self._update_reading()

    def resume_writing(self) -> None:
        self._writable.set()
        self._last_active_s = self._loop.time()  # the peer reads: not idle
        self._room_freed()

    # -- serving under the limits -------------------------------------------------------------------------------
    def _serve_backlog(self) -> None:
        """Serve the requests read so far, in order, while there is room; leave the others for later.

        Room: fewer than ``max_requests_in_flight`` requests being served, and (with a reply bound) a write buffer
        under the bound. The replies given at once leave in socket writes of at most ``REPLIES_PER_WRITE``, each
        as soon as it is full; the bound is looked at between writes, so it is exceeded by at most one write's
        replies.
        """
        backlog = self._backlog
        count = len(backlog)
        start = 0
        limits = self._limits
        reply_bound = limits.max_reply_buffer_bytes
        max_in_flight = limits.max_requests_in_flight
        tasks = self._tasks
        transport = self._transport
        handler, serve_all = self._handler, self._serve_all
        # Called with requests waiting (never empty): they arrived once connected, kept by a connection serving them.
        assert transport is not None and handler is not None
        writable = self._writable
        while start < count and not transport.is_closing():
            room = max_in_flight - len(tasks)
            if room <= 0 or (reply_bound is not None and not writable.is_set()):
                break
            replies: list[bytes] = []
            reply_bytes = transport.get_write_buffer_size() if reply_bound is not None else 0
            while start < count and room > 0 and (reply_bound is None or reply_bytes <= reply_bound):
                run: Sequence[RemotingCommand]
                outcomes: Sequence[Reply | Awaitable[Reply]]
                if count - start == 1:  # the usual last (or only) request of a read: no run to look for
                    end, run = count, (backlog[start],)
                    outcomes = (handler(self, run[0]),)
                else:
                    end = min(self._run_end(backlog, start), start + room, start + REPLIES_PER_WRITE)
                    run = backlog[start:end]
                    # A plain handler's runs are single requests (_one_request): only a router has serve_all.
                    outcomes = (
                        (handler(self, run[0]),) if serve_all is None or end - start == 1 else serve_all(self, run)
                    )
                for cmd, outcome in zip(run, outcomes):
                    if outcome is None or isinstance(outcome, RemotingCommand):
                        if outcome is not None and not cmd.is_oneway:
                            frame = outcome.encode()
                            replies.append(frame)
                            reply_bytes += len(frame)
                    else:
                        task = asyncio.get_running_loop().create_task(self._serve(cmd, outcome))
                        tasks.add(task)
                        task.add_done_callback(self._task_done)
                        room -= 1
                start = end
                if len(replies) >= REPLIES_PER_WRITE:
                    break  # these go out now: the peer reads them while the next runs are served
            if replies and not transport.is_closing():
                transport.write(b"".join(replies) if len(replies) > 1 else replies[0])
        if start < count:
            self._backlog = backlog[start:]
            self._update_reading()
        else:
            self._backlog = []
            if self._reading_paused or len(tasks) >= max_in_flight:
                self._update_reading()

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if self._reading_paused:
            self._room_freed()

    def _room_freed(self) -> None:
        if self._backlog:
            self._serve_backlog()
        elif self._reading_paused:
            self._update_reading()

    def _update_reading(self) -> None:
        """Stop reading while requests wait for room, resume once they are all served (backpressure)."""
        transport = self._open_transport()
        if transport is None:
            return
        limits = self._limits
        unread_replies = limits.max_reply_buffer_bytes is not None and not self._writable.is_set()
        pause = bool(self._backlog) or unread_replies or len(self._tasks) >= limits.max_requests_in_flight
        if pause == self._reading_paused:
            return
        self._reading_paused = pause
        if pause:
            transport.pause_reading()
            if unread_replies:
                self._reporter.exceeded(
                    limit_names.REPLY_BUFFER_BYTES,
                    self.remote_address,
                    f"buffered={transport.get_write_buffer_size()} "
                    f"max={limits.max_reply_buffer_bytes} (reading paused)",
                )
            else:
                self._reporter.exceeded(
                    limit_names.REQUESTS_IN_FLIGHT,
                    self.remote_address,
                    f"in_flight={len(self._tasks)} max={limits.max_requests_in_flight} (reading paused)",
                )
        else:
            transport.resume_reading()
            if self._frame_started_s is not None:  # the frame deadline counts while this side reads
                self._frame_started_s = self._loop.time()

    # -- deadlines --------------------------------------------------------------------------------------------
    def _arm_watchdog(self, when: float) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog_at = when
        self._watchdog = self._loop.call_at(when, self._on_watchdog)

    def _on_watchdog(self) -> None:
        """Close the connection past a deadline (docs/limits.md), else look again at the next one."""
        self._watchdog, self._watchdog_at = None, math.inf
        if self.is_closed:
            return
        now = self._loop.time()
        # Requests in flight keep a connection open (a long poll), unless they wait for the peer to read.
        busy = bool(self._tasks or self._pending) and self._writable.is_set()
        verdict = watchdog_verdict(
            self._limits, now, self._last_active_s, None if self._reading_paused else self._frame_started_s, busy=busy
        )
        if verdict.close_for is not None:
            self._drop(verdict.close_for, f"buffered={self._decoder.buffered_bytes}")
        elif verdict.next_check_s is not None:
            self._arm_watchdog(verdict.next_check_s)

    def _drop(self, limit: str, detail: str) -> None:
        """Close at once for a broken limit (the peer may not read: no waiting for the write buffer to drain)."""
        self.limit_exceeded(limit, detail)
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()

    # -- API ----------------------------------------------------------------------------------------------------
    def limit_exceeded(self, limit: str, detail: str) -> None:
        """Count and log (rate-limited) a request of this peer refused by a limit."""
        self._reporter.exceeded(limit, self.remote_address, detail)

    @property
    def is_closed(self) -> bool:
        return self._open_transport() is None

    def _open_transport(self) -> asyncio.Transport | None:
        """The transport while the connection is open, else None."""
        transport = self._transport
        if self._closed.is_set() or transport is None or transport.is_closing():
            return None
        return transport

    @property
    def writable(self) -> bool:
        """Open, and the peer reads what is written to it (the write buffer is below its high mark)."""
        return self._writable.is_set() and not self.is_closed

    def on_close(self, callback: Callable[[RemotingConnection], None]) -> None:
        self._close_callbacks.append(callback)

    def write(self, cmd: RemotingCommand) -> None:
        transport = self._open_transport()
        if transport is None:
            raise RemotingError(f"connection to {self.remote_address or self.name} is closed")
        if not self._coalesce_writes:
            transport.write(cmd.encode())
            return
        if self._outbox is None:
            transport.write(cmd.encode())
            self._outbox = []
            asyncio.get_running_loop().call_soon(self._flush_outbox)
        else:
            self._outbox.append(cmd.encode())

    def _flush_outbox(self) -> None:
        transport = self._open_transport()
        if self._outbox and transport is not None:
            transport.write(b"".join(self._outbox))
        self._outbox = None

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``request`` and wait for its reply."""
        if not self._writable.is_set():
            await self._writable.wait()
        fut = self.request(request, timeout_s)
        try:
            return await fut
        except _ReplyTimeout:
            raise _timeout_error(self.remote_address or self.name, request, timeout_s) from None
        finally:
            self._pending.pop(request.opaque, None)  # a call cancelled while it waited

    def request(self, request: RemotingCommand, timeout_s: float) -> asyncio.Future[RemotingCommand]:
        """Send ``request`` now and return the future of its reply, for a caller that chains a callback instead
        of awaiting (no coroutine, no task): ``RemotingClient.reply`` reads it once done. The caller has looked at
        ``writable`` first: this does not wait for the peer to read."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        deadline = loop.time() + timeout_s
        self._pending[request.opaque] = (fut, deadline)
        if self._sweeper is None or deadline + TIMEOUT_SWEEP_S < self._sweep_at:
            self._sweep_timeouts_at(deadline)
        try:
            self.write(request)
        except RemotingError:
            self._pending.pop(request.opaque, None)
            raise
        return fut

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
        for opaque, (fut, deadline) in list(self._pending.items()):
            if fut.done():
                continue
            if deadline <= now:
                del self._pending[opaque]  # here: a caller chaining on ``request`` has no ``finally`` to do it
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
        if self._limits.max_reply_buffer_bytes is not None and not self._writable.is_set():
            # The peer does not read its replies: its request's work (a coroutine not started yet, such as a
            # PULL's read) waits until they drain, and then one at a time as long as each reply fills the buffer.
            try:
                while not self._writable.is_set():
                    await self._writable.wait()
            except asyncio.CancelledError:
                if inspect.iscoroutine(outcome):
                    outcome.close()  # never started: no "never awaited" warning
                raise
        response = await outcome
        if response is not None and not request.is_oneway and not self.is_closed:
            self.write(response)

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "open"
        return f"<RemotingConnection {self.remote_address or self.name} {state} pending={len(self._pending)}>"


class _ReplyTimeout(Exception):
    """Set on a pending call's future when its time is up (turned into RemotingTimeoutError by invoke)."""


def _timeout_error(peer: str, request: RemotingCommand, timeout_s: float) -> RemotingTimeoutError:
    return RemotingTimeoutError(f"no reply from {peer} within {timeout_s:.1f}s (code {request.code})")


_ACCEPT_OUT_OF_RESOURCES = "socket.accept() out of system resource"  # asyncio's message; it retries in 1 s


class RemotingServer:
    """Listens on host:port and serves each connection with ``handler``, under ``limits``.

    Connections past ``max_connections``, or past ``max_connections_per_host`` from one IP address, are closed as
    they open. When accepting fails for want of file descriptors, asyncio stops accepting for a second and tries
    again; the server counts and logs that (rate-limited) instead of a traceback a second. With ``tls`` serving
    TLS (permissive or enforcing), connections come through a ``SniffingListener`` (protocol/tls_listener.py),
    TLS or plaintext as each one's first byte says.
    """

    def __init__(
        self,
        handler: Handler,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: ConnectionLimits | None = None,
        metrics=None,
        tls: ServerTls | None = None,
    ):
        self._handler = handler
        self._host = host
        self._port = port
        self._limits = limits or ConnectionLimits()
        self._reporter = LimitReporter(metrics)
        # TLS served (permissive or enforcing): connections come through a listener that looks at their first byte
        self._tls_listener = (
            SniffingListener(self._make_connection, tls, host, port, reporter=self._reporter)
            if tls is not None and tls.settings.serves_tls
            else None
        )
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[RemotingConnection] = set()
        self._per_host: dict[str, int] = {}  # open connections per client IP address
        if metrics is not None:
            gauge = metrics.gauge(METRIC_CONNECTIONS, "open remoting connections", ("port",))
            metrics.add_collector(lambda: gauge.set(len(self.connections), port=self._port_label()))

    async def start(self) -> None:
        if self._tls_listener is not None:
            await self._tls_listener.start()
            return
        loop = asyncio.get_running_loop()
        server = self._server = await loop.create_server(
            self._make_connection, self._host, self._port, reuse_address=True
        )
        self._report_accept_failures(loop, server)

    def _make_connection(self) -> RemotingConnection:
        return RemotingConnection(self._handler, limits=self._limits, reporter=self._reporter, admit=self._admit)

    def _admit(self, conn: RemotingConnection) -> bool:
        limits, host = self._limits, conn.remote_host
        if len(self.connections) >= limits.max_connections:
            self._reporter.exceeded(
                limit_names.MAX_CONNECTIONS,
                conn.remote_address,
                f"open={len(self.connections)} max={limits.max_connections}",
            )
            return False
        if self._per_host.get(host, 0) >= limits.max_connections_per_host:
            self._reporter.exceeded(
                limit_names.MAX_CONNECTIONS_PER_HOST,
                conn.remote_address,
                f"open={self._per_host[host]} max={limits.max_connections_per_host}",
            )
            return False
        self.connections.add(conn)
        self._per_host[host] = self._per_host.get(host, 0) + 1
        conn.on_close(self._forget)
        return True

    def _forget(self, conn: RemotingConnection) -> None:
        self.connections.discard(conn)
        left = self._per_host.get(conn.remote_host, 0) - 1
        if left > 0:
            self._per_host[conn.remote_host] = left
        else:
            self._per_host.pop(conn.remote_host, None)

    def _report_accept_failures(self, loop: asyncio.AbstractEventLoop, server: asyncio.Server) -> None:
        """Count and log (rate-limited) asyncio's failed accepts on this server's sockets (EMFILE ...); asyncio
        itself pauses accepting for a second and resumes, so clients get in once descriptors are free."""
        previous = loop.get_exception_handler()
        own = {sock.fileno() for sock in server.sockets}

        def handle(loop: asyncio.AbstractEventLoop, context: dict) -> None:
            sock = context.get("socket")
            if context.get("message") == _ACCEPT_OUT_OF_RESOURCES and sock is not None and sock.fileno() in own:
                self._reporter.exceeded(
                    limit_names.OPEN_FILES,
                    f"{self._host}:{self.port}",
                    f"reason={context.get('exception')!r} (accepting again in 1 s)",
                )
            elif previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handle)

    def _port_label(self) -> str:
        return str(self.port) if self._listening else "stopped"

    @property
    def _listening(self) -> bool:
        return self._server is not None or (self._tls_listener is not None and self._tls_listener.running)

    @property
    def port(self) -> int:
        if self._tls_listener is not None:
            return self._tls_listener.port
        assert self._server is not None, "server not started"
        return self._server.sockets[0].getsockname()[1]

    @property
    def host(self) -> str:
        return self._host

    async def stop(self) -> None:
        if self._tls_listener is not None:
            await self._tls_listener.stop()
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def __repr__(self) -> str:
        where = f"{self._host}:{self.port}" if self._listening else "stopped"
        return f"<RemotingServer {where} connections={len(self.connections)}>"


def host_port(address: str) -> tuple[str, int]:
    """``HOST:PORT`` split; RemotingError for anything else."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RemotingError(f"bad address {address!r}: expected HOST:PORT")
    return host, int(port)


@contextlib.contextmanager
def connect_errors(address: str):
    """A connect to ``address`` that times out or fails raises ConnectTimeoutError or RemotingError (retriable)."""
    try:
        yield
    except TimeoutError:
        raise ConnectTimeoutError(f"connect to {address} timed out") from None
    except OSError as exc:
        raise RemotingError(f"cannot connect to {address}: {exc.strerror or exc}") from None


class RemotingClient:
    """A pool of one connection per address, (re)connected on demand.

    ``handler`` serves requests the remote side initiates on these connections (NOTIFY_CONSUMER_IDS_CHANGED,
    CHECK_TRANSACTION_STATE ...). With ``credentials`` every request sent is signed (``AccessKey`` and
    ``Signature`` fields, docs/security.md).
    """

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        connect_timeout_s: float = 3.0,
        ssl_context: ssl.SSLContext | None = None,
        credentials: Credentials | None = None,
    ):
        self._handler = handler
        self.credentials = credentials
        self._connect_timeout_s = connect_timeout_s
        self._ssl_context = ssl_context  # every connection is TLS with it (protocol/tls.py), or plaintext
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
                    lambda: RemotingConnection(self._handler, name=address, coalesce_writes=True),
                    host,
                    port,
                    ssl=self._ssl_context,
                    server_hostname=host if self._ssl_context is not None else None,
                )
        conn.remote_address = address
        return conn

    async def invoke(self, address: str, request: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        if self.credentials is not None:
            self.credentials.sign(request.ext_fields, request.body)
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

    def request_now(
        self, address: str, request: RemotingCommand, timeout_s: float
    ) -> asyncio.Future[RemotingCommand] | None:
        """Send ``request`` at once on the open connection to ``address`` and return the future of its reply
        (read it with ``reply`` once done); None when no connection there is open and read by its peer, so that
        the caller awaits ``invoke`` instead, which connects or waits. For hot paths that chain a callback
        instead of running a task per request."""
        conn = self._connections.get(address)
        if conn is None or not conn.writable:
            return None
        if self.credentials is not None:
            self.credentials.sign(request.ext_fields, request.body)
        return conn.request(request, timeout_s)

    def reply(
        self, address: str, fut: asyncio.Future[RemotingCommand], request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """The reply in ``request_now``'s done future; the errors ``invoke`` would raise otherwise."""
        try:
            return fut.result()
        except _ReplyTimeout:
            raise _timeout_error(address, request, timeout_s) from None
        except RemotingError:
            self._connections.pop(address, None)
            raise

    async def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        if self.credentials is not None:
            self.credentials.sign(request.ext_fields, request.body)
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
