"""The test doubles the tests share: a fake remoting peer and a fake name server.

The fake clock is ``runtime.clock.ManualClock``, the clock the broker takes as a seam and the simulation runs on.

``FakePeer`` is a real TCP server on 127.0.0.1 (a port the OS picks) that reads remoting frames and answers each
request as its *script* says. The code under test reaches it with its real client (``RemotingClient``,
``BlockingChannels``) over a real socket, so frames, opaques, call timeouts and lost connections are the real
ones. It keeps every request it takes in ``requests``, in arrival order, and serves the requests of a connection
concurrently, as brokers do. A script is a function of the request (plain or async) giving the answer:

- a ``RemotingCommand``: written (the reply, or a request of the peer's own); ``answer(code)`` answers with a
  response code, ``canned(reply)`` with a reply built beforehand, re-addressed to each request;
- ``bytes``: written as they are (a malformed frame);
- None: nothing at all (``silent``: the caller's call times out);
- ``HANG_UP``: the peer closes the connection (``hang_up``: the caller's call fails with ``RemotingError``, as
  when the process on the other side dies);
- a list of these, in turn (a reply and then ``HANG_UP``: a broker restarting between two calls);
- a ``PocketMQError`` raised: the error reply a broker gives for it (its response code and message).

``hold()`` keeps every answer back until ``release()``, so that calls overlap. A peer serves on the loop that
starts it; ``in_thread()`` gives it a loop of its own in a background thread, for blocking code under test.

``FakeNameServer`` answers what brokers and readers ask a name server (``NamesrvClient.route`` and
``cluster_info``) from tables the test sets, in process; ``down`` makes every ask fail as when no name server
answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterator

from pocketmq.common.errors import PocketMQError, ServiceNotAvailableError, TopicNotExistError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.command import FrameDecoder, MalformedFrameError, RemotingCommand
from pocketmq.protocol.error_codes import response_code_of
from pocketmq.protocol.route import BrokerData, ClusterInfo, TopicRouteData

_READ_BYTES = 1 << 16
_THREAD_WAIT_S = 10.0


class _HangUp:
    def __repr__(self) -> str:
        return "HANG_UP"


HANG_UP = _HangUp()
Answer = RemotingCommand | bytes | _HangUp | None | list
Script = Callable[[RemotingCommand], Answer | Awaitable[Answer]]


def answer(
    code: int = ResponseCode.SUCCESS, remark: str | None = None, *, fields: dict | None = None, body: bytes = b""
) -> Script:
    """A script answering every request with ``code`` (and ``fields``, ``body``, ``remark``)."""
    return lambda request: request.response(code, fields, body, remark)


def canned(reply: RemotingCommand) -> Script:
    """A script answering every request with ``reply`` (built for another request: its opaque is replaced)."""
    return lambda request: dataclasses.replace(reply, opaque=request.opaque)


def silent(request: RemotingCommand) -> None:
    """A script that never answers."""
    return None


def hang_up(request: RemotingCommand) -> _HangUp:
    """A script that closes the connection the request came on."""
    return HANG_UP


class FakePeer:
    """Answers each request code with its script (``on``), the others with ``default`` (REQUEST_CODE_NOT_SUPPORTED
    unless given, as a real server answers a code it does not serve)."""

    def __init__(self, default: Script | None = None):
        self._default = default or answer(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "not scripted")
        self._scripts: dict[int, Script] = {}
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._addr: str | None = None
        self.requests: list[RemotingCommand] = []
        self.connections = 0  # connections accepted since the start

    def on(self, code: int, script: Script) -> FakePeer:
        self._scripts[int(code)] = script
        return self

    @property
    def addr(self) -> str:
        """``127.0.0.1:PORT``, also after ``stop`` (an address where nothing listens any more)."""
        assert self._addr is not None, "peer not started"
        return self._addr

    @property
    def open_connections(self) -> int:
        return len(self._writers)

    def requests_of(self, code: int) -> list[RemotingCommand]:
        return [r for r in self.requests if r.code == code]

    def hold(self) -> None:
        """Answer nothing until ``release()`` (requests are still taken and recorded)."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    async def start(self) -> FakePeer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self._addr = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> FakePeer:
        return await self.start()

    async def __aexit__(self, *exc_info) -> None:
        await self.stop()

    @contextlib.contextmanager
    def in_thread(self) -> Iterator[FakePeer]:
        """Serve from an event loop of its own in a background thread while the block runs."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"fake-peer-{id(self):x}", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), loop).result(_THREAD_WAIT_S)
            yield self
        finally:
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result(_THREAD_WAIT_S)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_THREAD_WAIT_S)
            loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        decoder = FrameDecoder()
        answering: set[asyncio.Task] = set()
        try:
            while data := await reader.read(_READ_BYTES):
                for command in decoder.feed(data):
                    if command.is_response:
                        continue  # the peer sends no requests of its own that would wait for one
                    self.requests.append(command)
                    task = asyncio.ensure_future(self._answer(command, writer))
                    answering.add(task)
                    task.add_done_callback(answering.discard)
        except (MalformedFrameError, ConnectionError):
            pass  # as a broker: a connection that breaks the framing is closed
        finally:
            for task in answering:
                task.cancel()
            self._writers.discard(writer)
            writer.close()

    async def _answer(self, request: RemotingCommand, writer: asyncio.StreamWriter) -> None:
        await self._open.wait()
        try:
            outcome = self._scripts.get(request.code, self._default)(request)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except PocketMQError as exc:
            outcome = request.response(response_code_of(exc), remark=str(exc))
        for item in outcome if isinstance(outcome, list) else [outcome]:
            if writer.is_closing():
                return
            if item is HANG_UP:
                writer.close()
            elif isinstance(item, RemotingCommand):
                writer.write(item.encode())
            elif isinstance(item, bytes):
                writer.write(item)

    def __repr__(self) -> str:
        return f"<FakePeer {self._addr or 'not started'} requests={len(self.requests)}>"


class FakeNameServer:
    """Routes by topic and the cluster's broker groups, as a test set them (``group`` adds one)."""

    def __init__(self, routes: dict[str, TopicRouteData] | None = None, cluster: ClusterInfo | None = None):
        self.routes: dict[str, TopicRouteData] = dict(routes or {})
        self.cluster = cluster or ClusterInfo()
        self.down = False  # every ask fails, as when no name server answers
        self.asked = 0

    def group(self, broker_name: str, addrs: dict[int, str], cluster_name: str = "DefaultCluster") -> FakeNameServer:
        """Register the broker group ``broker_name`` (broker id -> address) in ``cluster_name``; replaces it."""
        table = dict(self.cluster.broker_addr_table)
        table[broker_name] = BrokerData(cluster_name, broker_name, dict(addrs))
        clusters = dict(self.cluster.cluster_addr_table)
        names = clusters.get(cluster_name, ())
        clusters[cluster_name] = names if broker_name in names else (*names, broker_name)
        self.cluster = ClusterInfo(table, clusters)
        return self

    def _ask(self) -> None:
        self.asked += 1
        if self.down:
            raise ServiceNotAvailableError("no name server answered")

    async def route(self, topic: str) -> TopicRouteData:
        self._ask()
        if topic not in self.routes:
            raise TopicNotExistError(f"no route of topic {topic}")
        return self.routes[topic]

    async def cluster_info(self) -> ClusterInfo:
        self._ask()
        return self.cluster

    def __repr__(self) -> str:
        state = "down" if self.down else f"groups={sorted(self.cluster.broker_addr_table)}"
        return f"<FakeNameServer topics={sorted(self.routes)} {state}>"
