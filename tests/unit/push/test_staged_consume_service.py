"""The staged consume service (client/staged_consume_service.py) against fake hooks: a rebalance drains a queue
before unlocking it (nothing more of it starts, its listeners in flight finish and count, offset and stage
record stored, before ``drain`` returns); ``consume_batch_size`` gives listener calls of several messages of
one stage."""

import asyncio
import threading

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


async def test_batches_of_consume_batch_size_within_one_stage():
    hooks, listener = FakeHooks(), Batches()
    service = StagedConsumeService(hooks, listener, Records(), threads=1, batch_size=3)
    pq = ProcessQueue()
    batch = messages(10)
    pq.add(batch)
    service.submit(pq, MQ, batch)
    await eventually(lambda: hooks.offsets and hooks.offsets[-1] == 10)
    assert listener.calls == [[0, 1, 2], [3, 4, 5], [6], [7, 8, 9]]  # one thread: calls run one after another
    await service.shutdown()
