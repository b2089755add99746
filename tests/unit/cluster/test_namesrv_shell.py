"""The NameServer's remoting shell in process: requests over loopback TCP, auto-creation against fake brokers."""

from __future__ import annotations

import asyncio
import json
import zlib

import pytest
from tests.unit.virtual_time import advance_until

from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.route import (
    BrokerFlags,
    BrokerIdentity,
    ClusterInfo,
    RegisterBrokerBody,
    TopicRouteData,
    topic_list_from_json,
)
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.fakes import FakePeer, answer
from pocketmq.testing.polling import eventually


@pytest.fixture
def client(remoting):
    return remoting


async def fake_broker(peers, code: int = ResponseCode.SUCCESS) -> FakePeer:
    """A fake broker answering UPDATE_AND_CREATE_TOPIC with ``code``."""
    script = answer(code, None if code == ResponseCode.SUCCESS else "refused")
    return (await peers()).on(RequestCode.UPDATE_AND_CREATE_TOPIC, script)


async def register(
    client, namesrv, name: str, addr: str, *topics: str, flags=BrokerFlags(), broker_id=0, cluster="DefaultCluster"
) -> RemotingCommand:
    identity = BrokerIdentity(cluster, name, broker_id, addr)
    body = RegisterBrokerBody(tuple(TopicConfig(t, 4, 4) for t in topics), {"counter": 1}, flags).to_json()
    return await client.invoke(
        namesrv.address,
        RemotingCommand.request(RequestCode.REGISTER_BROKER, identity.register_fields(zlib.crc32(body)), body),
    )


async def ask(client, namesrv, code: int, fields: dict | None = None, body: bytes = b"") -> RemotingCommand:
    return await client.invoke(namesrv.address, RemotingCommand.request(code, fields, body))


