"""A real ``pocketmq namesrv`` process, driven over the remoting protocol by fake brokers and clients."""

from __future__ import annotations

import asyncio
import json
import zlib

import pytest

from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.route import BrokerFlags, BrokerIdentity, RegisterBrokerBody, TopicRouteData
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.fakes import FakePeer, answer
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import namesrv_process


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory):
    proc = namesrv_process(tmp_path_factory.mktemp("namesrv")).start()
    yield proc
    proc.stop()


@pytest.fixture
async def client():
    remoting = RemotingClient()
    yield remoting
    await remoting.close()


async def register(
    remoting: RemotingClient,
    namesrv_addr: str,
    name: str,
    addr: str,
    *topics: str,
    flags: BrokerFlags = BrokerFlags(auto_create_topic_enable=False),
) -> RemotingCommand:
    body = RegisterBrokerBody(tuple(TopicConfig(t, 4, 4) for t in topics), {"counter": 1}, flags).to_json()
    fields = BrokerIdentity("DefaultCluster", name, 0, addr).register_fields(zlib.crc32(body))
    return await remoting.invoke(namesrv_addr, RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body))


async def route_reply(remoting: RemotingClient, namesrv_addr: str, topic: str, **extra: str) -> RemotingCommand:
    return await remoting.invoke(
        namesrv_addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **extra})
    )


async def test_prints_and_reports_where_it_listens(namesrv):
    assert namesrv.addresses == {
        "remoting": None,
        "namesrv": namesrv.namesrv,
        "grpc": None,
        "metrics": None,
        "console": None,
    }
    assert f"namesrv listening on {namesrv.namesrv}" in namesrv.log_tail()


async def test_registered_brokers_make_the_route_4x_clients_read(namesrv, client):
    assert (await register(client, namesrv.namesrv, "it-a", "127.0.0.1:20911", "it-orders")).code == 0
    assert (await register(client, namesrv.namesrv, "it-b", "127.0.0.1:20912", "it-orders")).code == 0

    reply = await route_reply(client, namesrv.namesrv, "it-orders")

    assert reply.code == ResponseCode.SUCCESS
    obj = json.loads(reply.body)
    assert "orderTopicConf" not in obj
    assert [q["brokerName"] for q in obj["queueDatas"]] == ["it-a", "it-b"]
    assert [b["brokerAddrs"] for b in obj["brokerDatas"]] == [{"0": "127.0.0.1:20911"}, {"0": "127.0.0.1:20912"}]


async def test_broker_connection_closing_drops_it_from_the_route(namesrv, client):
    broker = RemotingClient()
    await register(broker, namesrv.namesrv, "it-closing", "127.0.0.1:20913", "it-closing-topic")
    assert (await route_reply(client, namesrv.namesrv, "it-closing-topic")).code == ResponseCode.SUCCESS

    await broker.close()

    async def dropped() -> bool:
        return (await route_reply(client, namesrv.namesrv, "it-closing-topic")).code == ResponseCode.TOPIC_NOT_EXIST

    await eventually(dropped, 10, "the broker dropped from the route")


async def test_route_lookup_auto_creates_on_a_broker_in_another_process_unless_told_not_to(namesrv, client):
    async with FakePeer().on(RequestCode.UPDATE_AND_CREATE_TOPIC, answer()) as fake_broker:
        await register(
            client, namesrv.namesrv, "it-auto", fake_broker.addr, flags=BrokerFlags(auto_create_topic_enable=True)
        )

        # an admin's look (autoCreate=false) finds no topic and creates none
        looked = await route_reply(client, namesrv.namesrv, "it-fresh", autoCreate="false")
        assert looked.code == ResponseCode.TOPIC_NOT_EXIST and fake_broker.requests == []

        reply = await route_reply(client, namesrv.namesrv, "it-fresh")

        assert reply.code == ResponseCode.SUCCESS
        assert [r.ext_fields["topic"] for r in fake_broker.requests] == ["it-fresh"]
        route = TopicRouteData.from_json(reply.body)
        assert route.broker("it-auto").master_addr == fake_broker.addr


async def test_unknown_code_gets_request_code_not_supported(namesrv, client):
    reply = await client.invoke(namesrv.namesrv, RemotingCommand.request(RequestCode.PULL_MESSAGE))
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_garbage_frame_closes_only_that_connection(namesrv, client):
    host, port = namesrv.namesrv.rsplit(":", 1)
    assert (
        await client.invoke(namesrv.namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    ).code == ResponseCode.SUCCESS
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"\x7f\xff\xff\xffthis is not a remoting frame")
    await writer.drain()
    async with asyncio.timeout(5):
        assert await reader.read() == b""  # the server closed it
    writer.close()

    reply = await client.invoke(namesrv.namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert reply.code == ResponseCode.SUCCESS


def test_sigterm_stops_it_cleanly(tmp_path):
    proc = namesrv_process(tmp_path).start()
    assert proc.stop() == 0
    assert "event=namesrv_stopped" in proc.log_tail()
