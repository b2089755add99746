"""QueryRoute's queue list from a name server route (pocketmq.server.grpc_routing): pure."""

from __future__ import annotations

from pocketmq.cluster.route import BrokerData, QueueData, TopicRouteData
from pocketmq.common.topic import PERM_READ, PERM_READ_WRITE, MessageType, TopicConfig
from pocketmq.server.grpc_routing import local_route, parse_address, route_queues

ROUTE = TopicRouteData(
    queue_datas=(QueueData("broker-b", 2, 2, PERM_READ_WRITE), QueueData("broker-a", 3, 2, PERM_READ_WRITE)),
    broker_datas=(BrokerData("c", "broker-a", {0: "10.0.0.1:10911"}), BrokerData("c", "broker-b", {0: "10.0.0.2:10911"})),
    grpc_addrs={"10.0.0.1:10911": "10.0.0.1:8081", "10.0.0.2:10911": "10.0.0.2:8081"},
)


def _route(**kw):
    args = dict(own_broker_name="broker-a", own_grpc_addr="10.0.0.1:8081", dialled=[("mq.example", 8081)],
                dialled_domain=True, message_type=MessageType.MIXED)
    args.update(kw)
    return route_queues(ROUTE, "t", **args)


def test_every_broker_gets_its_own_endpoint_and_this_one_echoes_the_access_point():
    queues = _route()
    assert [(q.broker_name, q.queue_id) for q in queues] == [("broker-a", 0), ("broker-a", 1), ("broker-a", 2),
                                                             ("broker-b", 0), ("broker-b", 1)]
    a, b = queues[0], queues[3]
    assert a.endpoints == (("mq.example", 8081),) and a.domain_name
    assert b.endpoints == (("10.0.0.2", 8081),) and not b.domain_name


def test_queue_permissions_follow_read_and_write_queue_nums():
    queues = _route()
    # broker-a: 3 read queues, 2 write queues: queue 2 is read-only
    assert [(q.readable, q.writable) for q in queues[:3]] == [(True, True), (True, True), (True, False)]


def test_a_read_only_broker_offers_no_writable_queue():
    route = TopicRouteData((QueueData("broker-a", 1, 1, PERM_READ),), ROUTE.broker_datas, ROUTE.grpc_addrs)
    [q] = route_queues(route, "t", own_broker_name="x", own_grpc_addr=None, dialled=[], dialled_domain=False,
                       message_type=MessageType.FIFO)
    assert q.readable and not q.writable and q.message_type is MessageType.FIFO


def test_a_broker_without_grpc_is_left_out():
    route = TopicRouteData(ROUTE.queue_datas, ROUTE.broker_datas, {"10.0.0.1:10911": "10.0.0.1:8081"})
    queues = route_queues(route, "t", own_broker_name="x", own_grpc_addr=None, dialled=[], dialled_domain=False,
                          message_type=MessageType.MIXED)
    assert {q.broker_name for q in queues} == {"broker-a"}


def test_without_dialled_endpoints_this_broker_uses_its_advertised_address():
    queues = _route(dialled=[], dialled_domain=False, own_grpc_addr="192.168.1.9:9000")
    assert queues[0].endpoints == (("192.168.1.9", 9000),)


def test_local_route_has_this_broker_only():
    route = local_route(TopicConfig("t", 4, 4), cluster="c", broker_name="b", broker_addr="1.2.3.4:10911",
                        grpc_addr="1.2.3.4:8081")
    queues = route_queues(route, "t", own_broker_name="b", own_grpc_addr="1.2.3.4:8081", dialled=[],
                          dialled_domain=False, message_type=MessageType.NORMAL)
    assert len(queues) == 4 and queues[0].endpoints == (("1.2.3.4", 8081),)


def test_parse_address():
    assert parse_address("1.2.3.4:80") == ("1.2.3.4", 80)
    assert parse_address("[::1]:8081") == ("::1", 8081)
    assert parse_address("nohost") is None and parse_address("h:0") is None and parse_address("h:x") is None
