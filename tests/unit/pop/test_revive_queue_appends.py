"""A revive queue's ledger learns of the CK and ACK records the queue itself appends without reading them back,
and only when that is what a catch-up would have read: in order, nothing skipped."""

from __future__ import annotations

import pytest

from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.pop.revive_queue import ReviveQueue, checkpoint_message
from pocketmq.store.api import StoreConfig
from pocketmq.store.message_store import MessageStore

pytestmark = pytest.mark.timeout(60)
REVIVE_TOPIC = "rmq_sys_REVIVE_LOG_test"


@pytest.fixture
async def store(tmp_path):
    store = MessageStore(StoreConfig(data_dir=tmp_path / "store"))
    store.start()
    yield store
    await store.shutdown()


def ck(start: int, count: int = 2, revive_queue_id: int = 0) -> PopCheckpoint:
    offsets = list(range(start, start + count))
    return PopCheckpoint.of_offsets("T", "G", 0, offsets, 1_000, 60_000, "b", revive_queue_id)


def state(queue: ReviveQueue) -> tuple:
    ledger = queue.ledger
    opened = sorted((c.key, c.ack_bitmap) for c in ledger.open_of_queue("G", "T", 0))
    return ledger.next_offset, ledger.commit_offset(), opened, dict(queue.popped_to)


async def test_its_own_appends_reach_the_ledger_at_once_as_a_catch_up_would_read_them(store):
    queue = ReviveQueue(store, REVIVE_TOPIC, 0, "b", 0)
    first, second = ck(0), ck(2)
    await queue.append([first, second])
    assert queue.ledger.is_open(first.key) and queue.ledger.is_open(second.key)
    await queue.append([first.ack_of([0])])  # one of two messages acked: still open
    assert queue.ledger.open_checkpoint(first.key).ack_bitmap == 0b01
    await queue.append([first.ack_of([1]), second.ack_of([2, 3])])  # both closed
    assert not queue.ledger.is_open(first.key) and not queue.ledger.is_open(second.key)
    assert queue.catch_up() == 0  # nothing left to read back

    reread = ReviveQueue(store, REVIVE_TOPIC, 0, "b", 0)  # as after a restart: everything read from the store
    assert reread.catch_up() == 5  # two CKs, three ACKs
    assert state(reread) == state(queue)


async def test_a_record_appended_by_someone_else_first_leaves_the_rest_to_the_catch_up_in_order(store):
    queue = ReviveQueue(store, REVIVE_TOPIC, 0, "b", 0)
    foreign = ck(0)
    await store.put_messages([checkpoint_message(REVIVE_TOPIC, foreign)])  # e.g. a record replicated here
    own = ck(2)
    await queue.append([own, foreign.ack_of([0, 1])])
    assert queue.ledger.next_offset == 0 and not queue.ledger.is_open(own.key)  # not read past a gap
    assert queue.catch_up() == 3
    assert queue.ledger.is_open(own.key) and not queue.ledger.is_open(foreign.key)
    await queue.append([own.ack_of([2])])  # caught up again: fed at once
    assert queue.ledger.open_checkpoint(own.key).ack_bitmap == 0b01 and queue.catch_up() == 0


async def test_a_ck_naming_another_revive_queue_is_left_to_the_catch_up(store):
    queue = ReviveQueue(store, REVIVE_TOPIC, 0, "b", 0)
    elsewhere = ck(0, revive_queue_id=1)
    await queue.append([elsewhere])  # its message goes to revive queue 1, not this one
    assert queue.ledger.next_offset == 0 and queue.catch_up() == 0
    other = ReviveQueue(store, REVIVE_TOPIC, 1, "b", 0)
    assert other.catch_up() == 1 and other.ledger.is_open(elsewhere.key)
