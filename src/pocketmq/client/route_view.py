"""What a client needs from a topic's route: broker masters, the queues to write to and read from, and the
topic's gray ratio on each broker that has one.

A group whose master is gone (the name server lists only its slaves, as RocketMQ's does) stays readable
through its lowest-id slave: its queues are in ``read_queues`` and ``broker_addrs`` names the slave, but it
has no ``write_queues`` (slaves refuse sends).

Built from the name server's route data (the route JSON is parsed by ``pocketmq.protocol.route``); pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.client.queue_select import interleave_by_broker
from pocketmq.common.message import MessageQueue
from pocketmq.common.topic import PERM_READ, PERM_WRITE

MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class TopicRouteView:
    """A topic as this client uses it. Brokers without any address carry no queues here."""

    topic: str
    master_addrs: dict[str, str] = field(default_factory=dict)  # broker name -> master "host:port"
    # broker name -> the address to talk to: the master, else (reads only) the lowest-id slave
    broker_addrs: dict[str, str] = field(default_factory=dict)
    write_queues: tuple[MessageQueue, ...] = ()  # interleaved by broker, for round robin
    read_queues: tuple[MessageQueue, ...] = ()  # sorted
    # broker name -> the topic's gray ratio there, for brokers where it has one (docs/gray.md): clients split by it
    gray_ratios: dict[str, float] = field(default_factory=dict)

    @property
    def broker_names(self) -> list[str]:
        return sorted(self.master_addrs)

    @property
    def readable_broker_names(self) -> list[str]:
        """The brokers holding read queues: the masters, and the groups read through a slave (one acting as
        master serves POP, docs/ha.md)."""
        return sorted({mq.broker_name for mq in self.read_queues})

    def __repr__(self) -> str:
        return (
            f"<TopicRouteView {self.topic} brokers={self.broker_names} write={len(self.write_queues)} "
            f"read={len(self.read_queues)}>"
        )


def route_view_of(topic: str, route) -> TopicRouteView:
    """The view of a ``pocketmq.protocol.route.TopicRouteData``."""
    return build_route_view(topic, route.queue_datas, route.broker_datas)


def build_route_view(topic: str, queue_datas, broker_datas) -> TopicRouteView:
    """From the route's queue data (broker_name, read/write queue nums, perm) and broker data (name ->
    addresses by broker id)."""
    masters: dict[str, str] = {}
    reachable: dict[str, str] = {}
    for broker in broker_datas:
        addr = broker.broker_addrs.get(MASTER_ID)
        if addr:
            masters[broker.broker_name] = addr
        if broker.broker_addrs:
            reachable[broker.broker_name] = addr or broker.broker_addrs[min(broker.broker_addrs)]
    write, read = [], []
    gray_ratios: dict[str, float] = {}
    for qd in queue_datas:
        if qd.broker_name not in reachable:
            continue
        if qd.gray_queue_ratio is not None:
            gray_ratios[qd.broker_name] = qd.gray_queue_ratio
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            write += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)]
        if qd.perm & PERM_READ:
            read += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums)]
    return TopicRouteView(
        topic, masters, reachable, tuple(interleave_by_broker(write)), tuple(sorted(read)), gray_ratios
    )
