"""Consume services against fake consumer hooks: ack_index, send-back failure retried locally, broadcasting
drops, orderly suspend and order; the process queue's committable offset."""

from pocketmq.client.consume_service import ConcurrentConsumeService, OrderlyConsumeService
from pocketmq.client.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, failed_indexes
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.common.namespace import Namespace
from pocketmq.testing.polling import eventually

MQ = MessageQueue("t", "broker-a", 0)


class FakeHooks:
    def __init__(self, broadcasting=False, send_back_ok=True):
        self.broadcasting = broadcasting
        self.namespace = Namespace()
        self.send_back_ok = send_back_ok
        self.sent_back: list[tuple[int, int]] = []  # (queue offset, level)
        self.offsets: list[int] = []

    async def send_back(self, msg, delay_level, mq):
        if self.send_back_ok:
            self.sent_back.append((msg.queue_offset, delay_level))
        return self.send_back_ok

    def offset_done(self, mq, offset):
        self.offsets.append(offset)

    async def ensure_locked(self, mq, pq):
        return True


def messages(n, start=0):
    return [MessageExt(topic="t", body=b"x%d" % i, queue_offset=i) for i in range(start, start + n)]


def test_failed_indexes_rules():
    ok, later = ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeConcurrentlyStatus.RECONSUME_LATER
    assert list(failed_indexes(ok, 2**62, 10)) == []
    assert list(failed_indexes(ok, 4, 10)) == [5, 6, 7, 8, 9]
    assert list(failed_indexes(ok, -1, 3)) == [0, 1, 2]
    assert list(failed_indexes(later, 4, 3)) == [0, 1, 2]
    assert list(failed_indexes(None, 4, 2)) == [0, 1]


async def test_ack_index_4_of_10_sends_back_exactly_5_to_9():
    hooks = FakeHooks()

    def listener(msgs, ctx):
        ctx.ack_index = 4
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    service = ConcurrentConsumeService(hooks, listener, threads=2, batch_size=10)
    pq = ProcessQueue()
    batch = messages(10)
    pq.add(batch)
    service.submit(pq, MQ, batch)
    await eventually(lambda: hooks.offsets)
    assert [offset for offset, _ in hooks.sent_back] == [5, 6, 7, 8, 9]
    assert hooks.offsets == [10] and pq.count == 0
    await service.shutdown()


async def test_failed_send_back_is_retried_locally_and_blocks_the_offset():
    hooks = FakeHooks(send_back_ok=False)
    calls = []

    def listener(msgs, ctx):
        calls.append((msgs[0].queue_offset, msgs[0].reconsume_times))
        ctx.delay_level_when_next_consume = 2
        first_time = sum(1 for c in calls if c[0] == msgs[0].queue_offset) == 1
        return (
            ConsumeConcurrentlyStatus.RECONSUME_LATER
            if msgs[0].queue_offset == 0 and first_time
            else ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        )

    service = ConcurrentConsumeService(hooks, listener, threads=1, batch_size=1, local_retry_delay_ms=50)
    pq = ProcessQueue()
    batch = messages(3)
    pq.add(batch)
    service.submit(pq, MQ, batch)
    await eventually(lambda: len(calls) == 4)
    assert sorted(calls) == [(0, 0), (0, 1), (1, 0), (2, 0)]  # message 0 again, with a local reconsume count
    await eventually(lambda: hooks.offsets and hooks.offsets[-1] == 3)
    assert all(offset == 0 for offset in hooks.offsets[:-1])  # never past message 0 until it was done
    await service.shutdown()


async def test_broadcasting_drops_failures():
    hooks = FakeHooks(broadcasting=True)
    service = ConcurrentConsumeService(hooks, lambda m, c: ConsumeConcurrentlyStatus.RECONSUME_LATER, threads=1)
    pq = ProcessQueue()
    batch = messages(2)
    pq.add(batch)
    service.submit(pq, MQ, batch)
    await eventually(lambda: hooks.offsets and hooks.offsets[-1] == 2)
    assert hooks.sent_back == [] and service.consumed_total == 2
    await service.shutdown()


async def test_listener_exception_counts_as_reconsume_later():
    hooks = FakeHooks()

    def boom(msgs, ctx):
        raise RuntimeError("user bug")

    service = ConcurrentConsumeService(hooks, boom, threads=1)
    pq = ProcessQueue()
    pq.add(messages(1))
    service.submit(pq, MQ, messages(1))
    await eventually(lambda: hooks.sent_back)
    assert hooks.sent_back == [(0, 0)]
    await service.shutdown()


async def test_orderly_keeps_order_and_suspends_on_failure():
    hooks = FakeHooks()
    seen = []

    def listener(msgs, ctx):
        seen.append((msgs[0].queue_offset, msgs[0].reconsume_times))
        if msgs[0].queue_offset == 1 and msgs[0].reconsume_times < 2:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    service = OrderlyConsumeService(hooks, listener, threads=4, suspend_ms=20)
    pq = ProcessQueue()
    pq.add(messages(4))
    service.submit(pq, MQ, [])
    await eventually(lambda: hooks.offsets and hooks.offsets[-1] == 4)
    assert seen == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0), (3, 0)]
    assert hooks.sent_back == []  # unlimited local retries by default, no send-back
    await service.shutdown()


async def test_orderly_dead_letters_after_max():
    hooks = FakeHooks()
    service = OrderlyConsumeService(
        hooks,
        lambda m, c: ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
        threads=1,
        suspend_ms=1,
        max_reconsume_times=2,
    )
    pq = ProcessQueue()
    pq.add(messages(1))
    service.submit(pq, MQ, [])
    await eventually(lambda: hooks.offsets)
    assert hooks.sent_back == [(0, -1)] and hooks.offsets == [1]
    await service.shutdown()


def test_process_queue_commit_offset():
    pq = ProcessQueue()
    assert pq.commit_offset() == -1
    batch = messages(5, start=10)
    pq.add(batch)
    assert pq.count == 5 and pq.size_bytes == sum(len(m.body) for m in batch)
    assert pq.remove([batch[1], batch[2]]) == 10
    assert pq.remove([batch[0]]) == 13
    assert pq.remove([batch[3], batch[4]]) == 15 and pq.size_bytes == 0
