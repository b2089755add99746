"""The name server model and what every other node shares: a cached view of the cluster from it.

The name server *is* the real route table (``namesrv.route_table.RouteTable``): registrations, expiry after
``broker_expire_ms`` without a heartbeat, and the cluster info every node reads. The shell around it (a
request handler and an expiry tick) is the model. A killed broker leaves the routes by expiry only (the real
name server also drops it at once when its connection closes; expiry is the slower, harsher case).
"""

from __future__ import annotations

from pocketmq.common.errors import RemotingError
from pocketmq.namesrv.route_table import RouteTable
from pocketmq.protocol.route import MASTER_ID, ClusterInfo, RegisterBrokerBody
from pocketmq.testing.sim.config import SimConfig
from pocketmq.testing.sim.history import History
from pocketmq.testing.sim.kernel import Kernel
from pocketmq.testing.sim.network import Network
from pocketmq.testing.sim.wire import GetClusterInfo, Register

NAMESRV_ADDR = "namesrv"


def serving_broker_id(broker_addrs: dict[int, str]) -> int | None:
    """The broker of a group that clients read and pop through: the lowest id the routes list (the SDK's
    ``TopicRouteView``: the master, else its lowest-id slave). Whether that slave *acts* for the group is
    the real election's decision (``cluster.acting_master.should_act``, in ``SimBroker.acting``)."""
    return min(broker_addrs) if broker_addrs else None


class SimNameServer:
    def __init__(self, kernel: Kernel, net: Network, history: History, config: SimConfig):
        self._kernel = kernel
        self._history = history
        self._config = config
        self.table = RouteTable(broker_expire_ms=config.broker_expire_ms)
        net.attach(NAMESRV_ADDR, self._handle)
        kernel.after(config.heartbeat_ms, self._expire)

    def _handle(self, src: str, request, respond) -> None:
        if isinstance(request, Register):
            respond(self.table.register(request.identity, RegisterBrokerBody(), now_ms=self._kernel.now_ms()))
        elif isinstance(request, GetClusterInfo):
            respond(self.table.cluster_info())

    def _expire(self) -> None:
        for identity in self.table.expire(self._kernel.now_ms()):
            self._history.record("route_expired", group=identity.broker_name, broker_id=identity.broker_id)
        self._kernel.after(self._config.heartbeat_ms, self._expire)


class Node:
    """A process on the simulated network with a view of the cluster it refreshes from the name server."""

    def __init__(self, addr: str, kernel: Kernel, net: Network, history: History, config: SimConfig):
        self.addr = addr
        self.kernel = kernel
        self.net = net
        self.history = history
        self.config = config
        self.view = ClusterInfo()
        self.up = False
        self.incarnation = 0

    def alive(self, incarnation: int) -> bool:
        return self.up and self.incarnation == incarnation

    async def refresh_view(self, incarnation: int) -> None:
        try:
            view = await self.net.call(self.addr, NAMESRV_ADDR, GetClusterInfo(), self.config.rpc_timeout_ms)
        except RemotingError:
            return  # keep the stale view, as clients do
        if self.alive(incarnation):
            self.view = view

    def group_addrs(self, group: str) -> dict[int, str]:
        data = self.view.broker_addr_table.get(group)
        return dict(data.broker_addrs) if data is not None else {}

    def master_addr(self, group: str) -> str | None:
        return self.group_addrs(group).get(MASTER_ID)

    def serving_addr(self, group: str) -> str | None:
        """Where clients of ``group`` go: its master, else its lowest-id broker listed."""
        addrs = self.group_addrs(group)
        serving = serving_broker_id(addrs)
        return addrs[serving] if serving is not None else None
