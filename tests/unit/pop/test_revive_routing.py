"""Revive across brokers: CKs naming another broker group are read from that group (one reader per group),
with one read_many per (group, topic, queue) for a whole batch of CKs; a FAILED read's retry delay is the
floor of the rewrite; an open breaker postpones without RPCs; the ending writes a reference dead letter
naming the broker and the rewrite count. In process, virtual time, fake readers."""

from __future__ import annotations

import dataclasses

from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.pop.read_routing import ReaderRouter, unacked_by_queue
from pocketmq.cluster.breaker import BreakerBoard, BreakerSettings, BreakerState
from pocketmq.cluster.remote_reader import RemoteMessageReader, cut_short
from pocketmq.common.dead_letter_reference import REFERENCE_TOPIC, DeadLetterReference
from pocketmq.common.message import MessageExt
from pocketmq.common.read_result import FailureReason, ReadResult
from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.escaped_checkpoints import append_checkpoints, remote_checkpoints
from pocketmq.testing.fakes import FakeNameServer, hang_up

FAR = "far-group"


def ck(offsets, *, topic="T", queue_id=0, broker=FAR, acked=(), pop_time_ms=1000):
    c = PopCheckpoint.of_offsets(topic, "G", queue_id, list(offsets), pop_time_ms, 5000, broker)
    return c.with_acks(acked)


class FakeReader:
    """Answers from ``stored`` (offset -> body) or ``failure``; records every read_many call."""

    def __init__(self, stored: dict[int, bytes] | None = None, failure: ReadResult | None = None):
        self.stored = stored or {}
        self.failure = failure
        self.calls: list[tuple[str, int, list[int]]] = []

    async def read(self, topic, queue_id, queue_offset):
        return (await self.read_many(topic, queue_id, [queue_offset]))[queue_offset]

    async def read_many(self, topic, queue_id, queue_offsets):
        self.calls.append((topic, queue_id, list(queue_offsets)))
        if self.failure is not None:
            return dict.fromkeys(queue_offsets, self.failure)
        return {
            o: ReadResult.found(MessageExt(topic=topic, body=self.stored[o], queue_id=queue_id, queue_offset=o))
            for o in queue_offsets
        }


def test_unacked_offsets_are_grouped_by_broker_topic_and_queue():
    cks = [ck([0, 1, 2], acked=[1]), ck([2, 3]), ck([7], queue_id=1), ck([4], broker=""), ck([5], acked=[5])]
    assert unacked_by_queue(cks, "me") == {(FAR, "T", 0): [0, 2, 3], (FAR, "T", 1): [7], ("me", "T", 0): [4]}


def test_the_router_gives_the_local_reader_for_its_group_and_one_remote_reader_per_other_group():
    built = []
    local = FakeReader()

    def factory(name):
        built.append(name)
        return FakeReader()

    router = ReaderRouter("me", local, factory)
    assert router.for_broker("me") is local and router.for_broker("") is local
    assert router.for_broker("a") is router.for_broker("a") and router.for_broker("b") is not router.for_broker("a")
    assert built == ["a", "b"]


async def test_one_read_many_per_queue_and_raising_or_silent_readers_give_failed_reads():
    remote = FakeReader({o: b"m%d" % o for o in range(10)})
    router = ReaderRouter("me", FakeReader(), lambda name: remote)
    cks = [ck([0, 1]), ck([2, 3], pop_time_ms=2000), ck([5], queue_id=1)]
    reads = await router.read_unacked(cks)
    assert sorted(remote.calls) == [("T", 0, [0, 1, 2, 3]), ("T", 1, [5])]
    assert reads[router.key_of(cks[1])][3].message.body == b"m3"

    class Raising(FakeReader):
        async def read_many(self, topic, queue_id, queue_offsets):
            raise OSError("boom")

    class Silent(FakeReader):
        async def read_many(self, topic, queue_id, queue_offsets):
            return {}

    for reader in (Raising(), Silent()):
        reads = await ReaderRouter("me", FakeReader(), lambda name, r=reader: r).read_unacked([ck([4])])
        result = reads[(FAR, "T", 0)][4]
        assert (result.failure, result.need_retry) == (FailureReason.EXCEPTION, True)


def test_a_reply_cut_short_is_continued_after_its_last_record():
    found = ReadResult.found(MessageExt(topic="T", body=b""))
    hole = ReadResult.failed(FailureReason.OFFSET_MISMATCH, "not returned")
    assert cut_short({1: found, 2: hole, 3: found, 4: hole, 5: hole}) == [4, 5]
    assert cut_short({1: hole, 2: hole}) == []  # no record at all: a real failure


