"""``pocketmq serve --controller etcd://HOST:PORT``: the broker's role comes from the controller (docs/failover.md).

``--broker-id`` names the broker within its group (each broker of a group its own id); the role it serves is
decided by the failover loop (``cluster/failover.py``): the lease holder runs as the group's master (route id
0, the master role of ``--role``: ``sync_master`` unless ``async_master`` is given), the others as slaves
(route id ``--broker-id`` + 1, so no slave takes the master's id 0). The broker's roles are fixed for the life
of a ``Broker``, so a change of role is a *round*: the front ends and the broker stop (a master steps down by
closing its ports at once, so it takes no send once its lease may lapse), and the broker starts again in the
new role on the same ports and data directory, where the usual replication takes over: a new master begins a
replication epoch from its log's end, and a former master now following it cuts what it wrote beyond that
(docs/ha.md, "Diverged slaves").

Needs external name servers (``--namesrv``): an embedded one would go away with each round.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.cli.running import StopSignals
from pocketmq.cluster.controller import EtcdController
from pocketmq.cluster.election import Role
from pocketmq.cluster.epoch_fence import EpochFence
from pocketmq.cluster.failover import FailoverLoop
from pocketmq.common.errors import ConfigError
from pocketmq.protocol.route import MASTER_ID
from pocketmq.runtime.ports import free_port

log = logging.getLogger(__name__)
Serve = Callable[..., Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Round:
    role: Role  # MASTER or SLAVE
    epoch: int


def round_config(config: BrokerConfig, controller_id: int, round_: Round, master_role: BrokerRole) -> BrokerConfig:
    """The broker's configuration for one round: its route id and replication role."""
    if round_.role is Role.MASTER:
        return dataclasses.replace(config, broker_id=MASTER_ID, broker_role=master_role)
    return dataclasses.replace(config, broker_id=controller_id + 1, broker_role=BrokerRole.SLAVE)


class RoundSwitch:
    """The role handler of the failover loop in a serving process: it ends the running round when the role must
    change, and knows the running broker (its log end, its in-sync slaves)."""

    def __init__(self) -> None:
        self.broker: Broker | None = None
        self.current: Round | None = None
        self.wanted: Round | None = None  # the latest decision (None: stepped down, wait for the next one)
        self.changed = asyncio.Event()  # ``wanted`` changed: the running round ends, the next takes ``wanted``

    def _want(self, round_: Round | None) -> None:
        self.wanted = round_
        self.changed.set()

    async def become_master(self, epoch: int) -> None:
        self._want(Round(Role.MASTER, epoch))

    async def follow(self, master_id: int, master_address: str, epoch: int) -> None:
        if self.current is None or self.current.role is not Role.SLAVE:
            self._want(Round(Role.SLAVE, epoch))
        # a slave finds its new master through the name server (id 0), as without a controller

    async def step_down(self) -> None:
        self._want(None)

    def log_end(self) -> int:
        return self.broker.store.max_phys_offset if self.broker is not None else 0

    def in_sync_addresses(self) -> frozenset[str]:
        ha_master = self.broker.ha_master if self.broker is not None else None
        return ha_master.in_sync_slave_addrs() if ha_master is not None else frozenset()


async def serve_controlled(config: BrokerConfig, endpoint: str, ready_file: str | None, serve: Serve) -> None:
    """Rounds of ``serve`` (``serve_cmd.serve``), one per role the controller gives this broker, until stopped."""
    if config.namesrv_addr is None:
        raise ConfigError("--controller needs --namesrv: the name server must outlive a change of role")
    master_role = BrokerRole.SYNC_MASTER if config.broker_role is BrokerRole.SLAVE else config.broker_role
    # the ports stay the same over rounds: the address is in the routes, in message ids and in the controller
    # (and a scraper keeps finding the metrics)
    config = dataclasses.replace(
        config,
        remoting_port=config.remoting_port or free_port(config.host),
        grpc_port=config.grpc_port or free_port(config.host),
        metrics_port=free_port(config.host) if config.metrics_port == 0 else config.metrics_port,
    )
    controller_id = config.broker_id
    switch = RoundSwitch()
    controller = EtcdController(
        endpoint,
        cluster_name=config.cluster_name,
        broker_name=config.broker_name,
        broker_id=controller_id,
        address=config.public_addr(),
    )
    fence = EpochFence()  # one per process: the newest epoch outlives the rounds
    loop = FailoverLoop(controller, switch, fence=fence)
    stop = asyncio.ensure_future(StopSignals().wait())

    async def until() -> None:
        """Until a stop signal or a new decision (the next round takes it)."""
        changed = asyncio.ensure_future(switch.changed.wait())
        await asyncio.wait([changed, stop], return_when=asyncio.FIRST_COMPLETED)
        changed.cancel()

    await loop.start()
    try:
        while True:
            await until()
            if stop.done():
                break
            switch.changed.clear()
            round_ = switch.wanted
            if round_ is None:
                continue
            switch.current = round_
            log.warning("event=controlled_round role=%s epoch=%d", round_.role.value, round_.epoch)
            fence.master_epoch = round_.epoch if round_.role is Role.MASTER else 0

            def on_broker(broker: Broker) -> None:
                switch.broker = broker
                broker.epoch_fence = fence  # replication fenced by the epoch (cluster.epoch_fence)
                broker.metrics.add_source(loop.stats.families)  # counted across rounds

            await serve(
                round_config(config, controller_id, round_, master_role),
                ready_file=ready_file,
                until=until,
                on_broker=on_broker,
            )
            switch.broker, switch.current = None, None
    finally:
        stop.cancel()
        await loop.stop()
