"""The console's HTTP server: inside a broker (``pocketmq serve --console-port``, on the broker's event loop,
with its ``/metrics``) or standalone against a cluster (``pocketmq console``). Either way the console reaches
the brokers through the name server with the SDK's admin client, so both show the same whole cluster."""

from __future__ import annotations

import logging
import ssl

from pocketmq.client.config import ClientConfig
from pocketmq.console.admins import AdminPool
from pocketmq.console.app import build_app
from pocketmq.metrics.http import HttpSite
from pocketmq.metrics.registry import MetricsRegistry

log = logging.getLogger(__name__)

# A console request is one person's click: a broker slower than this is shown as an error, not waited for.
CONSOLE_REQUEST_TIMEOUT_S = 5.0
CONSOLE_CONNECT_TIMEOUT_S = 3.0


def console_client_config(namesrv_addr: str, **tls: object) -> ClientConfig:
    return ClientConfig(
        namesrv_addr=namesrv_addr,
        instance_name="console",
        request_timeout_s=CONSOLE_REQUEST_TIMEOUT_S,
        connect_timeout_s=CONSOLE_CONNECT_TIMEOUT_S,
        **tls,  # type: ignore[arg-type]
    )


class ConsoleServer(HttpSite):
    def __init__(
        self,
        client_config: ClientConfig,
        host: str,
        port: int,
        *,
        login_required: bool,
        ssl_context: ssl.SSLContext | None = None,
        metrics: MetricsRegistry | None = None,
    ):
        app = build_app(AdminPool(client_config), login_required=login_required, metrics=metrics)
        super().__init__(app, host, port, ssl_context)
        self.scheme = "https" if ssl_context is not None else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}"

    async def start(self) -> None:
        await super().start()
        log.info("event=console_listening url=%s", self.url)
