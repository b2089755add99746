"""The name server's pure route table: registration, route JSON as 4.x clients need it, expiry, deletion."""

from __future__ import annotations

import dataclasses
import json

from pocketmq.common.topic import DEFAULT_TOPIC, PERM_INHERIT, PERM_READ_WRITE, TopicConfig
from pocketmq.namesrv.route_table import RouteTable
from pocketmq.protocol.route import BrokerFlags, BrokerIdentity, RegisterBrokerBody, TopicRouteData
from pocketmq.runtime.clock import ManualClock

A = BrokerIdentity("DefaultCluster", "broker-a", 0, "127.0.0.1:10911")
A_SLAVE = BrokerIdentity("DefaultCluster", "broker-a", 1, "127.0.0.1:10921", ha_server_addr="127.0.0.1:10922")
B = BrokerIdentity("DefaultCluster", "broker-b", 0, "127.0.0.1:10912")
C = BrokerIdentity("OtherCluster", "broker-c", 0, "127.0.0.1:10913")


def body(*topics: str, version: int = 1, queues: int = 4, flags: BrokerFlags = BrokerFlags()) -> RegisterBrokerBody:
    return RegisterBrokerBody(
        tuple(TopicConfig(t, queues, queues) for t in topics), {"timestamp": 1, "counter": version}, flags
    )


def table(expire_ms: int = 120_000, **kwargs) -> RouteTable:
    return RouteTable(broker_expire_ms=expire_ms, **kwargs)


def test_route_lists_queues_and_brokers_of_both_masters_in_4x_json_shape():
    routes = table()
    routes.register(A, body("orders"), now_ms=0)
    routes.register(B, body("orders", queues=2, flags=BrokerFlags(grpc_addr="127.0.0.1:8082")), now_ms=0)

    route = routes.route("orders")
    obj = json.loads(route.to_json())

    assert set(obj) >= {"queueDatas", "brokerDatas"}
    assert "orderTopicConf" not in obj
    assert obj["queueDatas"] == [
        {"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": PERM_READ_WRITE, "topicSysFlag": 0},
        {"brokerName": "broker-b", "readQueueNums": 2, "writeQueueNums": 2, "perm": PERM_READ_WRITE, "topicSysFlag": 0},
    ]
    assert obj["brokerDatas"] == [
        {"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": "127.0.0.1:10911"}},
        {"cluster": "DefaultCluster", "brokerName": "broker-b", "brokerAddrs": {"0": "127.0.0.1:10912"}},
    ]
    assert obj["grpcAddrTable"] == {"127.0.0.1:10912": "127.0.0.1:8082"}
    assert TopicRouteData.from_json(route.to_json()) == route
    assert routes.route("unknown") is None


def test_slave_joins_its_group_and_is_told_its_master():
    routes = table()
    routes.register(dataclasses.replace(A, ha_server_addr="10.0.0.1:10912"), body("orders"), now_ms=0)
    result = routes.register(A_SLAVE, body("orders", queues=99), now_ms=0)

    assert result.master_addr == A.broker_addr
    assert result.ha_server_addr == "10.0.0.1:10912"
    route = routes.route("orders")
    assert route.broker("broker-a").broker_addrs == {0: A.broker_addr, 1: A_SLAVE.broker_addr}
    assert route.queue_datas[0].write_queue_nums == 4  # a slave's topic table does not change the queues


def test_a_slave_whose_master_is_gone_makes_its_group_s_queues():
    routes = table()
    routes.register(A, body("orders"), now_ms=0)
    routes.register(A_SLAVE, body("orders", "fresh", version=7), now_ms=0)
    assert routes.route("fresh") is None  # the master speaks for its group while it is there
    routes.unregister(A.cluster, A.broker_addr)  # it died before registering "fresh"
    routes.register(A_SLAVE, body("orders", "fresh", version=7), now_ms=1)  # the same table as before
    route = routes.route("fresh")
    assert route is not None and route.broker("broker-a").broker_addrs == {1: A_SLAVE.broker_addr}
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    second = dataclasses.replace(A_SLAVE, broker_id=2, broker_addr="127.0.0.1:10931")
    routes.register(second, body("other"), now_ms=1)
    assert routes.route("other") is None  # not the lowest id left


def test_registration_is_new_once_and_updates_topics_when_the_data_version_changes():
    routes = table()
    assert routes.register(A, body("orders", version=1), now_ms=0).is_new
    assert not routes.register(A, body("orders", "payments", version=1), now_ms=1).is_new
    assert routes.route("payments") is None  # same data version: topic table unchanged, as RocketMQ
    routes.register(A, body("orders", "payments", version=2), now_ms=2)
    assert routes.route("payments") is not None


