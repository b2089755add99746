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
        self.asked: list[list[str] | None] = []  # the topics each body was built for (None: all)

    def add(self, topic: str) -> None:
        self.topics.append(topic)
        self.version += 1

    def body(self, topics=None) -> RegisterBrokerBody:
        self.bodies_built += 1
        self.asked.append(None if topics is None else sorted(topics))
        return RegisterBrokerBody(
            tuple(TopicConfig(t, 4, 4) for t in self.topics if topics is None or t in topics),
            {"timestamp": 1, "counter": self.version},
            BrokerFlags(grpc_addr="127.0.0.1:8081"),
        )


@pytest.fixture
async def down_addr() -> str:
    """The address of a name server that was started and stopped: connections to it are refused."""
    down = NameServer(NamesrvConfig(port=0))
    await down.start()
    addr = down.address
    await down.stop()
    return addr


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
            registrar.trigger(topic)
        # 100 ms of virtual time a poll: the interval (60 s) does not come within the deadline
        await advance_until(clock, lambda: namesrv.routes.route("t3") is not None, step_ms=100)
        assert broker.bodies_built == built_after_start + 1
        assert broker.asked[-1] == ["t1", "t2", "t3"]  # incremental: the changed topics, not the table
        assert namesrv.routes.route("orders") is not None


async def test_trigger_from_another_thread(namesrv, remoting):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, clock=clock)
    async with running(registrar):
        broker.add("from-thread")
        await asyncio.to_thread(registrar.trigger, "from-thread")
        await advance_until(clock, lambda: namesrv.routes.route("from-thread") is not None, step_ms=50)


async def test_interval_reregisters_and_keeps_the_broker_alive(namesrv, remoting):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, interval_ms=50, clock=clock)
    async with running(registrar):
        await advance_until(clock, lambda: broker.bodies_built >= 3, step_ms=50)


async def test_a_down_name_server_does_not_stop_registration_with_the_others(namesrv, remoting, down_addr):
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

        def body_broken_once(topics):
            rounds.append(clock.now_ms())
            if len(rounds) == 1:
                raise ValueError("bug in the body")
            return broker.body(topics)

        registrar._body_fn = body_broken_once
        built = broker.bodies_built
        await advance_until(clock, lambda: broker.bodies_built > built, step_ms=50)
        assert len(rounds) == 2 and registrar._rounds.failures.total == 1


async def test_register_now_returns_once_the_name_server_has_the_change_and_sends_nothing_twice(namesrv, remoting):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, debounce_ms=100, clock=clock)
    async with running(registrar):
        broker.add("created")
        registrar.trigger("created")
        await asyncio.gather(registrar.register_now(), registrar.register_now())  # two creates at once

        assert namesrv.routes.route("created") is not None  # no virtual time passed: not the debounced round
        assert broker.asked == [None, ["created"]]
        await registrar.register_now()  # nothing changed since
        rounds = registrar._rounds.rounds
        await advance_until(clock, lambda: registrar._rounds.rounds > rounds, step_ms=100)
        assert broker.asked == [None, ["created"]]  # the trigger's debounced round found the change carried


async def test_a_flags_change_registers_without_topics(namesrv, remoting):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, clock=clock)
    async with running(registrar):
        registrar.trigger()
        await registrar.register_now()
        assert broker.asked == [None, []]


async def test_rounds_are_full_once_the_interval_passed_and_after_a_failed_round(namesrv, remoting, down_addr):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, interval_ms=1_000, clock=clock)
    async with running(registrar):
        broker.add("t1")
        registrar.trigger("t1")
        await registrar.register_now()
        assert broker.asked[-1] == ["t1"]
        await advance_until(clock, lambda: len(broker.asked) == 3, step_ms=100)
        assert broker.asked[-1] is None  # the heartbeat: every topic

        registrar.namesrv_addrs.append(down_addr)  # a name server that refuses
        broker.add("t2")
        registrar.trigger("t2")
        await registrar.register_now()
        assert broker.asked[-1] == ["t2"] and down_addr in repr(registrar)
        registrar.namesrv_addrs.remove(down_addr)
        broker.add("t3")
        registrar.trigger("t3")
        await advance_until(clock, lambda: len(broker.asked) == 5, step_ms=10)
        assert broker.asked[-1] is None  # the round after a failed one carries the whole table


async def test_a_name_server_that_forgot_the_broker_gets_the_whole_table_after_an_incremental_round(namesrv, remoting):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, clock=clock)
    async with running(registrar):
        namesrv.routes.unregister("DefaultCluster", BROKER_ADDR)  # as a restart or an expiry would
        broker.add("t1")
        registrar.trigger("t1")
        await registrar.register_now()
        assert broker.asked[-1] == ["t1"] and namesrv.routes.route("orders") is None
        await advance_until(clock, lambda: namesrv.routes.route("orders") is not None, step_ms=50)
        assert broker.asked[-1] is None


async def test_a_deleted_topic_makes_the_next_round_full(namesrv, remoting):
    broker, clock = FakeBroker("orders", "gone"), ManualClock()
    registrar = registrar_for([namesrv.address], remoting, broker, clock=clock)
    async with running(registrar):
        broker.topics.remove("gone")
        registrar.trigger("gone", whole_table=True)
        await advance_until(clock, lambda: len(broker.asked) == 2, step_ms=50)
        assert broker.asked[-1] is None


async def test_nothing_is_registered_after_unregister(namesrv, remoting):
    broker = FakeBroker("orders")
    registrar = registrar_for([namesrv.address], remoting, broker)
    await registrar.start()
    broker.add("late")
    registrar._changed("late")  # a change the loop took just before the broker stopped
    await registrar.unregister()
    await registrar.register_now()  # a create's round running behind its answer
    assert broker.asked == [None] and namesrv.routes.cluster_info().broker_addr_table == {}


async def test_register_now_does_not_wait_for_a_failing_name_server(namesrv, remoting, down_addr):
    broker, clock = FakeBroker("orders"), ManualClock()
    registrar = registrar_for([down_addr, namesrv.address], remoting, broker, clock=clock)
    async with running(registrar):
        broker.add("t1")
        registrar.trigger("t1")
        await registrar.register_now()  # returns at once: the round runs behind it
        await advance_until(clock, lambda: namesrv.routes.route("t1") is not None, step_ms=50)
