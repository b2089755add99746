"""An ack that reaches the broker while revive is handing the same CK back: one of them wins. An ack answered
OK is never followed by the message's retry copy, and a CK revive picked refuses acks until it is closed."""

from __future__ import annotations

import asyncio

import pytest
from tests.unit.pop.pop_support import acting_path, pop, running_broker, send

from pocketmq.broker.write_path import LocalWritePath
from pocketmq.common.errors import InvalidReceiptHandleError
from pocketmq.runtime.clock import ManualClock

INVISIBLE_MS = 10_000
pytestmark = pytest.mark.timeout(30)


class GatedStore:
    """The broker's store for revive's copies, holding each put until ``gate`` opens (a SYNC_FLUSH fsync, a
    slow disk): the pass is suspended between picking its CKs and closing them."""

    def __init__(self, store):
        self._store = store
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def put_messages(self, msgs):
        self.entered.set()
        await self.gate.wait()
        return await self._store.put_messages(msgs)

    def __getattr__(self, name):
        return getattr(self._store, name)


async def test_an_ack_while_revive_writes_the_retry_copy_is_refused(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 2)
        [(_, revived), (_, kept)] = await pop(broker, "G", "T", invisible_ms=INVISIBLE_MS)
        assert await broker.pop.ack("G", [kept]) == [None]  # before revive: the CK keeps one message to revive
        gated = GatedStore(broker.store)
        broker.pop.revive.writes._store = gated
        clock.advance(INVISIBLE_MS)
        revive = asyncio.ensure_future(broker.pop.revive.run_once(clock.now_ms()))
        await gated.entered.wait()  # the pass picked the CK and is writing its retry copy
        [outcome] = await broker.pop.ack("G", [revived])
        gated.gate.set()
        assert await revive == 1
        assert isinstance(outcome, InvalidReceiptHandleError)  # revived already: no OK ack
        again = await pop(broker, "G", "T")
        assert [m.body for m, _ in again] == [b"m0"] and again[0][0].reconsume_times == 1


async def test_a_ck_whose_revive_failed_takes_acks_again(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 1)
        [(_, handle)] = await pop(broker, "G", "T", invisible_ms=INVISIBLE_MS)
        gated = GatedStore(broker.store)
        gated.put_messages = _refused(gated)
        broker.pop.revive.writes._store = gated
        clock.advance(INVISIBLE_MS)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0  # the copy was refused: the CK stays open
        assert await broker.pop.ack("G", [handle]) == [None]
        clock.advance(3_600_000)
        broker.pop.revive.writes._store = broker.store
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0
        assert await pop(broker, "G", "T") == []


def _refused(gated: GatedStore):
    from pocketmq.store.api import PutResult, PutStatus

    async def put_messages(msgs):
        return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason="injected")] * len(msgs)

    return put_messages


class SlowSlave:
    """A SYNC master's replication that answers once ``gate`` opens (``LocalPopWrites.replication``)."""

    def __init__(self):
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def replicated(self, results):
        self.entered.set()
        await self.gate.wait()
        return results


async def test_a_batch_ack_waiting_for_its_slave_keeps_revive_off_every_ck_it_acks(tmp_path):
    """The ACKs of a batch go to their revive queues one after the other, each waiting for a slave: a CK of the
    second queue must not be handed back while the first one waits (the whole batch answers OK)."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 2)
        [(_, first)] = await pop(broker, "G", "T", max_count=1, invisible_ms=INVISIBLE_MS)
        [(_, second)] = await pop(broker, "G", "T", max_count=1, invisible_ms=INVISIBLE_MS)
        assert first.revive_queue_id != second.revive_queue_id
        slave = SlowSlave()
        broker.write_path.use(LocalWritePath(broker.store, broker.topics, replication=slave))
        clock.advance(INVISIBLE_MS)  # both due: the acks come late, but before revive handed them back
        acking = asyncio.ensure_future(broker.pop.ack("G", [first, second]))
        await slave.entered.wait()  # the first ACK is stored and waits for the slave, the second is not stored
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0
        slave.gate.set()
        assert await acking == [None, None]
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0
        assert await pop(broker, "G", "T") == []


class GatedBridge:
    """An escape bridge whose writes wait for ``gate`` (a slow link to the other group's master)."""

    def __init__(self):
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def put_to_specific_queue(self, msg, routes=None):
        from pocketmq.cluster.escape import EscapeResult, EscapeTarget

        self.entered.set()
        await self.gate.wait()
        return EscapeResult(True, EscapeTarget("b", "b:0", 0))


async def test_a_change_on_the_acting_slave_keeps_revive_off_the_old_ck_while_its_new_ck_escapes(tmp_path):
    from pocketmq.broker.acting_progress import ActingProgress

    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 1)
        [(_, handle)] = await pop(broker, "G", "T", invisible_ms=INVISIBLE_MS)  # a CK of the replica
        bridge = GatedBridge()
        broker.write_path.use(acting_path(bridge, ActingProgress(tmp_path / "acting.json")))
        clock.advance(INVISIBLE_MS)
        changing = asyncio.ensure_future(broker.pop.change_invisible("G", handle, 30_000))
        await bridge.entered.wait()  # the new CK is on its way to the other group
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0  # the old CK is not handed back meanwhile
        bridge.gate.set()
        await changing
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0  # closed by the change's ack
        assert broker.store.get_messages("%RETRY%G_T", 0, 0, 10).records == []


def _dead_letters(broker) -> list:
    return broker.store.get_messages("%DLQ%G", 0, 0, 10).messages() if broker.topics.get("%DLQ%G") else []


async def test_a_forward_to_the_dlq_and_revive_never_both_write_a_copy(tmp_path):
    """Revive picked the CK first (its retry copy is being written): the forward is refused and writes no dead
    letter. The forward holds the CK first (its dead letter is being written): the revive pass leaves it alone.
    Before, the forward checked the handle, then wrote the dead letter after a read, and a revive pass in
    between wrote the retry copy too."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 2)
        [(_, revived_first), (_, forwarded_first)] = await pop(broker, "G", "T", invisible_ms=INVISIBLE_MS)
        assert await broker.pop.ack("G", [forwarded_first]) == [None]  # one message per CK below
        gated = GatedStore(broker.store)
        broker.pop.revive.writes._store = gated
        clock.advance(INVISIBLE_MS)
        revive = asyncio.ensure_future(broker.pop.revive.run_once(clock.now_ms()))
        await gated.entered.wait()  # the pass picked the CK and is writing its retry copy
        with pytest.raises(InvalidReceiptHandleError):
            await broker.pop.forward_to_dead_letter("G", revived_first)
        gated.gate.set()
        assert await revive == 1
        assert _dead_letters(broker) == []

        [(msg, handle)] = await pop(broker, "G", "T")  # the retry copy, attempt 2
        assert msg.body == b"m0"
        gated = GatedStore(broker.store)
        broker.pop.writes._store = gated  # the dead letter waits: the forward holds the CK meanwhile
        clock.advance(INVISIBLE_MS)
        forward = asyncio.ensure_future(broker.pop.forward_to_dead_letter("G", handle))
        await gated.entered.wait()
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0  # held: no retry copy
        gated.gate.set()
        await forward
        assert [m.body for m in _dead_letters(broker)] == [b"m0"]
        clock.advance(3_600_000)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0  # acked: never a retry copy after
        assert await pop(broker, "G", "T") == []