def test_registration_is_additive_unless_configured_to_delete():
    additive = table()
    additive.register(A, body("orders", "payments", version=1), now_ms=0)
    additive.register(A, body("orders", version=2), now_ms=0)
    assert additive.topics() == ["orders", "payments"]

    deleting = table(delete_topic_with_broker_registration=True)
    deleting.register(A, body("orders", "payments", version=1), now_ms=0)
    deleting.register(B, body("payments", version=1), now_ms=0)
    deleting.register(A, body("orders", version=2), now_ms=0)
    assert deleting.topics() == ["orders", "payments"]
    assert [q.broker_name for q in deleting.route("payments").queue_datas] == ["broker-b"]


def test_an_incremental_registration_adds_its_topics_and_leaves_the_full_table_s_version():
    routes = table(delete_topic_with_broker_registration=True)
    routes.register(A, body("orders", "payments", version=1), now_ms=0)
    incremental = body("fresh", version=2).as_incremental()
    routes.register(A, incremental, now_ms=1)
    assert routes.topics() == ["fresh", "orders", "payments"]  # nothing taken away although only one is listed
    # the next full table at the same version is applied: the kept version is the last full table's (1)
    routes.register(A, body("orders", "fresh", version=2), now_ms=2)
    assert routes.topics() == ["fresh", "orders"]


def test_an_incremental_registration_first_after_a_name_server_restart_leaves_the_next_full_one_applied():
    routes = table()
    routes.register(A, body("fresh", version=5).as_incremental(), now_ms=0)  # the name server knew nothing
    assert routes.topics() == ["fresh"]
    routes.register(A, body("fresh", "orders", version=5), now_ms=1)  # the broker's heartbeat, same version
    assert routes.topics() == ["fresh", "orders"]


def test_the_incremental_flag_travels_in_the_registration_body():
    sent = body("fresh").as_incremental()
    assert sent.flags.incremental and not body("fresh").flags.incremental
    assert RegisterBrokerBody.from_json(sent.to_json()) == sent
    assert "incremental" not in json.loads(body("fresh").to_json())["pocketmq"]  # full bodies as before


def test_broker_not_heard_from_expires_and_takes_its_queues_along():
    clock = ManualClock()
    routes = table(expire_ms=10_000)
    routes.register(A, body("orders", "only-a"), now_ms=clock.now_ms())
    routes.register(B, body("orders"), now_ms=clock.now_ms())
    clock.advance(6_000)
    assert routes.heartbeat(B.cluster, B.broker_addr, now_ms=clock.now_ms())
    clock.advance(4_001)

    assert routes.expire(clock.now_ms()) == [A]

    assert [b.broker_name for b in routes.route("orders").broker_datas] == ["broker-b"]
    assert routes.route("only-a") is None
    assert "broker-a" not in routes.cluster_info().broker_addr_table
    clock.advance(6_000)
    assert routes.expire(clock.now_ms()) == [B]
    assert routes.topics() == []
    assert routes.cluster_info().cluster_addr_table == {}


def test_registration_timeout_of_the_broker_overrides_the_default():
    routes = table(expire_ms=120_000)
    quick = BrokerIdentity(A.cluster, A.broker_name, 0, A.broker_addr, heartbeat_timeout_ms=1_000)
    routes.register(quick, body("orders"), now_ms=0)
    assert routes.expire(1_000) == []
    assert routes.expire(1_001) == [quick]


def test_heartbeat_of_an_unknown_broker_is_refused():
    assert not table().heartbeat("DefaultCluster", "127.0.0.1:1", now_ms=0)


def test_closed_channel_removes_only_the_brokers_whose_latest_registration_used_it():
    routes = table()
    old_conn, new_conn = object(), object()
    routes.register(A, body("orders"), now_ms=0, channel=old_conn)
    routes.register(B, body("orders"), now_ms=0, channel=old_conn)
    routes.register(B, body("orders"), now_ms=1, channel=new_conn)  # B reconnected

    assert routes.remove_channel(old_conn) == [A]
    assert [b.broker_name for b in routes.route("orders").broker_datas] == ["broker-b"]


def test_unregister_removes_the_address():
    routes = table()
    routes.register(A, body("orders"), now_ms=0)
    routes.register(A_SLAVE, body("orders"), now_ms=0)
    assert routes.unregister(A.cluster, A.broker_addr) == A
    assert routes.route("orders").broker("broker-a").broker_addrs == {1: A_SLAVE.broker_addr}
    assert routes.unregister(A.cluster, A.broker_addr) is None


def test_cluster_info_and_topics_by_cluster():
    routes = table()
    routes.register(A, body("orders"), now_ms=0)
    routes.register(B, body("payments", flags=BrokerFlags(grpc_addr="127.0.0.1:8082")), now_ms=0)
    routes.register(C, body("audit"), now_ms=0)

    info = routes.cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a", "broker-b"), "OtherCluster": ("broker-c",)}
    assert info.broker_addr_table["broker-c"].broker_addrs == {0: C.broker_addr}
    assert info.grpc_addrs == {B.broker_addr: "127.0.0.1:8082"}
    assert routes.topics() == ["audit", "orders", "payments"]
    assert routes.topics_of_cluster("DefaultCluster") == ["orders", "payments"]
    assert routes.topics_of_cluster("nope") == []


