"""The Prometheus text format of a registry, and the /metrics HTTP endpoint."""

from __future__ import annotations

import asyncio

from pocketmq.metrics import MetricsRegistry
from pocketmq.metrics.http import MetricsHttpServer
from pocketmq.metrics.prometheus import format_value, render_text


def test_text_format_of_every_kind():
    metrics = MetricsRegistry()
    metrics.counter("pocketmq_reads_total", "Typed reads.\nBy result", ("broker", "result")).inc(
        2, broker='b"1\\', result="FOUND"
    )
    metrics.gauge("pocketmq_lag_seconds", "Lag").set(1.5)
    metrics.histogram("pocketmq_latency_seconds", "Latency", buckets=(0.1, 1.0)).observe(0.5)
    assert render_text(metrics) == (
        "# HELP pocketmq_lag_seconds Lag\n"
        "# TYPE pocketmq_lag_seconds gauge\n"
        "pocketmq_lag_seconds 1.5\n"
        "# HELP pocketmq_latency_seconds Latency\n"
        "# TYPE pocketmq_latency_seconds histogram\n"
        'pocketmq_latency_seconds_bucket{le="0.1"} 0\n'
        'pocketmq_latency_seconds_bucket{le="1.0"} 1\n'
        'pocketmq_latency_seconds_bucket{le="+Inf"} 1\n'
        "pocketmq_latency_seconds_sum 0.5\n"
        "pocketmq_latency_seconds_count 1\n"
        "# HELP pocketmq_reads_total Typed reads.\\nBy result\n"
        "# TYPE pocketmq_reads_total counter\n"
        'pocketmq_reads_total{broker="b\\"1\\\\",result="FOUND"} 2\n'
    )


def test_values():
    assert [format_value(v) for v in (3.0, 0.25, float("inf"), float("-inf"), float("nan"))] == [
        "3",
        "0.25",
        "+Inf",
        "-Inf",
        "NaN",
    ]


def test_empty_registry_renders_nothing():
    assert render_text(MetricsRegistry()) == ""


async def _http(port: int, request: bytes) -> tuple[str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.decode(), body


async def test_http_endpoint_serves_the_current_values():
    metrics = MetricsRegistry()
    counter = metrics.counter("pocketmq_things_total", "things")
    server = MetricsHttpServer(metrics, "127.0.0.1", 0)
    await server.start()
    try:
        counter.inc()
        head, body = await _http(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert head.startswith("HTTP/1.1 200") and "version=0.0.4" in head
        assert b"pocketmq_things_total 1\n" in body
        counter.inc()
        _, body = await _http(server.port, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert b"pocketmq_things_total 2\n" in body
        head, _ = await _http(server.port, b"GET /other HTTP/1.1\r\n\r\n")
        assert head.startswith("HTTP/1.1 404")
        head, _ = await _http(server.port, b"POST /metrics HTTP/1.1\r\n\r\n")
        assert head.startswith("HTTP/1.1 405")
        head, _ = await _http(server.port, b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"a" * 9000 + b"\r\n\r\n")
        assert head.startswith("HTTP/1.1 400")  # the head is bounded
    finally:
        await server.stop()
