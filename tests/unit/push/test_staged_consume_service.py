"""The staged consume service (client/staged_consume_service.py) against fake hooks: a rebalance drains a queue
before unlocking it (nothing more of it starts, its listeners in flight finish and count, offset and stage
record stored, before ``drain`` returns); ``consume_batch_size`` gives listener calls of several messages of
one stage; the context names the stage; malformed definitions are refused until a reload; a failing message
goes to the DLQ (dropped when broadcasting) after its retries and its stage completes."""

import asyncio
import logging
import threading

import pytest
from tests.unit.push.test_consume_services import MQ, FakeHooks, messages

from pocketmq.client.listener import ConsumeOrderlyStatus, StagedConcurrentListener
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.staged_consume_service import StagedConsumeService
from pocketmq.testing.polling import eventually


class Blocking(StagedConcurrentListener):
    def __init__(self):
        self.release = threading.Event()
        self.started: list[int] = []

    def stage_definitions(self, strategy=None):
        return [3]

    def consume_message(self, msgs, context):
        self.started.append(msgs[0].queue_offset)
        assert self.release.wait(5)
        return ConsumeOrderlyStatus.SUCCESS


class Records:
    def __init__(self):
        self.written = []

    async def read(self, mq):
        return None

    async def write(self, mq, record):
        self.written.append(record)


async def test_drain_waits_for_listeners_in_flight_and_starts_nothing_more():
    hooks, listener, records = FakeHooks(), Blocking(), Records()
    service = StagedConsumeService(hooks, listener, records, threads=8)
    pq = ProcessQueue()
    batch = messages(5)
    pq.add(batch)
    service.submit(pq, MQ, batch)
    await eventually(lambda: len(listener.started) == 3)  # stage 0; 3 and 4 wait for it
    drain = asyncio.ensure_future(service.drain(MQ))
    await asyncio.sleep(0.05)  # give a wrong drain the chance to return early
    assert not drain.done()
    listener.release.set()
    await asyncio.wait_for(drain, 5)
    assert hooks.offsets[-1] == 3  # the three completions counted before the queue is given up
    assert records.written[-1].commit_offset == 3 and records.written[-1].stage_offsets == {("", ""): 3}
    assert sorted(listener.started) == [0, 1, 2]  # the next stage did not start on the old owner
    await service.shutdown()


class Batches(StagedConcurrentListener):
    def __init__(self):
        self.calls: list[list[int]] = []

    def stage_definitions(self, strategy=None):
        return [3, 4]

    def consume_message(self, msgs, context):
        self.calls.append([m.queue_offset for m in msgs])
        return ConsumeOrderlyStatus.SUCCESS


def submit(service: StagedConsumeService, batch) -> None:
    pq = ProcessQueue()
    pq.add(batch)
    service.submit(pq, MQ, batch)


async def committed(hooks: FakeHooks, offset: int) -> None:
    await eventually(lambda: hooks.offsets and hooks.offsets[-1] == offset)


async def test_batches_of_consume_batch_size_within_one_stage():
    hooks, listener = FakeHooks(), Batches()
    service = StagedConsumeService(hooks, listener, Records(), threads=1, batch_size=3)
    submit(service, messages(10))
    await committed(hooks, 10)
    assert listener.calls == [[0, 1, 2], [3, 4, 5], [6], [7, 8, 9]]  # one thread: calls run one after another
    await service.shutdown()


class Failing(StagedConcurrentListener):
    """Stages [2, 2]; offset 1 always fails; records (offset, strategy, stage index, reconsume times)."""

    def __init__(self, definitions=(2, 2)):
        self.definitions = list(definitions)
        self.calls: list[tuple[int, str | None, int, int]] = []

    def stage_definitions(self, strategy=None):
        return self.definitions

    def consume_message(self, msgs, context):
        msg = msgs[0]
        self.calls.append((msg.queue_offset, context.strategy_id, context.stage_index, msg.reconsume_times))
        context.suspend_current_queue_time_ms = 1
        return (
            ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            if msg.queue_offset == 1
            else ConsumeOrderlyStatus.SUCCESS
        )


@pytest.mark.parametrize("broadcasting", [False, True])
async def test_a_failing_message_leaves_after_its_retries_and_its_stage_completes(broadcasting):
    hooks, listener = FakeHooks(broadcasting=broadcasting), Failing()
    service = StagedConsumeService(hooks, listener, Records(), threads=4, max_reconsume_times=3)
    submit(service, messages(4))
    await committed(hooks, 4)
    assert [rt for offset, _, _, rt in listener.calls if offset == 1] == [0, 1, 2, 3]  # 1 + 3 retries
    assert hooks.sent_back == ([] if broadcasting else [(1, -1)])  # the DLQ level
    assert {(offset, stage) for offset, _, stage, _ in listener.calls} == {(0, 0), (1, 0), (2, 1), (3, 1)}
    assert all(strategy == "" for _, strategy, _, _ in listener.calls)
    await service.shutdown()


def test_a_staged_service_needs_a_bounded_retry_limit():
    with pytest.raises(ValueError):
        StagedConsumeService(FakeHooks(), Failing(), Records(), max_reconsume_times=-1)


async def test_malformed_definitions_are_refused_until_a_reload_reads_valid_ones(caplog):
    hooks, listener = FakeHooks(), Failing([2, -1])
    service = StagedConsumeService(hooks, listener, Records(), threads=4)
    with caplog.at_level(logging.ERROR, logger="pocketmq.client.staged_consume_service"):
        submit(service, messages(4, start=2))  # offset 1 (the failing one) is not among them
        await asyncio.sleep(0.05)  # give a wrong service the chance to start them
    assert listener.calls == []
    assert "event=stage_definitions_refused strategy='' definitions=[2, -1]" in caplog.text
    assert "stage sizes must be positive integers" in caplog.text
    listener.definitions = [1, 3]
    service.reload_definitions()
    await committed(hooks, 6)
    assert sorted((offset, stage) for offset, _, stage, _ in listener.calls) == [(2, 0), (3, 1), (4, 1), (5, 1)]
    await service.shutdown()
