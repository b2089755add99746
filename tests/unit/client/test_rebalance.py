"""Rebalance strategies: every queue exactly once, sizes within one, gray split and fallback."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.client.rebalance import (
    ConsistentHashAllocator,
    GrayAllocator,
    allocate_averagely,
    allocate_averagely_by_circle,
    gray_queues,
    is_gray_client,
)
from pocketmq.common.message import MessageQueue

queue_lists = st.lists(
    st.builds(MessageQueue, st.just("T"), st.sampled_from(["a", "b", "c"]), st.integers(0, 15)),
    max_size=40,
    unique=True,
)
client_ids = st.lists(
    st.from_regex(r"10\.0\.0\.[0-9]{1,3}@[0-9]{1,5}(@gray)?", fullmatch=True), max_size=8, unique=True
)
STRATEGIES = [
    allocate_averagely,
    allocate_averagely_by_circle,
    ConsistentHashAllocator(),
    GrayAllocator(ratio=0.25),
    GrayAllocator(retry_split=True),
]


def flatten(assignment):
    return [q for qs in assignment.values() for q in qs]


@given(queue_lists, client_ids, st.sampled_from(STRATEGIES))
def test_every_queue_exactly_once(queues, ids, strategy):
    assignment = strategy(queues, ids)
    assert set(assignment) == set(ids)
    if ids:
        assert sorted(map(str, flatten(assignment))) == sorted(map(str, queues))


@given(queue_lists, client_ids, st.sampled_from([allocate_averagely, allocate_averagely_by_circle]))
def test_average_sizes_within_one(queues, ids, strategy):
    sizes = [len(v) for v in strategy(queues, ids).values()]
    if sizes:
        assert max(sizes) - min(sizes) <= 1


@given(queue_lists, client_ids)
def test_same_answer_whatever_the_input_order(queues, ids):
    for strategy in STRATEGIES:
        assert strategy(queues, ids) == strategy(list(reversed(queues)), list(reversed(ids)))


@given(queue_lists, client_ids.filter(lambda ids: len(ids) >= 2))
def test_consistent_hash_moves_only_the_leavers_queues(queues, ids):
    allocator = ConsistentHashAllocator()
    before = allocator(queues, ids)
    after = allocator(queues, ids[1:])
    for cid in ids[1:]:
        assert set(before[cid]) <= set(after[cid])


@given(queue_lists, client_ids, st.sampled_from([0.1, 0.25, 0.5, 1.0]))
def test_gray_clients_get_only_gray_queues_while_any_normal_client_exists(queues, ids, ratio):
    assignment = GrayAllocator(ratio=ratio)(queues, ids)
    gray = gray_queues(queues, ratio)
    grays = [c for c in ids if is_gray_client(c)]
    normals = [c for c in ids if not is_gray_client(c)]
    if grays and normals:
        for cid in grays:
            assert set(assignment[cid]) <= gray
        for cid in normals:
            assert not set(assignment[cid]) & gray
    if not grays:
        assert assignment == allocate_averagely(queues, ids)


def test_gray_queues_are_the_last_of_each_broker():
    queues = [MessageQueue("T", b, i) for b in "ab" for i in range(8)]
    gray = gray_queues(queues, 0.25)
    assert gray == {MessageQueue("T", b, i) for b in "ab" for i in (6, 7)}
    assert gray_queues(queues, 0.0) == set()
