"""Namespaces of v2 requests: the pure rewrite of resources, and every method of a real in-process servicer
seeing broker names (``ns%name``) while clients see their own."""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from tests.unit.grpc.test_grpc_pull import h, pull, pull_request  # noqa: F401 (the fixture)
from tests.unit.grpc.test_grpc_servicer import next_reply, producer_settings

from pocketmq.common.message import Message
from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.grpc_namespace import unwrap, wrap


def test_every_resource_of_a_request_is_rewritten_however_deep():
    command = spb.TelemetryCommand()
    command.settings.publishing.topics.add(name="a", resource_namespace="ns")
    command.settings.publishing.topics.add(name="b")  # Node names the namespace in the header only
    assert wrap(command, "hdr") == "ns"
    assert [(t.resource_namespace, t.name) for t in command.settings.publishing.topics] == [("", "ns%a"), ("", "hdr%b")]

    request = spb.ReceiveMessageRequest()
    request.group.name = "g"
    request.message_queue.topic.name = "t"
    assert wrap(request, "") == "" and (request.group.name, request.message_queue.topic.name) == ("g", "t")


def test_only_names_of_the_requests_namespace_are_given_back():
    response = spb.QueryRouteResponse()
    for name in ("ns%t", "other%t", "%RETRY%ns%g"):
        response.message_queues.add().topic.name = name
    unwrap(response, "ns")
    assert [(q.topic.resource_namespace, q.topic.name) for q in response.message_queues] == [
        ("ns", "t"),
        ("", "other%t"),
        ("", "%RETRY%ns%g"),
    ]
    assert unwrap(response, "") is response


async def test_a_pull_in_a_namespace_reads_the_namespaces_topic(h):
    h.broker.topics.create_or_update(TopicConfig("ns1%t", 1, 1))
    await h.broker.messages.send([Message.create("ns1%t", "in-ns1")], topic="ns1%t", queue_id=0)
    await h.broker.messages.send([Message.create("t", "no-ns")], topic="t", queue_id=0)
    namespaced = pull_request(0)
    namespaced.message_queue.topic.resource_namespace = "ns1"
    namespaced.group.resource_namespace = "ns1"
    assert await pull(h, namespaced) == (V2StatusCode.OK, ["in-ns1"], 1)
    assert await pull(h, pull_request(0)) == (V2StatusCode.OK, ["no-ns"], 1)
    responses = [r async for r in h.stub.PullMessage(namespaced, metadata=(("x-mq-client-id", "c@1"),))]
    assert (responses[1].message.topic.resource_namespace, responses[1].message.topic.name) == ("ns1", "t")
    assert h.broker.offsets.query("ns1%g", "ns1%t", 0) is None  # the group is the namespace's too


async def test_the_header_namespace_names_a_node_clients_resources_and_its_answers(h):
    metadata = (("x-mq-client-id", "node@1"), ("x-mq-namespace", "ns2"))
    route_request = spb.QueryRouteRequest()
    route_request.topic.name = "orders"
    route_request.endpoints.scheme = pb.IPv4
    route_request.endpoints.addresses.add(host="127.0.0.1", port=1)
    route = await h.stub.QueryRoute(route_request, metadata=metadata)
    assert route.status.code == V2StatusCode.OK and h.broker.topics.get("ns2%orders") is not None
    assert {(q.topic.resource_namespace, q.topic.name) for q in route.message_queues} == {("ns2", "orders")}

    call = h.stub.Telemetry(metadata=metadata)
    await call.write(producer_settings("orders"))
    settings = (await next_reply(call)).settings
    assert [(t.resource_namespace, t.name) for t in settings.publishing.topics] == [("ns2", "orders")]
    assert h.front.sessions.get("node@1").topics == ("ns2%orders",)
    call.cancel()
