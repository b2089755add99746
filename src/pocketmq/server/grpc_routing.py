"""QueryRoute's answer as a pure function of a name server route: which queues, on which gRPC endpoint.

A v2 client sends every request of a queue to that queue's broker endpoints, so each broker's queues must
carry that broker's own gRPC address: the route's ``grpcAddrTable`` (remoting address -> gRPC address,
filled by the brokers' registrations) gives it. A broker without a gRPC front end is left out: a v2 client
could not reach it.

The broker that answers the query puts the request's own endpoints on its queues (the access point the
client dialled, scheme included): the client then reuses the channel it already has, and a DOMAIN_NAME
endpoint stays one address (the Python client raises on a DOMAIN_NAME with several, reference §8.5).
"""

from __future__ import annotations

from pocketmq.cluster.route import BrokerData, QueueData, TopicRouteData
from pocketmq.common.topic import PERM_READ, PERM_WRITE, MessageType, TopicConfig
from pocketmq.protocol.grpc_codec import RouteQueue

Address = tuple[str, int]


def parse_address(text: str) -> Address | None:
    """``host:port`` (``[v6]:port`` too) as (host, port); None when it is not one."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        return None
    return host.strip("[]"), int(port)


def local_route(config: TopicConfig, *, cluster: str, broker_name: str, broker_addr: str,
                grpc_addr: str | None) -> TopicRouteData:
    """The route of a topic as only this broker knows it (no name server, or it has not heard of it yet)."""
    return TopicRouteData(
        queue_datas=(QueueData(broker_name, config.read_queue_nums, config.write_queue_nums, config.perm),),
        broker_datas=(BrokerData(cluster, broker_name, {0: broker_addr}),),
        grpc_addrs={broker_addr: grpc_addr} if grpc_addr else {},
    )


def route_queues(route: TopicRouteData, topic: str, *, own_broker_name: str, own_grpc_addr: str | None,
                 dialled: list[Address], dialled_domain: bool, message_type: MessageType) -> list[RouteQueue]:
    """Every queue of ``route`` that a v2 client can reach, ordered by broker name then queue id.

    ``dialled`` / ``dialled_domain``: the request's endpoints (empty from a client that sent none: then this
    broker's advertised gRPC address is used). ``message_type``: the topic's type, as this broker knows it.
    """
    brokers = {b.broker_name: b for b in route.broker_datas}
    queues: list[RouteQueue] = []
    for queue_data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        endpoints, domain = _broker_endpoints(brokers.get(queue_data.broker_name), route.grpc_addrs,
                                              own=queue_data.broker_name == own_broker_name,
                                              own_grpc_addr=own_grpc_addr, dialled=dialled,
                                              dialled_domain=dialled_domain)
        if endpoints:
            queues.extend(_queues_of(queue_data, topic, endpoints, domain, message_type))
    return queues


def _broker_endpoints(broker: BrokerData | None, grpc_addrs: dict[str, str], *, own: bool,
                      own_grpc_addr: str | None, dialled: list[Address],
                      dialled_domain: bool) -> tuple[tuple[Address, ...], bool]:
    if own and dialled:
        return tuple(dialled), dialled_domain
    if own and own_grpc_addr:
        address = parse_address(own_grpc_addr)
        return ((address,) if address else ()), False
    master = broker.master_addr if broker is not None else None
    address = parse_address(grpc_addrs.get(master, "")) if master else None
    return ((address,) if address else ()), False


def _queues_of(queue_data: QueueData, topic: str, endpoints: tuple[Address, ...], domain: bool,
               message_type: MessageType) -> list[RouteQueue]:
    """Queue ids 0..max(read, write)-1; queue i is readable below readQueueNums, writable below writeQueueNums."""
    readable = bool(queue_data.perm & PERM_READ)
    writable = bool(queue_data.perm & PERM_WRITE)
    count = max(queue_data.read_queue_nums, queue_data.write_queue_nums)
    return [RouteQueue(topic, queue_id, queue_data.broker_name, endpoints,
                       readable=readable and queue_id < queue_data.read_queue_nums,
                       writable=writable and queue_id < queue_data.write_queue_nums,
                       message_type=message_type, domain_name=domain)
            for queue_id in range(count)]
