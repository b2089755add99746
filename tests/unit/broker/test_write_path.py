"""The broker's one write path (broker/write_path.py): the timer, revive, the pop engine and the transaction service
always write to the same place, a role change swaps it for all four at once and back, and a slave that does not
act refuses every write as its read-only store does. In-process brokers on a ManualClock."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
from tests.unit.pop.pop_support import running_broker

from pocketmq.broker.acting_progress import ActingProgress
from pocketmq.broker.acting_writes import EscapedWritePath
from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.write_path import LocalWritePath, ReadOnlyWritePath, WritePath
from pocketmq.common.errors import StoreError
from pocketmq.common.message import MessageExt
from pocketmq.runtime.clock import ManualClock


def parts_in_use(broker: Broker) -> tuple:
    """What each special service writes through now (every pop mode the same as the engine)."""
    pop = broker.pop.writes
    assert broker.pop.staged.writes is pop
    return broker.timer.writes, broker.pop.revive.writes, pop, broker.transactions.writes


def parts_of(path: WritePath) -> tuple:
    return path.timer, path.revive, path.pop, path.transaction


@contextlib.asynccontextmanager
async def running_slave(tmp_path, clock: ManualClock):
    """A slave of group broker-a that knows no name server: it follows nobody and its election never acts."""
    config = dataclasses.replace(
        BrokerConfig(data_dir=tmp_path / "data", remoting_port=0, grpc_port=0),
        broker_role=BrokerRole.SLAVE,
        broker_id=1,
        pop_revive_interval_ms=3_600_000,
    )
    broker = Broker(config, clock=clock)
    await broker.start(remoting_port=10912)
    try:
        yield broker
    finally:
        await broker.shutdown()


async def test_a_master_writes_locally_and_a_swap_moves_every_service_and_back(tmp_path):
    async with running_broker(tmp_path, ManualClock()) as broker:
        local = broker.write_path.current
        assert isinstance(local, LocalWritePath) and parts_in_use(broker) == parts_of(local)
        escaped = EscapedWritePath(bridge=None, progress=ActingProgress(tmp_path / "a.json"), revive_topic="R")
        broker.write_path.use(escaped)
        assert parts_in_use(broker) == parts_of(escaped)
        broker.write_path.use(local)
        assert parts_in_use(broker) == parts_of(local)


async def test_a_slave_acting_as_master_escapes_everything_and_stops_writing_when_it_hands_back(tmp_path):
    async with running_slave(tmp_path, ManualClock(1_000_000)) as slave:
        read_only = slave.write_path.current
        assert isinstance(read_only, ReadOnlyWritePath) and parts_in_use(slave) == parts_of(read_only)
        services = slave.acting.services
        await services.start()
        escaped = slave.write_path.current
        assert isinstance(escaped, EscapedWritePath) and parts_in_use(slave) == parts_of(escaped)
        assert slave.transactions.table is not None and slave.transactions.writes.escapes  # running, escaping
        await services.stop()
        assert slave.transactions.table is None
        # all four back: the timer, revive and transactions too (they kept writing through the bridge before)
        assert parts_in_use(slave) == parts_of(read_only)
        await services.start()  # acting again (the master went away again)
        assert parts_in_use(slave) == parts_of(slave.write_path.current) == parts_of(escaped)
        await services.stop()
        assert parts_in_use(slave) == parts_of(read_only)


async def test_a_slave_that_does_not_act_refuses_writes_as_its_read_only_store(tmp_path):
    """The read-only path answers what the local path over a slave's store answered (before, a slave's services
    wrote to their local path and its store refused): the same errors and write results."""
    async with running_slave(tmp_path, ManualClock(1_000_000)) as slave:
        read_only = slave.write_path.current
        over_store = LocalWritePath(slave.store, slave.topics)
        queue = slave.pop.revive.queues[0]
        ck = PopCheckpoint.of_offsets("T", "G", 0, [0], 1_000, 10_000, slave.broker_name, queue.queue_id)
        ack = AckRecord("T", "G", 0, 0, 1_000, slave.broker_name, (0,))
        copy = MessageExt(topic="%RETRY%G", body=b"x")
        due = [(1_000, 0)]
        assert await read_only.timer.deliver(due, [None]) == await over_store.timer.deliver(due, [None])
        assert await read_only.revive.put_copies([copy]) == await over_store.revive.put_copies([copy])
        for path in (read_only, over_store):
            assert not path.pop.forwardable(ck.key, 0)
        # A FIFO ack writes no record, so the store alone would let it through; its state would not hold here
        with pytest.raises(StoreError, match="FIFO POP state"):
            await read_only.pop.fifo_state()
        attempts = [
            lambda path: path.pop.checkpoint(queue, ck),
            lambda path: path.pop.acks(queue, [ack]),
            lambda path: path.pop.change(queue, ack, ck),
            lambda path: path.pop.put_messages([copy]),
            lambda path: path.revive.close(queue, [(ack, [])]),
        ]
        for attempt in attempts:
            refusals = []
            for path in (read_only, over_store):
                with pytest.raises(StoreError) as refused:
                    await attempt(path)
                refusals.append(str(refused.value))
            assert refusals[0] == refusals[1] and "is a slave" in refusals[0]