async def test_remote_messages_come_back_as_local_retry_copies_with_one_read_per_queue(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        remote = FakeReader({o: b"far%d" % o for o in range(64)})
        broker.pop.revive.readers = ReaderRouter(
            broker.broker_name, broker.pop.revive.readers.local, lambda name: remote
        )
        cks = remote_checkpoints(
            "T", "G", FAR, {0: list(range(40)), 1: list(range(24))}, pop_time_ms=clock.now_ms(), invisible_ms=5_000
        )
        # one revive queue: its batch of due CKs is what one read per queue covers
        await append_checkpoints(broker, [dataclasses.replace(c, revive_queue_id=0) for c in cks])
        clock.advance(5_000)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 3
        assert sorted((t, q, len(o)) for t, q, o in remote.calls) == [("T", 0, 40), ("T", 1, 24)]
        copies = broker.store.get_messages("%RETRY%G_T", 0, 0, 100).messages()
        assert sorted(m.body for m in copies) == sorted(
            [b"far%d" % o for o in range(40)] + [b"far%d" % o for o in range(24)]
        )
        assert {m.reconsume_times for m in copies} == {1}
        assert broker.pop.revive.metrics["retried"] == 64


async def test_an_open_breaker_postpones_every_ck_without_an_rpc_and_the_ending_references_the_broker(
    tmp_path, remoting, peers
):
    clock = ManualClock()
    far = await peers(hang_up)  # the far group's master, gone: every read fails to connect
    async with running_broker(tmp_path, clock, pop_ck_rewrite_backoff_ms=(1_000, 1_000, 1_000)) as broker:
        board = BreakerBoard(BreakerSettings(failure_threshold=2, cool_down_ms=30_000))
        names = FakeNameServer().group(FAR, {0: far.addr}, "c")
        reader = RemoteMessageReader(FAR, names, remoting, breakers=board, clock=clock)
        broker.pop.revive.readers = ReaderRouter(
            broker.broker_name, broker.pop.revive.readers.local, lambda name: reader
        )
        cks = remote_checkpoints(
            "T", "G", FAR, {q: [0, 1] for q in range(4)}, pop_time_ms=clock.now_ms(), invisible_ms=5_000
        )
        await append_checkpoints(broker, cks)
        clock.advance(5_000)
        await broker.pop.revive.run_once(clock.now_ms())
        # four queues: two RPCs open the breaker, the other two fail fast
        assert len(far.requests) == 2 and board.get(FAR).state is BreakerState.OPEN
        metrics = broker.pop.revive.metrics
        assert metrics["rewrites"] == 8 and metrics["dead_lettered"] == 0
        # every rewrite waits at least the remaining cool-down (the table says 1 s)
        wait_s = broker.metrics.get("pocketmq_pop_ck_rewrite_wait_seconds").sum(group="G")
        assert wait_s >= (4 * 5_000 + 4 * 30_000 - 1) / 1000
        waits = []
        for _ in range(200):  # 100 virtual seconds in 500 ms steps
            clock.advance(500)
            before = len(far.requests)
            await broker.pop.revive.run_once(clock.now_ms())
            waits.append(len(far.requests) - before)
        assert sum(waits) <= 100 // 30 + 1  # one probe per cool-down, not one RPC per message or queue
        metrics = broker.pop.revive.metrics  # totals as of now (the property is a snapshot)
        assert metrics["endings"] == 8 and metrics["dead_lettered"] == 8
        assert broker.store.get_messages("%DLQ%G", 0, 0, 100).messages() == []  # references are kept apart
        dead = broker.store.get_messages(REFERENCE_TOPIC, 0, 0, 100).messages()
        refs = [DeadLetterReference.of_message(m.properties, m.body) for m in dead]
        assert sorted((r.queue_id, r.queue_offset) for r in refs) == [(q, o) for q in range(4) for o in (0, 1)]
        assert {(r.broker_name, r.group, r.rewrite_count) for r in refs} == {(FAR, "G", 3)}
        assert {r.reason for r in refs} <= {FailureReason.BREAKER_OPEN.value, FailureReason.CONNECTION_REFUSED.value}
        assert all(m.properties["PMQ_DLQ_ORIGIN_BROKER"] == FAR for m in dead)


async def test_local_ck_reads_stay_local(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        remote = FakeReader(failure=ReadResult.failed(FailureReason.TIMEOUT))
        broker.pop.revive.readers = ReaderRouter(
            broker.broker_name, broker.pop.revive.readers.local, lambda name: remote
        )
        await send(broker, "T", 3)
        assert len(await pop(broker, "G", "T", invisible_ms=5_000)) == 3
        clock.advance(5_000)
        await broker.pop.revive.run_once(clock.now_ms())
        assert remote.calls == [] and broker.pop.revive.metrics["retried"] == 3
