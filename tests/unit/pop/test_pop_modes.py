"""Choosing the pop mode (broker/pop/mode.py) and the engine's dispatch to it: the pure rule and the pass order,
then over a real store in virtual time: FIFO wins over stages, the staged mode pops its pop retry topic the
normal way, a stage registration reaches a receive already long-polling, a batch ack across modes, the write path
swap reaches every mode."""

from __future__ import annotations

import asyncio

import pytest
from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.pop.fifo import ORDERLY_REVIVE_QUEUE_ID
from pocketmq.broker.pop.mode import ModeKind, choose_mode, is_fifo_handle
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.receive import PopRequest, visit_order
from pocketmq.common.errors import InvalidReceiptHandleError
from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.polling import eventually


@pytest.mark.parametrize(
    ("fifo", "staged", "mode"),
    [
        (False, False, ModeKind.NORMAL),
        (False, True, ModeKind.STAGED),
        (True, False, ModeKind.FIFO),
        (True, True, ModeKind.FIFO),  # a FIFO group keeps its message groups in order on a staged topic too
    ],
)
def test_choose_mode(fifo, staged, mode):
    assert choose_mode(fifo=fifo, staged=staged) is mode


def test_fifo_handles_name_the_orderly_revive_queue():
    handle = ReceiptHandle("T", 3, 1000, 5000, ORDERLY_REVIVE_QUEUE_ID, 0, "broker-a", 0, 3, 0)
    assert is_fifo_handle(handle)
    assert not is_fifo_handle(ReceiptHandle("T", 3, 1000, 5000, 2, 0, "broker-a", 0, 3, 0))


def test_visit_order_rotates_and_reads_the_retry_topic_first_every_fifth_turn():
    assert visit_order("T", [0, 1, 2], "R", [0], 0) == [("R", 0), ("T", 0), ("T", 1), ("T", 2)]
    assert visit_order("T", [0, 1, 2], "R", [0], 4) == [("T", 1), ("T", 2), ("T", 0), ("R", 0)]
    assert visit_order("T", [0, 1, 2], "R", [], 5) == [("T", 2), ("T", 0), ("T", 1)]  # no retry queue
    assert visit_order("T", [], "R", [0], 1) == [("R", 0)]  # outside the client's gray share


def offsets(got) -> list[int]:
    return sorted(m.queue_offset for m, _ in got)


async def test_a_fifo_group_pops_fifo_on_a_staged_topic(tmp_path):
    async with running_broker(tmp_path) as broker:
        broker.groups.create_or_update(SubscriptionGroupConfig("F", consume_message_orderly=True))
        await send(broker, "T", 4, group_of=lambda i: "ab"[i % 2])
        broker.pop.staged.register("F", "T", [1])
        got = await pop(broker, "F", "T")
        assert offsets(got) == [0, 1]  # one message per message group, not one per stage
        assert {h.revive_queue_id for _, h in got} == {ORDERLY_REVIVE_QUEUE_ID}


async def test_the_staged_mode_pops_its_retry_topic_the_normal_way(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 3)
        assert offsets(await pop(broker, "G", "T", 1, invisible_ms=1000)) == [0]
        clock.advance(1000)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 1  # m0 goes to the pop retry topic
        broker.pop.staged.register("G", "T", [1])
        got = await pop(broker, "G", "T", 32)
        # m1 (stage 0 of the new sequence) and m0 again from the retry topic, under its business topic
        assert sorted((m.body.decode(), m.reconsume_times, m.topic) for m, _ in got) == [
            ("m0", 1, "T"),
            ("m1", 0, "T"),
        ]
        assert await broker.pop.ack("G", [h for _, h in got]) == [None, None]
        assert offsets(await pop(broker, "G", "T", 32)) == [2]  # the ack ended stage 0


async def test_a_stage_registration_reaches_a_receive_already_waiting(tmp_path):
    async with running_broker(tmp_path) as broker:
        await send(broker, "T", 0)
        waiting = asyncio.ensure_future(pop(broker, "G", "T", 32, poll_ms=60_000))
        await eventually(lambda: broker.pop._waiters.waiting, message="the receive waits")  # it found nothing
        broker.pop.staged.register("G", "T", [1])
        await send(broker, "T", 3)
        assert offsets(await asyncio.wait_for(waiting, 10)) == [0]  # its next pass is a staged one


async def test_a_batch_ack_across_modes_answers_in_order(tmp_path):
    async with running_broker(tmp_path) as broker:
        await send(broker, "T", 2)
        await send(broker, "S", 2)
        await send(broker, "F", 2)
        broker.pop.staged.register("G", "S", [1])
        [(_, normal), (_, stale)] = await pop(broker, "G", "T")
        [(_, staged)] = await pop(broker, "G", "S")
        fifo = (await broker.pop.pop(PopRequest("G", "F", 1, 10_000, fifo=True))).delivered()[0][1]
        assert await broker.pop.ack("G", [stale]) == [None]
        outcome = await broker.pop.ack("G", [fifo, stale, staged, normal])
        assert outcome[0] is None and isinstance(outcome[1], InvalidReceiptHandleError) and outcome[2:] == [None, None]
        assert offsets(await pop(broker, "G", "S")) == [1]  # the staged ack ended stage 0
        assert await broker.pop.ack("G", [fifo]) != [None]  # each handle was acked by its own mode


async def test_swapping_the_write_path_reaches_every_mode(tmp_path):
    async with running_broker(tmp_path) as broker:
        local = broker.write_path.current
        await send(broker, "T", 1)
        broker.write_path.use(Refusing())
        with pytest.raises(RuntimeError, match="refused"):
            await pop(broker, "G", "T")  # the normal mode's CK goes through the new path
        broker.write_path.use(local)
        assert len(await pop(broker, "G", "T")) == 1  # nothing moved: the message is still there
        assert broker.pop.staged.writes is local.pop


class Refusing:
    """A write path whose pop part refuses every CK."""

    name = "refusing"

    def __init__(self):
        self.timer = self.revive = self.pop = self

    def forwardable(self, ck_key, queue_offset):
        return False

    async def checkpoint(self, queue, ck):
        raise RuntimeError("refused")
