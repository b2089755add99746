"""A restart after pops whose consumer offsets were never saved (a kill -9 within one save interval): the CKs in
the revive queues move the pop offsets past what they cover, so nothing is popped twice."""

from __future__ import annotations

from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.runtime.clock import ManualClock

INVISIBLE_MS = 10_000


def body(msg) -> str:
    return msg.body.decode()


async def pop_all(broker, group: str, topic: str) -> list:
    """Pop until a pop hands out nothing (the retry topic is read on some pops only)."""
    got: list = []
    while batch := await pop(broker, group, topic, 32, INVISIBLE_MS):
        got += batch
    return got


def never_save_offsets(broker) -> None:
    """From here on the consumer offsets stay as last saved, as after a kill -9."""
    broker.offsets.take = lambda: None


async def test_pops_whose_offsets_were_not_saved_are_not_popped_again(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 6, queues=2)
        first = await pop(broker, "G", "T", 2, INVISIBLE_MS)  # revived below: copies in the pop retry topic
        assert len(first) == 2
        clock.advance(INVISIBLE_MS + 1)
        await broker.pop.revive.run_once(clock.now_ms())
        await broker.pop.persist_state()
        never_save_offsets(broker)
        popped = await pop_all(broker, "G", "T")
        assert sorted(body(m) for m, _ in popped) == sorted(f"m{i}" for i in range(6))
        assert {m.reconsume_times for m, _ in popped} == {0, 1}  # from the topic and from its pop retry topic
    async with running_broker(tmp_path, clock) as broker:
        assert await pop_all(broker, "G", "T") == []  # their CKs are open: revive hands them back, not a pop
        clock.advance(INVISIBLE_MS + 1)
        await broker.pop.revive.run_once(clock.now_ms())
        again = await pop_all(broker, "G", "T")
        assert sorted(body(m) for m, _ in again) == sorted(f"m{i}" for i in range(6))  # each once
