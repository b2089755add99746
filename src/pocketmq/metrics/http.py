"""``/metrics`` over HTTP for Prometheus: a minimal asyncio HTTP/1.1 server (``pocketmq serve --metrics-port``).

``GET /metrics`` answers ``prometheus.exposition`` of the registry (the text format, or OpenMetrics when the
scraper's ``Accept`` asks for it); other paths 404, other
methods 405. One request per connection (``Connection: close``). The request head is bounded
(``MAX_HEAD_BYTES``) and must arrive within ``HEAD_TIMEOUT_S``, so a slow or hostile client cannot hold the
broker's memory or a connection for long.
"""

from __future__ import annotations

import asyncio
import logging

from pocketmq.metrics.prometheus import exposition
from pocketmq.metrics.registry import MetricsRegistry

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8 * 1024
HEAD_TIMEOUT_S = 5.0
METRICS_PATH = "/metrics"


class MetricsHttpServer:
    def __init__(self, registry: MetricsRegistry, host: str, port: int):
        self._registry = registry
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The bound port (the OS's choice when configured as 0)."""
        if self._server is None:
            raise RuntimeError("metrics server not started")
        return self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> str:
        return f"{self._host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self._host, self._port, limit=MAX_HEAD_BYTES)
        log.info("event=metrics_listening addr=%s path=%s", self.address, METRICS_PATH)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            status, body, content_type = self._answer(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            status, body, content_type = "400 Bad Request", b"bad request\n", "text/plain"
        try:
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode("ascii")
                + body
            )
            await writer.drain()
        except ConnectionError:
            pass  # the scraper went away; nothing to answer
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[str, bytes, str]:
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, _, rest = request_line.partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        if path != METRICS_PATH:
            return "404 Not Found", f"not found: try {METRICS_PATH}\n".encode(), "text/plain"
        if method != "GET":
            return "405 Method Not Allowed", b"only GET\n", "text/plain"
        accept = next((v.strip() for k, _, v in (h.partition(":") for h in header_lines) if k.lower() == "accept"), "")
        body, content_type = exposition(self._registry.prometheus, accept)
        return "200 OK", body, content_type
