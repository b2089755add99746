"""The Prometheus text format of a registry, and the /metrics HTTP endpoint."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.metrics import MetricsRegistry
from pocketmq.metrics.http import MetricsHttpServer
from pocketmq.metrics.prometheus import exposition
from pocketmq.metrics.samples import FamilySnapshot, Sample


def _own_lines(metrics: MetricsRegistry, accept: str = "") -> tuple[str, str]:
    """The exposition without the process's families (their values change), and its content type."""
    body, content_type = exposition(metrics.prometheus, accept)
    text = "".join(line for line in body.decode().splitlines(keepends=True) if "process_" not in line)
    return text, content_type


def test_text_format_of_every_kind():
    metrics = MetricsRegistry()
    metrics.counter("pocketmq_reads_total", "Typed reads.\nBy result", ("broker", "result")).inc(
        2, broker='b"1\\', result="FOUND"
    )
    metrics.gauge("pocketmq_lag_seconds", "Lag").set(1.5)
    metrics.histogram("pocketmq_latency_seconds", "Latency", buckets=(0.1, 1.0)).observe(0.5)
    text, content_type = _own_lines(metrics)
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert text == (
        "# HELP pocketmq_lag_seconds Lag\n"
        "# TYPE pocketmq_lag_seconds gauge\n"
        "pocketmq_lag_seconds 1.5\n"
        "# HELP pocketmq_latency_seconds Latency\n"
        "# TYPE pocketmq_latency_seconds histogram\n"
        'pocketmq_latency_seconds_bucket{le="0.1"} 0.0\n'
        'pocketmq_latency_seconds_bucket{le="1.0"} 1.0\n'
        'pocketmq_latency_seconds_bucket{le="+Inf"} 1.0\n'
        "pocketmq_latency_seconds_sum 0.5\n"
        "pocketmq_latency_seconds_count 1.0\n"
        "# HELP pocketmq_reads_total Typed reads.\\nBy result\n"
        "# TYPE pocketmq_reads_total counter\n"
        'pocketmq_reads_total{broker="b\\"1\\\\",result="FOUND"} 2.0\n'
    )


def test_unlabelled_families_read_zero_before_they_move():
    metrics = MetricsRegistry()
    metrics.counter("pocketmq_updates_total", "Updates")
    metrics.histogram("pocketmq_round_seconds", "Rounds", buckets=(1.0,))
    metrics.counter("pocketmq_reads_total", "Reads", ("result",))  # labelled: no series until one moves
    text, _ = _own_lines(metrics)
    assert "pocketmq_updates_total 0.0\n" in text
    assert 'pocketmq_round_seconds_bucket{le="+Inf"} 0.0\n' in text and "pocketmq_round_seconds_count 0.0\n" in text
    assert "pocketmq_reads_total{" not in text


def test_sources_give_families_at_every_read():
    metrics = MetricsRegistry()
    reads = [0]
    metrics.add_source(lambda: [FamilySnapshot("pocketmq_read_total", "counter", "read", [Sample("", {}, reads[0])])])
    reads[0] = 7
    text, _ = _own_lines(metrics)
    assert "pocketmq_read_total 7.0\n" in text


def test_each_registry_exposes_its_own_families_and_the_process():
    first, second = MetricsRegistry(), MetricsRegistry()
    first.counter("pocketmq_a_total", "a").inc()
    second.counter("pocketmq_b_total", "b").inc(2)
    first_text = exposition(first.prometheus)[0].decode()
    second_text = exposition(second.prometheus)[0].decode()
    assert "pocketmq_a_total 1.0" in first_text and "pocketmq_b_total" not in first_text
    assert "pocketmq_b_total 2.0" in second_text and "pocketmq_a_total" not in second_text
    for text in (first_text, second_text):
        assert "process_cpu_seconds_total " in text and "process_resident_memory_bytes " in text


def test_openmetrics_when_the_scraper_asks():
    metrics = MetricsRegistry()
    metrics.counter("pocketmq_things_total", "things").inc()
    text, content_type = _own_lines(metrics, "application/openmetrics-text; version=1.0.0,text/plain;q=0.5")
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    assert "# TYPE pocketmq_things counter\npocketmq_things_total 1.0\n" in text
    assert text.endswith("# EOF\n")


def test_a_counter_name_ends_in_total():
    with pytest.raises(ValueError, match="must end in _total"):
        MetricsRegistry().counter("pocketmq_things", "things")


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
        assert b"pocketmq_things_total 1.0\n" in body
        counter.inc()
        head, body = await _http(
            server.port,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
        )
        assert "application/openmetrics-text" in head and b"pocketmq_things_total 2.0\n" in body
        head, _ = await _http(server.port, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
        assert head.startswith("HTTP/1.1 404")
        head, _ = await _http(server.port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert head.startswith("HTTP/1.1 405")
        head, _ = await _http(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X: " + b"a" * 9000 + b"\r\n\r\n")
        assert head.split(" ")[1] == "400"  # the head is bounded (aiohttp answers that in HTTP/1.0)
    finally:
        await server.stop()
