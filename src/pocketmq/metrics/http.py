"""``/metrics`` over HTTP for Prometheus, on aiohttp: the route the web console mounts (``metrics_route``) and a
server of that route alone (``pocketmq serve --metrics-port``, kept beside ``--console-port``).

``GET /metrics`` answers ``prometheus.exposition`` of the registry (the text format, or OpenMetrics when the
scraper's ``Accept`` asks for it); other paths 404, other methods 405. aiohttp bounds the request head (a
header line over 8 KiB is a 400), so a hostile client cannot hold the broker's memory.
"""

from __future__ import annotations

import logging
import ssl

from aiohttp import web

from pocketmq.metrics.prometheus import exposition
from pocketmq.metrics.registry import MetricsRegistry

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"


def metrics_route(registry: MetricsRegistry) -> web.RouteDef:
    async def handle(request: web.Request) -> web.Response:
        body, content_type = exposition(registry.prometheus, request.headers.get("Accept", ""))
        # content_type carries parameters (version, charset): set as the raw header
        return web.Response(body=body, headers={"Content-Type": content_type})

    return web.get(METRICS_PATH, handle, allow_head=False)


class HttpSite:
    """An aiohttp application listening on ``host:port`` (0: the OS picks), optionally over TLS."""

    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        *,
        keepalive_timeout_s: float = 75.0,
    ):
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=keepalive_timeout_s)
        self._host = host
        self._port = port
        self._ssl_context = ssl_context
        self._site: web.TCPSite | None = None

    @property
    def port(self) -> int:
        """The bound port (the OS's choice when configured as 0)."""
        if self._site is None:
            raise RuntimeError("HTTP server not started")
        return int(self._runner.addresses[0][1])

    @property
    def address(self) -> str:
        return f"{self._host}:{self.port}"

    async def start(self) -> None:
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self._host, self._port, ssl_context=self._ssl_context)
        await self._site.start()

    async def stop(self) -> None:
        await self._runner.cleanup()
        self._site = None


class MetricsHttpServer(HttpSite):
    def __init__(self, registry: MetricsRegistry, host: str, port: int):
        app = web.Application()
        app.add_routes([metrics_route(registry)])
        # one scrape per connection, as Prometheus scrapes: no idle connections held open
        super().__init__(app, host, port, keepalive_timeout_s=0)

    async def start(self) -> None:
        await super().start()
        log.info("event=metrics_listening addr=%s path=%s", self.address, METRICS_PATH)
