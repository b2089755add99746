"""Helpers of the gRPC integration tests: run the official client, read a topic back, raw v2 stubs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.client.config import ClientConfig
from pocketmq.client.pull_consumer import PullConsumer, PullStatus
from pocketmq.protocol.grpc_codec import MessagingServiceStub

OFFICIAL_CLIENT = Path(__file__).with_name("grpc_official_client.py")
CLIENT_ID = (("x-mq-client-id", "itest@1@0@abc"),)


def official_client_command(spec: dict, script: Path = OFFICIAL_CLIENT) -> list[str]:
    return [sys.executable, str(script), json.dumps(spec)]


def client_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return dict(os.environ, HOME=str(home))  # the client logs under ~/logs


def client_log_problems(home: Path) -> list[str]:
    """The errors and warnings an official client logged under ``home`` (its HOME during the run)."""
    lines = [line for log in home.rglob("*.log") for line in log.read_text(errors="replace").splitlines()]
    assert lines, f"no client log under {home}"
    return [line for line in lines if "[ERROR]" in line or "[WARNING]" in line or "[WARN]" in line]


def run_official_client(spec: dict, home: Path, timeout_s: float = 100, script: Path = OFFICIAL_CLIENT) -> list[dict]:
    """Run the official client (``script``) to the end; the JSON lines it printed (one outcome per send for
    grpc_official_client.py)."""
    out = subprocess.run(
        official_client_command(spec, script),
        env=client_env(home),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def read_topic(namesrv: str, topic: str) -> dict[tuple[str, int], list]:
    """Every stored message of ``topic`` by (broker name, queue id), in queue order (pocketmq SDK, remoting)."""
    stored = {}
    with PullConsumer("grpc-itest-reader", ClientConfig(namesrv_addr=namesrv)) as consumer:
        for queue in consumer.fetch_queues(topic):
            messages, offset = [], 0
            while True:
                result = consumer.pull(queue, offset, 256)
                if result.status is not PullStatus.FOUND:
                    break
                messages.extend(result.messages)
                offset = result.next_begin_offset
            stored[(queue.broker_name, queue.queue_id)] = messages
    return stored


def stub(address: str) -> tuple[grpc.Channel, MessagingServiceStub]:
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)])
    return channel, MessagingServiceStub(channel)


def route_request(topic: str, address: str) -> spb.QueryRouteRequest:
    host, port = address.rsplit(":", 1)
    request = spb.QueryRouteRequest()
    request.topic.name = topic
    request.endpoints.scheme = pb.IPv4
    request.endpoints.addresses.add(host=host, port=int(port))
    return request


def consumer_settings(group: str, topic: str, filter_type: int, expression: str) -> spb.TelemetryCommand:
    command = spb.TelemetryCommand()
    command.settings.client_type = pb.SIMPLE_CONSUMER
    command.settings.subscription.group.name = group
    entry = command.settings.subscription.subscriptions.add()
    entry.topic.name = topic
    entry.expression.type = filter_type
    entry.expression.expression = expression
    return command


def producer_settings(*topics: str) -> spb.TelemetryCommand:
    command = spb.TelemetryCommand()
    command.settings.client_type = pb.PRODUCER
    for topic in topics:
        command.settings.publishing.topics.add(name=topic)
    return command
