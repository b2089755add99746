"""The console's aiohttp application: the JSON API under ``/api``, the HTML pages and their fragments, the
static files of the package (htmx, the console's script and style: nothing fetched from the network), and
``/metrics`` when the console runs inside a broker."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from pocketmq.console import api_cluster, api_config, api_dead_letters, api_groups, api_messages, api_topics, pages
from pocketmq.console.admins import AdminPool
from pocketmq.console.errors import api_errors
from pocketmq.console.history import History
from pocketmq.console.login import LOGIN_REQUIRED_KEY, POOL_KEY
from pocketmq.metrics.http import metrics_route
from pocketmq.metrics.registry import MetricsRegistry

STATIC_DIR = Path(__file__).parent / "static"


def build_app(admins: AdminPool, *, login_required: bool, metrics: MetricsRegistry | None = None) -> web.Application:
    """``login_required``: every request must carry a user's credentials (access control is on)."""
    app = web.Application(middlewares=[api_errors])
    app[POOL_KEY] = admins
    app[LOGIN_REQUIRED_KEY] = login_required
    app[pages.HISTORY_KEY] = History()
    for module in (api_cluster, api_topics, api_groups, api_messages, api_dead_letters, api_config, pages):
        app.add_routes(module.routes)
    app.router.add_static("/static", STATIC_DIR)
    if metrics is not None:
        app.add_routes([metrics_route(metrics)])  # Prometheus scrapes without credentials, as before

    async def close_admins(app: web.Application) -> None:
        await admins.close()

    app.on_cleanup.append(close_admins)
    return app
