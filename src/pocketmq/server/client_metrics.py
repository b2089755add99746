"""Client metrics of the official RocketMQ 5 clients: where the Settings reply tells them to export, and the
sink that takes their exports when no collector is configured.

A client exports its own metrics (send latency, delivery latency, consume times) over OTLP/gRPC to the endpoint
its Settings reply names with ``metric.on = true``. With the broker setting ``client_metrics_endpoint`` (an
OpenTelemetry collector's ``host:port``) every client is sent there; without it the reply says
``metric.on = false`` (metrics off).

One client cannot take "off" quietly: the Python client's PushConsumer (5.1.x) registers gauges on its meter
provider after every Settings reply, and with metrics off it has none, so it logs
``'NoneType' object has no attribute 'get_meter'`` and stops reading its Telemetry stream. A Python push
consumer is therefore pointed at this broker's own gRPC port, where ``MetricsSink`` accepts OTLP exports and
drops them: the client runs as with metrics on and logs nothing.
"""

from __future__ import annotations

import logging

import grpc

from pocketmq.server.grpc_routing import parse_address

log = logging.getLogger(__name__)

OTLP_METRICS_SERVICE = "opentelemetry.proto.collector.metrics.v1.MetricsService"
_NEEDS_A_METER = frozenset({("PYTHON", "PUSH_CONSUMER")})  # (x-mq-language, client type): see the module doc


def metric_endpoint(
    configured: str | None, *, client_type: str, language: str, own_grpc_addr: str | None
) -> tuple[str, int] | None:
    """The OTLP/gRPC endpoint a client's Settings reply names (metrics on), or None (metrics off)."""
    if configured:
        return parse_address(configured)
    if own_grpc_addr and (language.upper(), client_type) in _NEEDS_A_METER:
        return parse_address(own_grpc_addr)
    return None


class MetricsSink:
    """OTLP ``MetricsService.Export`` on a gRPC server: every export is accepted (an empty
    ``ExportMetricsServiceResponse``, whose encoding is no bytes) and dropped; only the count is kept."""

    def __init__(self) -> None:
        self.exports = 0

    def add_to(self, server) -> None:
        handler = grpc.unary_unary_rpc_method_handler(self._export)  # raw bytes in and out: no protobuf needed
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(OTLP_METRICS_SERVICE, {"Export": handler}),)
        )

    async def _export(self, request: bytes, context) -> bytes:
        self.exports += 1
        log.debug("event=client_metrics_dropped bytes=%d", len(request))
        return b""

    def __repr__(self) -> str:
        return f"<MetricsSink exports={self.exports}>"
