"""What a client needs from a topic's route: broker masters and the queues to write to and read from.

Built from the name server's route data (the route JSON is parsed by ``pocketmq.cluster.route``); pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.client.queue_select import interleave_by_broker
from pocketmq.common.message import MessageQueue
from pocketmq.common.topic import PERM_READ, PERM_WRITE

MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class TopicRouteView:
    """A topic as this client uses it. Brokers without a master address carry no queues here."""

    topic: str
    master_addrs: dict[str, str] = field(default_factory=dict)  # broker name -> master "host:port"
    write_queues: tuple[MessageQueue, ...] = ()  # interleaved by broker, for round robin
    read_queues: tuple[MessageQueue, ...] = ()  # sorted

    @property
    def broker_names(self) -> list[str]:
        return sorted(self.master_addrs)

    def __repr__(self) -> str:
        return (f"<TopicRouteView {self.topic} brokers={self.broker_names} write={len(self.write_queues)} "
                f"read={len(self.read_queues)}>")


def route_view_of(topic: str, route) -> TopicRouteView:
    """The view of a ``pocketmq.cluster.route.TopicRouteData``."""
    return build_route_view(topic, route.queue_datas, route.broker_datas)


def build_route_view(topic: str, queue_datas, broker_datas) -> TopicRouteView:
    """From the route's queue data (broker_name, read/write queue nums, perm) and broker data (name ->
    addresses by broker id)."""
    masters: dict[str, str] = {}
    for broker in broker_datas:
        addr = broker.broker_addrs.get(MASTER_ID)
        if addr:
            masters[broker.broker_name] = addr
    write, read = [], []
    for qd in queue_datas:
        if qd.broker_name not in masters:
            continue
        if qd.perm & PERM_WRITE:
            write += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)]
        if qd.perm & PERM_READ:
            read += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums)]
    return TopicRouteView(topic, masters, tuple(interleave_by_broker(write)), tuple(sorted(read)))
