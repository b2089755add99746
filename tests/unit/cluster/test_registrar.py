"""BrokerRegistrar against in-process NameServers over real loopback TCP."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from tests.unit.virtual_time import advance_until

from pocketmq.cluster.registrar import BrokerRegistrar
from pocketmq.common.topic import TopicConfig
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.server import NameServer
from pocketmq.protocol.route import BrokerFlags, RegisterBrokerBody
from pocketmq.protocol.transport import RemotingClient
from pocketmq.runtime.clock import ManualClock

BROKER_ADDR = "127.0.0.1:10911"


class FakeBroker:
    """The broker side of registration: a topic table with a version, and a count of bodies built."""

    def __init__(self, *topics: str):
        self.topics = list(topics)
        self.version = 1
        self.bodies_built = 0

    def add(self, topic: str) -> None:
        self.topics.append(topic)
        self.version += 1

    def body(self) -> RegisterBrokerBody:
        self.bodies_built += 1
        return RegisterBrokerBody(
            tuple(TopicConfig(t, 4, 4) for t in self.topics),
            {"timestamp": 1, "counter": self.version},
            BrokerFlags(grpc_addr="127.0.0.1:8081"),
        )


@contextlib.asynccontextmanager
async def running(registrar: BrokerRegistrar):
    await registrar.start()
    try:
        yield registrar
    finally:
        await registrar.unregister()


def registrar_for(addrs, remoting, broker, *, interval_ms=60_000, clock=None, **kwargs) -> BrokerRegistrar:
    return BrokerRegistrar(
        addrs,
        remoting,
        broker.body,
        interval_ms,
        clock or ManualClock(),
        cluster_name="DefaultCluster",
        broker_name="broker-a",
        broker_id=0,
        broker_addr=BROKER_ADDR,
        **kwargs,
    )


async def test_start_registers_before_returning(namesrv, remoting):
    broker = FakeBroker("orders")
    clock = ManualClock(start_ms=5_000)
    registrar = registrar_for([namesrv.address], remoting, broker, clock=clock)

    async with running(registrar):
        route = namesrv.routes.route("orders")
        assert [b.broker_addrs for b in route.broker_datas] == [{0: BROKER_ADDR}]
        assert route.grpc_addrs == {BROKER_ADDR: "127.0.0.1:8081"}
        assert registrar.last_registered_ms == {namesrv.address: 5_000}
        assert "running" in repr(registrar)


async def test_trigger_registers_soon_and_bursts_coalesce(namesrv, remoting):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, debounce_ms=100, clock=clock)
    async with running(registrar):
        built_after_start = broker.bodies_built
        for topic in ("t1", "t2", "t3"):
            broker.add(topic)
            registrar.trigger()
        # 100 ms of virtual time a poll: the interval (60 s) does not come within the deadline
        await advance_until(clock, lambda: namesrv.routes.route("t3") is not None, step_ms=100)
        assert broker.bodies_built == built_after_start + 1


async def test_trigger_from_another_thread(namesrv, remoting):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, clock=clock)
    async with running(registrar):
        broker.add("from-thread")
        await asyncio.to_thread(registrar.trigger)
        await advance_until(clock, lambda: namesrv.routes.route("from-thread") is not None, step_ms=50)


async def test_interval_reregisters_and_keeps_the_broker_alive(namesrv, remoting):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, interval_ms=50, clock=clock)
    async with running(registrar):
        await advance_until(clock, lambda: broker.bodies_built >= 3, step_ms=50)


async def test_a_down_name_server_does_not_stop_registration_with_the_others(namesrv, remoting):
    down = NameServer(NamesrvConfig(port=0))
    await down.start()
    down_addr = down.address
    await down.stop()
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([down_addr, namesrv.address], remoting, broker, interval_ms=50, clock=clock)

    async with running(registrar):
        assert namesrv.routes.route("orders") is not None
        assert list(registrar.last_registered_ms) == [namesrv.address]
        assert down_addr in repr(registrar)
        await advance_until(clock, lambda: broker.bodies_built >= 3, step_ms=50)  # later rounds still run
        result = await registrar.register_once()
        assert result == {down_addr: False, namesrv.address: True}


async def test_unregister_removes_the_broker_and_stops_the_rounds(namesrv, remoting):
    broker = FakeBroker("orders")
    registrar = registrar_for([namesrv.address], remoting, broker, interval_ms=50)
    await registrar.start()

    await registrar.unregister()

    assert namesrv.routes.route("orders") is None
    assert namesrv.routes.cluster_info().broker_addr_table == {}
    built = broker.bodies_built
    registrar.trigger()  # after unregister: nothing happens
    assert broker.bodies_built == built
    assert "stopped" in repr(registrar)


def test_needs_a_name_server():
    with pytest.raises(ValueError):
        registrar_for([], RemotingClient(), FakeBroker())


async def test_a_round_that_raises_does_not_end_the_heartbeat(namesrv, remoting):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, interval_ms=50, clock=clock)
    async with running(registrar):
        rounds = []

        def body_broken_once():
            rounds.append(clock.now_ms())
            if len(rounds) == 1:
                raise ValueError("bug in the body")
            return broker.body()

        registrar._body_fn = body_broken_once
        built = broker.bodies_built
        await advance_until(clock, lambda: broker.bodies_built > built, step_ms=50)
        assert len(rounds) == 2 and registrar._rounds.failures.total == 1