async def test_register_then_route_cluster_info_and_topic_lists(namesrv, client):
    assert (await register(client, namesrv, "broker-a", "127.0.0.1:10911", "orders")).code == ResponseCode.SUCCESS
    await register(client, namesrv, "broker-c", "127.0.0.1:10913", "audit", cluster="Other")

    route = TopicRouteData.from_json(
        (await ask(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders"})).body
    )
    assert [(b.broker_name, b.broker_addrs) for b in route.broker_datas] == [("broker-a", {0: "127.0.0.1:10911"})]
    info = ClusterInfo.from_json((await ask(client, namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a",), "Other": ("broker-c",)}
    all_topics = await ask(client, namesrv, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert topic_list_from_json(all_topics.body) == ["audit", "orders"]
    by_cluster = await ask(client, namesrv, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "Other"})
    assert topic_list_from_json(by_cluster.body) == ["audit"]


async def test_slave_registration_answers_its_master(namesrv, client):
    await register(client, namesrv, "broker-a", "127.0.0.1:10911", "orders")
    reply = await register(client, namesrv, "broker-a", "127.0.0.1:10921", broker_id=1)
    assert reply.ext_fields["masterAddr"] == "127.0.0.1:10911"


async def test_bad_registrations_are_refused_with_their_codes(namesrv, client):
    missing = await ask(
        client, namesrv, RequestCode.REGISTER_BROKER, {"brokerName": "b", "clusterName": "c", "brokerId": 0}
    )
    assert missing.code == ResponseCode.INVALID_PARAMETER and "brokerAddr" in missing.remark
    bad_addr = await ask(
        client,
        namesrv,
        RequestCode.REGISTER_BROKER,
        {"brokerName": "b", "clusterName": "c", "brokerId": 0, "brokerAddr": "nowhere"},
    )
    assert bad_addr.code == ResponseCode.INVALID_PARAMETER
    fields = BrokerIdentity("c", "b", 0, "127.0.0.1:1").register_fields(12345)
    bad_crc = await ask(client, namesrv, RequestCode.REGISTER_BROKER, fields, b"{}")
    assert bad_crc.code == ResponseCode.SYSTEM_ERROR and bad_crc.remark == "crc32 not match"
    not_json = await ask(
        client,
        namesrv,
        RequestCode.REGISTER_BROKER,
        BrokerIdentity("c", "b", 0, "127.0.0.1:1").register_fields(0),
        b"{nope",
    )
    assert not_json.code == ResponseCode.INVALID_PARAMETER
    assert namesrv.routes.cluster_info().broker_addr_table == {}


def test_a_brokers_registration_header_goes_out_in_rocketmqs_field_order():
    identity = BrokerIdentity("c", "b", 1, "127.0.0.1:1", "127.0.0.1:2", heartbeat_timeout_ms=30_000)
    assert list(identity.register_fields(4_294_967_295).items()) == [
        ("clusterName", "c"),
        ("brokerName", "b"),
        ("brokerAddr", "127.0.0.1:1"),
        ("brokerId", "1"),
        ("haServerAddr", "127.0.0.1:2"),
        ("compressed", "false"),
        ("bodyCrc32", "4294967295"),
        ("heartbeatTimeoutMillis", "30000"),
    ]
    assert list(BrokerIdentity("c", "b", 0, "127.0.0.1:1").register_fields(0))[-1] == "bodyCrc32"
    assert list(identity.unregister_fields().items()) == [
        ("clusterName", "c"),
        ("brokerName", "b"),
        ("brokerAddr", "127.0.0.1:1"),
        ("brokerId", "1"),
    ]


async def test_a_negative_broker_id_is_refused(namesrv, client):
    fields = BrokerIdentity("c", "b", 0, "127.0.0.1:1").register_fields(0)
    negative = await ask(client, namesrv, RequestCode.REGISTER_BROKER, {**fields, "brokerId": "-1"})
    assert negative.code == ResponseCode.INVALID_PARAMETER and "brokerId" in negative.remark
    assert namesrv.routes.cluster_info().broker_addr_table == {}


async def test_unknown_code_is_not_supported(namesrv, client):
    reply = await ask(client, namesrv, RequestCode.SEND_MESSAGE)
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_closing_the_registration_connection_drops_the_broker(namesrv, client):
    broker_conn = RemotingClient()
    await register(broker_conn, namesrv, "broker-a", "127.0.0.1:10911", "orders")
    await register(client, namesrv, "broker-b", "127.0.0.1:10912", "orders")

    await broker_conn.close()

    await eventually(lambda: len(namesrv.routes.route("orders").broker_datas) == 1)
    assert namesrv.routes.route("orders").broker_datas[0].broker_name == "broker-b"


async def test_silent_broker_expires_heartbeating_one_stays(namesrv, client, clock):
    await register(client, namesrv, "broker-a", "127.0.0.1:10911", "orders")
    await register(client, namesrv, "broker-b", "127.0.0.1:10912", "orders")
    clock.advance(6_000)
    beat = await ask(
        client,
        namesrv,
        RequestCode.BROKER_HEARTBEAT,
        {"clusterName": "DefaultCluster", "brokerAddr": "127.0.0.1:10912", "brokerName": "broker-b"},
    )
    assert beat.code == ResponseCode.SUCCESS
    clock.advance(4_001)

    namesrv.expire_inactive_brokers()

    assert [b.broker_name for b in namesrv.routes.route("orders").broker_datas] == ["broker-b"]


async def test_unregister_and_delete_topic(namesrv, client):
    await register(client, namesrv, "broker-a", "127.0.0.1:10911", "orders", "payments")
    deleted = await ask(client, namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "payments"})
    assert deleted.code == ResponseCode.SUCCESS
    assert namesrv.routes.topics() == ["orders"]
    gone = await ask(
        client,
        namesrv,
        RequestCode.UNREGISTER_BROKER,
        BrokerIdentity("DefaultCluster", "broker-a", 0, "127.0.0.1:10911").unregister_fields(),
    )
    assert gone.code == ResponseCode.SUCCESS
    reply = await ask(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders"})
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST


async def test_route_lookup_auto_creates_on_the_masters_that_allow_it(namesrv, client, peers):
    allowing, refusing_by_flag = await fake_broker(peers), await fake_broker(peers)
    await register(
        client,
        namesrv,
        "broker-a",
        allowing.addr,
        "orders",
        flags=BrokerFlags(auto_create_topic_enable=True, default_topic_queue_nums=3),
    )
    await register(
        client, namesrv, "broker-b", refusing_by_flag.addr, "orders", flags=BrokerFlags(auto_create_topic_enable=False)
    )

    reply = await ask(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "fresh"})

    assert reply.code == ResponseCode.SUCCESS
    route = TopicRouteData.from_json(reply.body)
    assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("broker-a", 3)]
    assert refusing_by_flag.requests == []
    assert [r.ext_fields for r in allowing.requests] == [
        {
            "topic": "fresh",
            "defaultTopic": "TBW102",
            "readQueueNums": "3",
            "writeQueueNums": "3",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
            "attributes": "+message.type=MIXED",
            "messageType": "MIXED",
            "autoCreate": "true",
        }
    ]
    assert json.loads(reply.body)["brokerDatas"][0]["brokerAddrs"] == {"0": allowing.addr}


async def test_concurrent_lookups_share_one_creation(namesrv, client, peers):
    broker = await fake_broker(peers)
    broker.hold()
    await register(client, namesrv, "broker-a", broker.addr, flags=BrokerFlags(auto_create_topic_enable=True))

    lookups = [
        asyncio.create_task(ask(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "fresh"}))
        for _ in range(5)
    ]
    await eventually(lambda: broker.requests)
    broker.release()
    replies = await asyncio.gather(*lookups)

    assert [r.code for r in replies] == [ResponseCode.SUCCESS] * 5
    assert len(broker.requests) == 1


async def test_no_route_when_no_master_creates(namesrv, client, peers):
    refusing = await fake_broker(peers, ResponseCode.TOPIC_NOT_EXIST)
    await register(client, namesrv, "broker-a", refusing.addr, flags=BrokerFlags(auto_create_topic_enable=True))
    await register(client, namesrv, "broker-b", "127.0.0.1:10912", flags=BrokerFlags(auto_create_topic_enable=False))

    refused = await ask(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "fresh"})
    illegal = await ask(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "no spaces allowed"})

    assert refused.code == ResponseCode.TOPIC_NOT_EXIST and "fresh" in refused.remark
    assert len(refusing.requests) == 1
    assert illegal.code == ResponseCode.TOPIC_NOT_EXIST
    assert namesrv.routes.topics() == []


