"""The harness's TCP proxy: every server process is reached through it, so the schedule can cut or slow the
link between any two processes.

Each server listens on 127.0.0.1:P and advertises 127.0.0.X:P (its own loopback address, the same port), where
the proxy listens and forwards to 127.0.0.1:P. On accept the proxy names the caller (``peers.PeerNames``), so
a link is the unordered pair (caller, server). A *partition* of a pair stalls its bytes both ways (nothing is
read, nothing written: senders see timeouts, as on a real network, and TCP carries on once healed; a
connection opened meanwhile is accepted and waits); a *delay* holds every chunk for ``delay_ms`` (order kept).
The proxy runs its own asyncio loop on a thread; the control methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

from pocketmq.testing.chaos.peers import PeerNames

_CHUNK = 64 * 1024


def _link(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


@dataclass
class _Endpoint:
    owner: str
    listen_host: str
    port: int
    server: asyncio.AbstractServer | None = None


class ChaosProxy:
    def __init__(self, peers: PeerNames):
        self.peers = peers
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxy", daemon=True)
        self._endpoints: list[_Endpoint] = []
        self._cut: set[frozenset[str]] = set()
        self._delay_ms: dict[frozenset[str], int] = {}
        self._healed = asyncio.Event()  # set (and replaced) whenever a partition heals, to wake stalled pumps
        self._connections: set[asyncio.Task] = set()
        self.accepted: dict[tuple[str, str], int] = {}  # (caller, owner) -> connections, for the report

    # ---- lifecycle (caller's thread) -------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def listen(self, owner: str, listen_host: str, port: int) -> None:
        """Accept on ``listen_host:port`` and forward to ``127.0.0.1:port`` (``owner``'s real socket)."""
        endpoint = _Endpoint(owner, listen_host, port)
        self._run(self._listen(endpoint))
        self._endpoints.append(endpoint)

    def close(self) -> None:
        self._run(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # ---- faults (caller's thread) ----------------------------------------------------------------------
    def partition(self, a: str, b: str) -> None:
        self._loop.call_soon_threadsafe(self._cut.add, _link(a, b))

    def heal_partition(self, a: str, b: str) -> None:
        self._loop.call_soon_threadsafe(self._heal, _link(a, b))

    def delay(self, a: str, b: str, delay_ms: int) -> None:
        self._loop.call_soon_threadsafe(self._delay_ms.__setitem__, _link(a, b), delay_ms)

    def heal_delay(self, a: str, b: str) -> None:
        self._loop.call_soon_threadsafe(self._delay_ms.pop, _link(a, b), None)

    def heal_all(self) -> None:
        def heal() -> None:
            self._delay_ms.clear()
            for link in list(self._cut):
                self._heal(link)

        self._loop.call_soon_threadsafe(heal)

    # ---- inside the loop -------------------------------------------------------------------------------
    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    async def _listen(self, endpoint: _Endpoint) -> None:
        async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is None:  # start_server runs each connection's callback as a task of its own
                raise RuntimeError("a connection callback outside a task")
            self._connections.add(task)
            try:
                await self._serve(endpoint, reader, writer)
            finally:
                self._connections.discard(task)

        endpoint.server = await asyncio.start_server(on_accept, endpoint.listen_host, endpoint.port, reuse_address=True)

    async def _close(self) -> None:
        for endpoint in self._endpoints:
            if endpoint.server is not None:
                endpoint.server.close()
        for task in list(self._connections):
            task.cancel()

    def _heal(self, link: frozenset[str]) -> None:
        self._cut.discard(link)
        healed, self._healed = self._healed, asyncio.Event()
        healed.set()

    async def _open(self, link: frozenset[str]) -> None:
        """Return once ``link`` is not cut."""
        while link in self._cut:
            await self._healed.wait()

    async def _serve(self, endpoint: _Endpoint, reader, writer) -> None:
        peer_host, peer_port = writer.get_extra_info("peername")[:2]
        caller = await asyncio.to_thread(self.peers.name_of, peer_host, peer_port)
        key = (caller, endpoint.owner)
        self.accepted[key] = self.accepted.get(key, 0) + 1
        link = _link(caller, endpoint.owner)
        upstream_writer = None
        try:
            await self._open(link)
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", endpoint.port)
            await asyncio.gather(self._pump(link, reader, upstream_writer), self._pump(link, upstream_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass  # the owner is down (refused) or a side closed: the caller sees the connection end
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    w.close()

    async def _pump(self, link: frozenset[str], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pending: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.create_task(self._send_delayed(link, pending, writer))
        try:
            while True:
                await self._open(link)
                data = await reader.read(_CHUNK)
                if not data:
                    break
                await pending.put((time.monotonic() + self._delay_ms.get(link, 0) / 1000, data))
            await pending.put((0.0, b""))
            await sender
        finally:
            sender.cancel()
            writer.close()

    async def _send_delayed(self, link: frozenset[str], pending: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        while True:
            due, data = await pending.get()
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            wait_s = due - time.monotonic()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
            await self._open(link)  # a chunk read before the cut stays in the proxy until the heal
            writer.write(data)
            await writer.drain()
