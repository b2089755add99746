"""Typed reads in revive: NOT_FOUND means done (no rewrite); FAILED with need_retry rewrites the CK on the
backoff schedule and, past its end, dead-letters a reference carrying the reason. Virtual time."""

from __future__ import annotations

import json

from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.pop.copies import DLQ_REASON
from pocketmq.broker.pop.reader import LocalMessageReader
from pocketmq.common.dead_letter_reference import REFERENCE_TOPIC, STATE_GONE, fold
from pocketmq.common.read_result import (
    FailureReason,
    NotFoundCause,
    ReadResult,
    ReadStatus,
)
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import GetResult, GetStatus

BACKOFF_MS = (1_000, 2_000, 4_000)


class FailingReader:
    """Every read fails with a passing reason; counts the reads and when they happened."""

    def __init__(self, clock: ManualClock):
        self.clock = clock
        self.read_times_ms: list[int] = []

    async def read(self, topic, queue_id, queue_offset) -> ReadResult:
        self.read_times_ms.append(self.clock.now_ms())
        return ReadResult.failed(FailureReason.TIMEOUT, "broker did not answer")

    async def read_many(self, topic, queue_id, queue_offsets) -> dict[int, ReadResult]:
        return {offset: await self.read(topic, queue_id, offset) for offset in queue_offsets}


class RaisingStore:
    def get_messages(self, *args, **kwargs):
        raise OSError("disk on fire")


class RetentionStore:
    def get_messages(self, topic, queue_id, queue_offset, max_count, **kwargs):
        return GetResult(GetStatus.OFFSET_TOO_SMALL, next_begin_offset=100, min_offset=100, max_offset=120)


async def test_local_reader_maps_store_answers():
    removed = await LocalMessageReader(RetentionStore()).read("T", 0, 5)
    assert removed.status is ReadStatus.NOT_FOUND and removed.not_found_cause is NotFoundCause.BELOW_MIN_OFFSET
    raised = await LocalMessageReader(RaisingStore()).read("T", 0, 5)
    assert raised.status is ReadStatus.FAILED and raised.need_retry and raised.failure is FailureReason.EXCEPTION


async def test_message_gone_is_done_without_rewrite(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        broker.pop.revive.readers.local = LocalMessageReader(RetentionStore())
        await send(broker, "T", 3)
        assert len(await pop(broker, "G", "T")) == 3
        clock.advance(10_001)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 1
        metrics = broker.pop.revive.metrics
        assert metrics["not_found"] == 3 and metrics["rewrites"] == 0 and metrics["retried"] == 0
        clock.advance(3_600_000)
        assert await broker.pop.revive.run_once(clock.now_ms()) == 0  # closed for good


async def test_failed_reads_rewrite_on_schedule_then_dead_letter_with_reason(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, pop_ck_rewrite_backoff_ms=BACKOFF_MS) as broker:
        reader = broker.pop.revive.readers.local = FailingReader(clock)
        await broker.pop.references.stop()  # its passes are driven by hand below
        await send(broker, "T", 1)
        await pop(broker, "G", "T", invisible_ms=10_000)
        popped_at = clock.now_ms()
        for _ in range(200):  # step virtual time by 100 ms; revive only acts when a CK is due
            clock.advance(100)
            await broker.pop.revive.run_once(clock.now_ms())
        waits = [t - popped_at for t in reader.read_times_ms]
        assert waits == [10_000, 11_000, 13_000, 17_000]  # invisible time, then each backoff step
        metrics = broker.pop.revive.metrics
        assert metrics["rewrites"] == 3 and metrics["endings"] == 1 and metrics["dead_lettered"] == 1
        assert broker.store.get_messages("%DLQ%G", 0, 0, 10).messages() == []  # references are kept apart
        [dead] = broker.store.get_messages(REFERENCE_TOPIC, 0, 0, 10).messages()
        assert dead.properties[DLQ_REASON] == "TIMEOUT"
        assert json.loads(dead.body) == {
            "topic": "T",
            "queueId": 0,
            "queueOffset": 0,
            "broker": broker.broker_name,
            "group": "G",
            "reason": "TIMEOUT",
            "description": "broker did not answer",
            "rewriteCount": 3,
        }
        assert dead.properties["PMQ_DLQ_REFERENCE"] == "true" and dead.properties["PMQ_DLQ_REWRITE_COUNT"] == "3"

        # once the message can be read, its real dead letter goes to %DLQ%G and the reference closes
        references = broker.pop.references
        assert await references.run_once() == 0 and len(references.open_references()) == 1  # still failing
        broker.pop.revive.readers.local = LocalMessageReader(broker.store)
        assert await references.run_once() == 1 and references.open_references() == []
        [real] = broker.store.get_messages("%DLQ%G", 0, 0, 10).messages()
        assert (real.body, real.properties[DLQ_REASON], real.properties["DLQ_ORIGIN_TOPIC"]) == (b"m0", "TIMEOUT", "T")
        assert "PMQ_DLQ_REFERENCE" not in real.properties
        assert await references.run_once() == 0  # closed for good: no second dead letter
        assert len(broker.store.get_messages("%DLQ%G", 0, 0, 10).messages()) == 1


class GoneReader:
    """The message was removed meanwhile (retention): every read is NOT_FOUND."""

    async def read_many(self, topic, queue_id, queue_offsets) -> dict[int, ReadResult]:
        return dict.fromkeys(queue_offsets, ReadResult.not_found(NotFoundCause.BELOW_MIN_OFFSET, "retention"))


async def test_a_reference_to_a_message_gone_meanwhile_closes_as_gone_without_a_dead_letter(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, pop_ck_rewrite_backoff_ms=(1_000,)) as broker:
        broker.pop.revive.readers.local = FailingReader(clock)
        references = broker.pop.references
        await references.stop()  # its passes are driven by hand below
        await send(broker, "T", 1)
        await pop(broker, "G", "T", invisible_ms=1_000)
        for _ in range(30):
            clock.advance(100)
            await broker.pop.revive.run_once(clock.now_ms())
        assert len(references.open_references()) == 1
        broker.pop.revive.readers.local = GoneReader()
        assert await references.run_once() == 1 and references.open_references() == []
        [state] = fold(broker.store.get_messages(REFERENCE_TOPIC, 0, 0, 10).messages()).values()
        assert (state.state, state.outcome) == (STATE_GONE, "BELOW_MIN_OFFSET: retention")
        assert broker.store.get_messages("%DLQ%G", 0, 0, 10).messages() == []
