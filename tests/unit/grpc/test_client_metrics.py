"""Client metrics in the Settings reply, and the OTLP sink on the broker's gRPC port (real in-process broker,
real grpc.aio channel)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData
from rocketmq.grpc_protocol import definition_pb2 as pb
from tests.unit.grpc.test_grpc_servicer import Harness, next_reply, producer_settings

from pocketmq.server.client_metrics import metric_endpoint


def push_consumer_settings(group: str = "g"):
    command = producer_settings()
    command.settings.ClearField("publishing")
    command.settings.client_type = pb.PUSH_CONSUMER
    command.settings.subscription.group.name = group
    command.settings.subscription.subscriptions.add().topic.name = "t"
    return command


async def settings_of(h: Harness, command, language: str):
    call = h.stub.Telemetry(metadata=(("x-mq-client-id", f"host@1@0@{language}"), ("x-mq-language", language)))
    await call.write(command)
    reply = await next_reply(call)
    call.cancel()
    return reply.settings


@pytest.fixture
async def harness(tmp_path, request):
    h = Harness(tmp_path)
    endpoint = getattr(request, "param", None)
    if endpoint:
        h.broker.config = dataclasses.replace(h.broker.config, client_metrics_endpoint=endpoint)
    await h.start()
    yield h
    await h.close()


async def test_metrics_are_off_unless_a_python_push_consumer_needs_a_meter(harness):
    for command, language in ((producer_settings("t"), "PYTHON"), (push_consumer_settings(), "HTTP")):
        s = await settings_of(harness, command, language)
        assert not s.metric.on and not s.metric.endpoints.addresses
    s = await settings_of(harness, push_consumer_settings(), "PYTHON")
    assert s.metric.on and s.metric.endpoints.scheme == pb.IPv4
    [address] = s.metric.endpoints.addresses
    assert f"{address.host}:{address.port}" == harness.broker.grpc_addr  # this broker's own sink


@pytest.mark.parametrize("harness", ["collector.example:4317"], indirect=True)
async def test_a_configured_collector_is_handed_to_every_client(harness):
    for command, language in ((producer_settings("t"), "PYTHON"), (push_consumer_settings(), "HTTP")):
        s = await settings_of(harness, command, language)
        assert s.metric.on and s.metric.endpoints.scheme == pb.DOMAIN_NAME
        assert [(a.host, a.port) for a in s.metric.endpoints.addresses] == [("collector.example", 4317)]


async def test_the_sink_accepts_otlp_exports(harness):
    exporter = OTLPMetricExporter(endpoint=harness.broker.grpc_addr, insecure=True, timeout=5)
    try:
        result = await asyncio.to_thread(exporter.export, MetricsData(resource_metrics=[]))
    finally:
        await asyncio.to_thread(exporter.shutdown)
    assert result is MetricExportResult.SUCCESS and harness.front.metrics_sink.exports == 1


def test_metric_endpoint_rules():
    assert metric_endpoint("c:1", client_type="PRODUCER", language="NODE", own_grpc_addr=None) == ("c", 1)
    assert metric_endpoint(None, client_type="PUSH_CONSUMER", language="PYTHON", own_grpc_addr=None) is None
    assert metric_endpoint(None, client_type="PUSH_CONSUMER", language="python", own_grpc_addr="h:2") == ("h", 2)
    assert metric_endpoint(None, client_type="SIMPLE_CONSUMER", language="PYTHON", own_grpc_addr="h:2") is None
