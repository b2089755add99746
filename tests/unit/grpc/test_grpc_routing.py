"""QueryRoute's queue list from a name server route (pocketmq.server.grpc_routing): pure."""

from __future__ import annotations

from pocketmq.common.topic import PERM_READ, PERM_READ_WRITE, MessageType, TopicConfig
from pocketmq.protocol.route import BrokerData, QueueData, TopicRouteData
from pocketmq.server.grpc_routing import local_route, parse_address, route_queues

ROUTE = TopicRouteData(
    queue_datas=(QueueData("broker-b", 2, 2, PERM_READ_WRITE), QueueData("broker-a", 3, 2, PERM_READ_WRITE)),
    broker_datas=(
        BrokerData("c", "broker-a", {0: "10.0.0.1:10911"}),
        BrokerData("c", "broker-b", {0: "10.0.0.2:10911"}),
    ),
    grpc_addrs={"10.0.0.1:10911": "10.0.0.1:8081", "10.0.0.2:10911": "10.0.0.2:8081"},
)


def _route(**kw):
    args = dict(
        own_broker_addr="10.0.0.1:10911",
        own_grpc_addr="10.0.0.1:8081",
        dialled=[("mq.example", 8081)],
        dialled_domain=True,
        message_type=MessageType.MIXED,
    )
    args.update(kw)
    return route_queues(ROUTE, "t", **args)


def test_every_broker_gets_its_own_endpoint_and_this_one_echoes_the_access_point():
    queues = _route()
    assert [(q.broker_name, q.queue_id) for q in queues] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-a", 2),
        ("broker-b", 0),
        ("broker-b", 1),
    ]
    a, b = queues[0], queues[3]
    assert a.endpoints == (("mq.example", 8081),) and a.domain_name
    assert b.endpoints == (("10.0.0.2", 8081),) and not b.domain_name


def test_queue_permissions_follow_read_and_write_queue_nums():
    queues = _route()
    # broker-a: 3 read queues, 2 write queues: queue 2 is read-only
    assert [(q.readable, q.writable) for q in queues[:3]] == [(True, True), (True, True), (True, False)]


def test_a_read_only_broker_offers_no_writable_queue():
    route = TopicRouteData((QueueData("broker-a", 1, 1, PERM_READ),), ROUTE.broker_datas, ROUTE.grpc_addrs)
    [q] = route_queues(
        route,
        "t",
        own_broker_addr="x:1",
        own_grpc_addr=None,
        dialled=[],
        dialled_domain=False,
        message_type=MessageType.FIFO,
    )
    assert q.readable and not q.writable and q.message_type is MessageType.FIFO


def test_a_broker_without_grpc_is_left_out():
    route = TopicRouteData(ROUTE.queue_datas, ROUTE.broker_datas, {"10.0.0.1:10911": "10.0.0.1:8081"})
    queues = route_queues(
        route,
        "t",
        own_broker_addr="x:1",
        own_grpc_addr=None,
        dialled=[],
        dialled_domain=False,
        message_type=MessageType.MIXED,
    )
    assert {q.broker_name for q in queues} == {"broker-a"}


def test_without_dialled_endpoints_this_broker_uses_its_advertised_address():
    queues = _route(dialled=[], dialled_domain=False, own_grpc_addr="192.168.1.9:9000")
    assert queues[0].endpoints == (("192.168.1.9", 9000),)


def test_local_route_has_this_broker_only():
    route = local_route(
        TopicConfig("t", 4, 4), cluster="c", broker_name="b", broker_addr="1.2.3.4:10911", grpc_addr="1.2.3.4:8081"
    )
    queues = route_queues(
        route,
        "t",
        own_broker_addr="1.2.3.4:10911",
        own_grpc_addr="1.2.3.4:8081",
        dialled=[],
        dialled_domain=False,
        message_type=MessageType.NORMAL,
    )
    assert len(queues) == 4 and queues[0].endpoints == (("1.2.3.4", 8081),)


SLAVES = {"10.0.0.3:10911": "10.0.0.3:8081", "10.0.0.4:10911": "10.0.0.4:8081"}


