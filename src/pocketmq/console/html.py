"""HTML of the console's pages, rendered on the server: the layout, tables whose rows and cells carry stable
``id`` and ``data-*`` attributes (what browser tests read), and line charts as inline SVG (no chart library
to ship: a polyline per series, scaled to the chart's box)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from html import escape
from urllib.parse import quote

from aiohttp import web

PAGES = [("cluster", "Cluster"), ("topics", "Topics"), ("groups", "Groups"), ("messages", "Messages"),
         ("dead-letters", "Dead letters"), ("config", "Config")]  # fmt: skip
CHART_WIDTH = 480
CHART_HEIGHT = 120
SERIES_COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea"]


def page(title: str, active: str, body: str) -> web.Response:
    nav = "".join(
        f'<a id="nav-{key}" href="/{key}"{" class=active" if key == active else ""}>{label}</a>' for key, label in PAGES
    )
    return web.Response(
        content_type="text/html",
        text=f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} · PocketMQ</title>
<link rel="stylesheet" href="/static/console.css">
<script src="/static/htmx.min.js" defer></script><script src="/static/console.js" defer></script>
</head><body data-page="{active}"><header><strong>PocketMQ</strong><nav>{nav}</nav></header>
<main id="page-{active}"><h1 id="page-title">{escape(title)}</h1>{body}</main></body></html>""",
    )


def fragment(html: str) -> web.Response:
    return web.Response(content_type="text/html", text=html)


def live(element_id: str, url: str, every_s: int = 5) -> str:
    """A block that loads ``url`` at once and again every ``every_s`` seconds (htmx polling)."""
    return (
        f'<div id="{element_id}" hx-get="{escape(url)}" hx-trigger="load, every {every_s}s" '
        f'hx-swap="innerHTML">loading…</div>'
    )


def cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return escape(str(value))


def table(
    table_id: str,
    columns: Sequence[str],
    rows: Iterable[dict],
    *,
    row_key: str,
    links: dict[str, str] | None = None,
    extra: Callable[[str], str] | None = None,
) -> str:
    """A table with ``id=table_id``; each row ``data-key`` = its ``row_key`` value, each cell
    ``data-field`` = its column. ``links``: column -> URL template (``{value}``) that cell links to;
    ``extra``: the HTML of a last column, given the row's key."""
    head = "".join(f"<th>{escape(c)}</th>" for c in columns) + ("<th></th>" if extra else "")
    lines = []
    for row in rows:
        key = escape(str(row.get(row_key)))
        cells = []
        for column in columns:
            shown = cell(row.get(column))
            if links and column in links and row.get(column) is not None:
                url = links[column].format(value=quote(str(row[column]), safe=""))
                shown = f'<a href="{escape(url)}">{shown}</a>'
            cells.append(f'<td data-field="{column}">{shown}</td>')
        if extra:
            cells.append(f"<td>{extra(str(row.get(row_key)))}</td>")
        lines.append(f'<tr data-key="{key}">{"".join(cells)}</tr>')
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table>'


def line_chart(chart_id: str, title: str, series: dict[str, list[tuple[float, float]]], unit: str) -> str:
    """Inline SVG lines of ``series`` (name -> [(time s, value)]), scaled together; the latest value of each
    is in the legend (and in ``data-latest`` for tests)."""
    points = [p for values in series.values() for p in values]
    legend = []
    lines = []
    if points:
        t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
        top = max(max(p[1] for p in points), 1e-9)
        span = max(t1 - t0, 1e-9)
        for i, (name, values) in enumerate(series.items()):
            color = SERIES_COLORS[i % len(SERIES_COLORS)]
            xy = " ".join(
                f"{(t - t0) / span * CHART_WIDTH:.1f},{CHART_HEIGHT - v / top * (CHART_HEIGHT - 4):.1f}"
                for t, v in values
            )
            latest = values[-1][1] if values else 0.0
            lines.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{xy}"/>')
            legend.append(
                f'<span class="legend" data-series="{escape(name)}" data-latest="{latest:.3f}" '
                f'style="color:{color}">{escape(name)}: {latest:,.1f} {escape(unit)}</span>'
            )
        lines.append(f'<text x="2" y="12" class="axis">{top:,.1f} {escape(unit)}</text>')
    return (
        f'<figure id="{chart_id}" class="chart"><figcaption>{escape(title)} {"".join(legend)}</figcaption>'
        f'<svg viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" '
        f'role="img">{"".join(lines)}</svg></figure>'
    )


def api_form(form_id: str, method: str, url: str, fields: str, submit: str, confirm: str | None = None) -> str:
    """A form that console.js sends to the JSON API (its fields as a JSON object), showing the answer in
    ``#{form_id}-result``; ``confirm``: asked first."""
    confirm_attr = f' data-confirm="{escape(confirm)}"' if confirm else ""
    return (
        f'<form id="{form_id}" class="api-form" data-method="{method}" data-url="{escape(url)}"{confirm_attr}>'
        f'{fields}<button type="submit" id="{form_id}-submit">{escape(submit)}</button>'
        f'<output id="{form_id}-result" class="result"></output></form>'
    )
