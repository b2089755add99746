"""FIFO pop of one queue against a model: per message group, one in flight and strict order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.pop.orderly import Candidate, OrderlyQueue

INVISIBLE_MS = 50
MAX_ATTEMPTS = 3


@given(
    st.lists(st.sampled_from("abc"), min_size=1, max_size=30),
    st.lists(st.tuples(st.sampled_from(["pop", "ack", "tick", "reload"]), st.integers(0, 100)), max_size=80),
)
def test_groups_stay_in_order_with_one_in_flight(groups, ops):
    candidates = [Candidate(i, g) for i, g in enumerate(groups)]
    queue = OrderlyQueue()
    now_ms = 0
    delivered_first: list[int] = []  # offsets in order of their first delivery
    in_flight: dict[int, int] = {}  # offset -> invisible until
    done: set[int] = set()

    def pop():
        selection = queue.select(candidates, now_ms, INVISIBLE_MS, max_count=4, max_attempts=MAX_ATTEMPTS)
        for offset, attempt in selection.deliver:
            group = groups[offset]
            # every earlier message of the group is done
            assert all(o in done for o in range(offset) if groups[o] == group)
            # no other message of the group is in flight
            assert not any(groups[o] == group and until > now_ms for o, until in in_flight.items())
            if attempt == 1:
                delivered_first.append(offset)
            in_flight[offset] = now_ms + INVISIBLE_MS
        for offset, attempts in selection.dead_letters:
            assert attempts == MAX_ATTEMPTS
            assert queue.ack(offset), "the dead-letter path confirms like an ack"
            done.add(offset)
            in_flight.pop(offset, None)

    for op, arg in ops:
        if op == "pop":
            pop()
        elif op == "ack" and in_flight:
            offset = sorted(in_flight)[arg % len(in_flight)]
            assert queue.ack(offset)
            assert not queue.ack(offset), "a second ack of the same delivery is stale"
            done.add(offset)
            del in_flight[offset]
        elif op == "tick":
            now_ms += arg
        elif op == "reload":
            queue = OrderlyQueue.from_json(queue.to_json())
        assert queue.commit_offset == next(o for o in range(len(groups) + 1) if o not in done)
    for group in "abc":
        firsts = [o for o in delivered_first if groups[o] == group]
        assert firsts == sorted(firsts)


def test_expired_message_comes_back_with_its_attempt_counted_and_then_dead_letters():
    queue = OrderlyQueue()
    cands = [Candidate(0, "g"), Candidate(1, "g"), Candidate(2, "h")]
    first = queue.select(cands, 0, 100, 32, 2)
    assert first.deliver == [(0, 1), (2, 1)]
    assert queue.select(cands, 50, 100, 32, 2).deliver == []  # g and h are in flight
    assert queue.change_invisible(0, 50, 200) and queue.attempt_of(0) == 1
    assert queue.select(cands, 150, 100, 32, 2).deliver == [(2, 2)]
    again = queue.select(cands, 300, 100, 32, 2)
    assert again.deliver == [(0, 2)] and again.dead_letters == [(2, 2)]
    assert queue.ack(2) and queue.ack(0)
    assert queue.select(cands, 300, 100, 32, 2).deliver == [(1, 1)]
    assert queue.in_flight(300) == 1 and queue.commit_offset == 1


def test_skip_to_moves_past_filtered_messages():
    queue = OrderlyQueue()
    queue.select([Candidate(5, "g")], 0, 10, 1, 3)
    queue.skip_to(5)
    assert queue.commit_offset == 5 and queue.ack(5) and queue.commit_offset == 6