async def test_unreachable_master_is_skipped(namesrv, client, peers):
    alive = await fake_broker(peers)
    dead = await fake_broker(peers)
    dead_addr = dead.addr
    await dead.stop()
    await register(client, namesrv, "broker-a", alive.addr, flags=BrokerFlags(auto_create_topic_enable=True))
    await register(client, namesrv, "broker-b", dead_addr, flags=BrokerFlags(auto_create_topic_enable=True))

    reply = await ask(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "fresh"})

    assert reply.code == ResponseCode.SUCCESS
    assert [q.broker_name for q in TopicRouteData.from_json(reply.body).queue_datas] == ["broker-a"]


async def test_repr_shows_address_and_table(namesrv):
    assert repr(namesrv).startswith(f"<NameServer {namesrv.address} <RouteTable")


async def test_the_scan_task_expires_silent_brokers_and_outlives_a_scan_that_failed(
    namesrv, client, clock, monkeypatch
):
    await register(client, namesrv, "broker-a", "127.0.0.1:10911", "orders")
    expire, scans = namesrv.routes.expire, []

    def failing_once(now_ms):
        scans.append(now_ms)
        if len(scans) == 1:
            raise RuntimeError("bug")
        return expire(now_ms)

    monkeypatch.setattr(namesrv.routes, "expire", failing_once)
    # virtual time, 500 ms a poll: a scan every 5 s (the failed one does not end the task); expiry after 10 s
    await advance_until(clock, lambda: namesrv.routes.route("orders") is None, step_ms=500)
    assert len(scans) >= 2 and namesrv._scan.failures.total == 1