def test_delete_topic_everywhere_or_on_one_cluster():
    routes = table()
    routes.register(A, body("orders"), now_ms=0)
    routes.register(C, body("orders"), now_ms=0)

    assert routes.delete_topic("orders", "OtherCluster")
    assert [q.broker_name for q in routes.route("orders").queue_datas] == ["broker-a"]
    assert routes.delete_topic("orders")
    assert routes.route("orders") is None
    assert not routes.delete_topic("orders")


def test_auto_create_plan_follows_each_masters_rule():
    routes = table()
    routes.register(
        A, body("orders", flags=BrokerFlags(auto_create_topic_enable=True, default_topic_queue_nums=3)), now_ms=0
    )
    routes.register(B, body("orders", flags=BrokerFlags(auto_create_topic_enable=False)), now_ms=0)
    routes.register(A_SLAVE, body(), now_ms=0)

    plan = routes.auto_create_plan("new-topic")
    assert [(p.broker_name, p.master_addr, p.config.write_queue_nums) for p in plan] == [("broker-a", A.broker_addr, 3)]
    assert routes.auto_create_plan("orders") == []  # exists
    assert routes.auto_create_plan("bad topic!") == []
    assert routes.auto_create_plan("rmq_sys_wheel_timer") == []
    # A group's retry topic is created whatever the setting, with one queue.
    assert [(p.broker_name, p.config.write_queue_nums) for p in routes.auto_create_plan("%RETRY%g1")] == [
        ("broker-a", 1),
        ("broker-b", 1),
    ]


def test_rocketmq_broker_without_flags_auto_creates_when_it_has_tbw102():
    routes = table()
    with_default = RegisterBrokerBody((TopicConfig(DEFAULT_TOPIC, 6, 6, PERM_READ_WRITE | PERM_INHERIT),), {})
    routes.register(A, with_default, now_ms=0)
    routes.register(B, body("orders"), now_ms=0)

    plan = routes.auto_create_plan("fresh")
    assert [(p.broker_name, p.config.write_queue_nums) for p in plan] == [("broker-a", 6)]


def test_record_created_makes_the_route_at_once_and_ignores_gone_groups():
    routes = table()
    routes.register(A, body(), now_ms=0)
    routes.record_created("fresh", "broker-a", TopicConfig("fresh", 8, 8))
    routes.record_created("fresh", "broker-gone", TopicConfig("fresh", 8, 8))
    assert [(q.broker_name, q.write_queue_nums) for q in routes.route("fresh").queue_datas] == [("broker-a", 8)]


def test_repr_shows_state():
    routes = table()
    routes.register(A, body("orders"), now_ms=0)
    assert repr(routes) == "<RouteTable clusters=['DefaultCluster'] groups=['broker-a'] brokers=1 topics=1>"


def test_a_topic_s_gray_ratio_travels_with_its_route_per_broker():
    """Clients split by the topic's own gray ratio (docs/gray.md): the route carries it as a queue data's
    attributes, only for brokers where the topic has one; a registration that changes it changes the route."""
    routes = table()
    routes.register(
        A, RegisterBrokerBody((TopicConfig("orders", 8, 8, gray_queue_ratio=0.25),), {"counter": 1}), now_ms=0
    )
    routes.register(B, body("orders"), now_ms=0)
    obj = json.loads(routes.route("orders").to_json())
    assert [q.get("attributes") for q in obj["queueDatas"]] == [{"gray.queue.ratio": "0.25"}, None]
    parsed = TopicRouteData.from_json(routes.route("orders").to_json())
    assert [q.gray_queue_ratio for q in parsed.queue_datas] == [0.25, None]
    routes.register(
        A, RegisterBrokerBody((TopicConfig("orders", 8, 8, gray_queue_ratio=0.0),), {"counter": 2}), now_ms=1
    )
    assert routes.route("orders").queue_datas[0].gray_queue_ratio == 0.0
    bad = dict(obj["queueDatas"][0], attributes={"gray.queue.ratio": "2"})  # not a ratio: clients do not split by it
    assert TopicRouteData.from_json({"queueDatas": [bad], "brokerDatas": []}).queue_datas[0].gray_queue_ratio is None


def test_a_name_server_that_does_not_read_the_incremental_flag_applies_the_next_full_table_whole():
    older = table(delete_topic_with_broker_registration=True)
    older.register(A, body("orders", "payments", version=1), now_ms=0)
    incremental = body("orders", "payments", "fresh", version=2).as_incremental()
    unflagged = dataclasses.replace(incremental, topics=incremental.topics[2:], flags=BrokerFlags())
    older.register(A, unflagged, now_ms=1)  # taken for the whole table: the others dropped
    assert older.topics() == ["fresh"]
    older.register(A, body("orders", "payments", "fresh", version=2), now_ms=2)  # same counter, full
    assert older.topics() == ["fresh", "orders", "payments"]
