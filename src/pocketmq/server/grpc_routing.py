"""QueryRoute's answer as a pure function of a name server route: which queues, on which gRPC endpoint.

A v2 client sends every request of a queue to that queue's broker endpoints, so each broker's queues must
carry that broker's own gRPC address: the route's ``grpcAddrTable`` (remoting address -> gRPC address,
filled by the brokers' registrations) gives it. A broker without a gRPC front end is left out: a v2 client
could not reach it.

A group's queues go to its master; a group whose master is gone (the name server then lists only its slaves,
as RocketMQ's does) is served by its lowest-id member with a gRPC front end, read only: a slave refuses sends,
and its POP works while it acts as master (docs/ha.md). So any broker of the cluster answers for the whole
cluster, and an official client that dials a surviving broker keeps reading the other groups (issue 7).

The broker that answers the query puts the request's own endpoints on the queues it serves itself (the access
point the client dialled, scheme included): the client then reuses the channel it already has, and a
DOMAIN_NAME endpoint stays one address (the Python client raises on a DOMAIN_NAME with several, reference
§8.5).
"""

from __future__ import annotations

from pocketmq.common.topic import PERM_READ, PERM_WRITE, MessageType, TopicConfig
from pocketmq.protocol.grpc_codec import RouteQueue
from pocketmq.protocol.route import MASTER_ID, BrokerData, QueueData, TopicRouteData

Address = tuple[str, int]


def parse_address(text: str) -> Address | None:
    """``host:port`` (``[v6]:port`` too) as (host, port); None when it is not one."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        return None
    return host.strip("[]"), int(port)


def local_route(
    config: TopicConfig, *, cluster: str, broker_name: str, broker_addr: str, grpc_addr: str | None
) -> TopicRouteData:
    """The route of a topic as only this broker knows it (no name server, or it has not heard of it yet)."""
    return TopicRouteData(
        queue_datas=(QueueData(broker_name, config.read_queue_nums, config.write_queue_nums, config.perm),),
        broker_datas=(BrokerData(cluster, broker_name, {0: broker_addr}),),
        grpc_addrs={broker_addr: grpc_addr} if grpc_addr else {},
    )


def route_queues(
    route: TopicRouteData,
    topic: str,
    *,
    own_broker_addr: str | None,
    own_grpc_addr: str | None,
    dialled: list[Address],
    dialled_domain: bool,
    message_type: MessageType,
) -> list[RouteQueue]:
    """Every queue of ``route`` that a v2 client can reach, ordered by broker name then queue id.

    ``own_broker_addr``: this broker's advertised remoting address (how the route names it); None for a proxy,
    which serves every broker's queues on its own endpoint ``own_grpc_addr``.
    ``dialled`` / ``dialled_domain``: the request's endpoints (empty from a client that sent none: then this
    broker's advertised gRPC address is used). ``message_type``: the topic's type, as this broker knows it.
    """
    brokers = {b.broker_name: b for b in route.broker_datas}
    grpc_addrs = dict(route.grpc_addrs)
    if own_broker_addr is None and own_grpc_addr:  # a proxy reaches every member over remoting
        grpc_addrs = {addr: own_grpc_addr for b in route.broker_datas for addr in b.broker_addrs.values()}
    elif own_broker_addr is not None and own_grpc_addr:  # also when the name server keeps no gRPC table
        grpc_addrs[own_broker_addr] = own_grpc_addr
    queues: list[RouteQueue] = []
    for queue_data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        broker = brokers.get(queue_data.broker_name)
        member = serving_member(broker, grpc_addrs) if broker is not None else None
        if member is None:
            continue
        broker_id, remoting_addr = member
        if own_broker_addr in (None, remoting_addr) and dialled:
            endpoints, domain = tuple(dialled), dialled_domain
        else:
            address = parse_address(grpc_addrs[remoting_addr])
            endpoints, domain = ((address,) if address else ()), False
        if endpoints:
            queues.extend(
                _queues_of(queue_data, topic, endpoints, domain, message_type, has_master=broker_id == MASTER_ID)
            )
    return queues


def serving_member(broker: BrokerData, grpc_addrs: dict[str, str]) -> tuple[int, str] | None:
    """(broker id, remoting address) of the member of ``broker`` that v2 clients use: the lowest id with a gRPC
    front end (the master while it is there); None when no member has one."""
    with_grpc = [(broker_id, addr) for broker_id, addr in broker.broker_addrs.items() if grpc_addrs.get(addr)]
    return min(with_grpc) if with_grpc else None


def _queues_of(
    queue_data: QueueData,
    topic: str,
    endpoints: tuple[Address, ...],
    domain: bool,
    message_type: MessageType,
    *,
    has_master: bool,
) -> list[RouteQueue]:
    """Queue ids 0..max(read, write)-1; queue i is readable below readQueueNums, writable below writeQueueNums
    (and only through the group's master: a slave refuses sends)."""
    readable = bool(queue_data.perm & PERM_READ)
    writable = bool(queue_data.perm & PERM_WRITE) and has_master
    count = max(queue_data.read_queue_nums, queue_data.write_queue_nums)
    return [
        RouteQueue(
            topic,
            queue_id,
            queue_data.broker_name,
            endpoints,
            readable=readable and queue_id < queue_data.read_queue_nums,
            writable=writable and queue_id < queue_data.write_queue_nums,
            message_type=message_type,
            domain_name=domain,
        )
        for queue_id in range(count)
    ]
