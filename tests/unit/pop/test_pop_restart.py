"""A restart after pops whose consumer offsets were never saved (a kill -9 within one save interval): the CKs in
the revive queues move the pop offsets past what they cover, so nothing is popped twice."""

from __future__ import annotations

from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.pop.fifo import FifoPopState
from pocketmq.broker.pop.orderly import Candidate
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


async def test_a_fifo_ack_that_answered_is_kept_over_a_kill_9(tmp_path):
    """A FIFO ack answers once the FIFO state with it is on disk: a restart right after (the periodic save never
    ran) hands out only the message still in flight, after its invisible time, never the acked one."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        broker.groups.create_or_update(SubscriptionGroupConfig("F", consume_message_orderly=True))
        await send(broker, "T", 2, group_of=lambda i: "ab"[i])
        popped = await pop(broker, "F", "T", 32, INVISIBLE_MS)
        assert [body(m) for m, _ in popped] == ["m0", "m1"]
        assert await broker.pop.ack("F", [popped[0][1]]) == [None]
        broker.pop.fifo.persist = lambda: False  # nothing saved after the answer, as after a kill -9
    async with running_broker(tmp_path, clock) as broker:
        assert await pop(broker, "F", "T", 32, INVISIBLE_MS) == []  # m0 done, m1 in flight
        clock.advance(INVISIBLE_MS + 1)
        again = await pop(broker, "F", "T", 32, INVISIBLE_MS)
        assert [(body(m), m.reconsume_times) for m, _ in again] == [("m1", 1)]


def test_the_fifo_journal_is_merged_at_load_and_emptied_by_a_save(tmp_path):
    path = tmp_path / "pop_fifo.json"
    state = FifoPopState(path)
    state.load()
    queue = state.queue("g", "t", 0, 0)
    queue.select([Candidate(0, "a"), Candidate(1, "b"), Candidate(2, "c")], 0, 1000, 3, 5)
    state.persist()  # the file: all three in flight
    queue.ack(1)
    state.promised("g", "t", 0)  # journaled
    journal = path.with_name("pop_fifo.json.journal")
    with open(journal, "ab") as f:
        f.write(b'{"queues": {"g@t@0": {"comm')  # a line cut short by a power loss
    again = FifoPopState(path)
    again.load()
    assert again.find("g", "t", 0).to_json() == queue.to_json()  # 1 done, 0 and 2 in flight
    assert again.persist() and not journal.exists()
    with open(journal, "ab") as f:  # a line older than the file (a crash between the save and the unlink)
        f.write(b'{"queues": {"g@t@0": {"commit": 0, "done": [], "flight": {"1": [1, 1000]}}}}\n')
    reopened = FifoPopState(path)
    reopened.load()
    assert reopened.find("g", "t", 0).to_json() == queue.to_json()  # the merge is monotone: 1 stays done