def test_a_group_without_master_is_read_through_its_lowest_id_slave_read_only():
    """After kill -9 of broker-a's master the name server lists its slaves only; a client that dialled
    broker-b still reads broker-a's queues (issue 7: any broker answers for the whole cluster)."""
    route = TopicRouteData(
        ROUTE.queue_datas,
        (BrokerData("c", "broker-a", {2: "10.0.0.4:10911", 1: "10.0.0.3:10911"}), ROUTE.broker_datas[1]),
        {**ROUTE.grpc_addrs, **SLAVES},
    )
    queues = route_queues(
        route,
        "t",
        own_broker_addr="10.0.0.2:10911",
        own_grpc_addr="10.0.0.2:8081",
        dialled=[("10.0.0.2", 8081)],
        dialled_domain=False,
        message_type=MessageType.NORMAL,
    )
    a = [q for q in queues if q.broker_name == "broker-a"]
    assert len(a) == 3 and {q.endpoints for q in a} == {(("10.0.0.3", 8081),)}
    assert all(q.readable and not q.writable for q in a)
    assert all(q.writable for q in queues if q.broker_name == "broker-b")


def test_a_slave_answering_sends_clients_to_its_live_master_and_serves_its_group_once_the_master_is_gone():
    with_master = TopicRouteData(
        ROUTE.queue_datas,
        (BrokerData("c", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.3:10911"}), ROUTE.broker_datas[1]),
        {**ROUTE.grpc_addrs, **SLAVES},
    )
    args = dict(
        own_broker_addr="10.0.0.3:10911",
        own_grpc_addr="10.0.0.3:8081",
        dialled=[("10.0.0.3", 8081)],
        dialled_domain=False,
        message_type=MessageType.NORMAL,
    )
    a = [q for q in route_queues(with_master, "t", **args) if q.broker_name == "broker-a"]
    assert {q.endpoints for q in a} == {(("10.0.0.1", 8081),)} and a[0].writable
    without = TopicRouteData(
        ROUTE.queue_datas,
        (BrokerData("c", "broker-a", {1: "10.0.0.3:10911"}), ROUTE.broker_datas[1]),
        with_master.grpc_addrs,
    )
    a = [q for q in route_queues(without, "t", **args) if q.broker_name == "broker-a"]
    assert {q.endpoints for q in a} == {(("10.0.0.3", 8081),)} and not a[0].writable


def test_without_a_grpc_table_this_broker_still_serves_its_own_queues():
    """A RocketMQ name server keeps no grpcAddrTable: the answering broker knows its own gRPC address."""
    route = TopicRouteData(ROUTE.queue_datas, ROUTE.broker_datas, {})
    queues = route_queues(
        route,
        "t",
        own_broker_addr="10.0.0.1:10911",
        own_grpc_addr="10.0.0.1:8081",
        dialled=[],
        dialled_domain=False,
        message_type=MessageType.NORMAL,
    )
    assert {q.broker_name for q in queues} == {"broker-a"} and queues[0].endpoints == (("10.0.0.1", 8081),)


def test_parse_address():
    assert parse_address("1.2.3.4:80") == ("1.2.3.4", 80)
    assert parse_address("[::1]:8081") == ("::1", 8081)
    assert parse_address("nohost") is None and parse_address("h:0") is None and parse_address("h:x") is None


def test_a_proxy_serves_every_broker_on_its_own_endpoint_even_without_a_grpc_table():
    route = TopicRouteData(ROUTE.queue_datas, ROUTE.broker_datas, grpc_addrs={})
    queues = route_queues(
        route,
        "t",
        own_broker_addr=None,
        own_grpc_addr="10.0.0.9:8081",
        dialled=[("proxy.example", 8081)],
        dialled_domain=True,
        message_type=MessageType.MIXED,
    )
    assert len(queues) == 5
    assert {(q.endpoints, q.domain_name) for q in queues} == {((("proxy.example", 8081),), True)}


def test_a_proxy_serves_a_group_without_master_through_its_slave_read_only():
    route = TopicRouteData(
        ROUTE.queue_datas,
        (BrokerData("c", "broker-a", {0: "10.0.0.1:10911"}), BrokerData("c", "broker-b", {1: "10.0.0.3:10911"})),
    )
    queues = route_queues(
        route,
        "t",
        own_broker_addr=None,
        own_grpc_addr="10.0.0.9:8081",
        dialled=[],
        dialled_domain=False,
        message_type=MessageType.MIXED,
    )
    of_b = [q for q in queues if q.broker_name == "broker-b"]
    assert of_b and all(q.readable and not q.writable for q in of_b)
    assert {q.endpoints for q in queues} == {(("10.0.0.9", 8081),)}
