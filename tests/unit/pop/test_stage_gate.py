"""The broker's stage gate for staged POP (broker/pop/stage_gate.py): random definitions, pops by several
consumers, acks in random order, expiries and dead letters. No message of stage k+1 leaves before every
message of stage k is acked or dead-lettered; a whole stage can be out at once; everything ends done."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.pop.stage_gate import InFlight, current_stage_end, decide
from pocketmq.common.stages import stage_index

INVISIBLE_MS = 1000


class Queue:
    """A staged queue driven through ``decide`` the way StagedPop drives it."""

    def __init__(self, definitions, count, origin=0, max_attempts=3):
        self.definitions, self.count, self.origin, self.max_attempts = definitions, count, origin, max_attempts
        self.next_offset = origin
        self.in_flight: dict[int, InFlight] = {}
        self.done: set[int] = set()
        self.dead: set[int] = set()
        self.handed_out: list[int] = []

    def stage(self, offset):
        return stage_index(self.definitions, offset - self.origin)

    def pop(self, wanted, now_ms):
        while True:
            d = decide(
                self.definitions,
                self.origin,
                list(self.in_flight.values()),
                self.next_offset,
                now_ms,
                wanted,
                self.max_attempts,
            )
            if not d.dead_letters:
                break
            for offset in d.dead_letters:
                assert self.in_flight[offset].attempt + 2 > self.max_attempts
                del self.in_flight[offset]
                self.done.add(offset)
                self.dead.add(offset)
        if d.redeliver:
            assert not set(d.redeliver) - set(self.in_flight)
            out = list(d.redeliver)
            for offset in out:
                assert self.in_flight[offset].deadline_ms <= now_ms
                self.in_flight[offset] = InFlight(offset, now_ms + INVISIBLE_MS, d.redeliver_attempt)
        else:
            out = list(range(d.fresh_from, min(d.fresh_end, self.count + self.origin)))
            for offset in out:
                self.in_flight[offset] = InFlight(offset, now_ms + INVISIBLE_MS, 0)
            self.next_offset = max(self.next_offset, d.fresh_from + len(out))
        for offset in out:
            earlier = [o for o in range(self.origin, offset) if self.stage(o) < self.stage(offset)]
            assert all(o in self.done for o in earlier), f"{offset} left before its earlier stages were done"
        self.handed_out += out
        return out

    def ack(self, offset):
        del self.in_flight[offset]
        self.done.add(offset)


@given(
    definitions=st.lists(st.integers(1, 6), max_size=5),
    count=st.integers(0, 40),
    origin=st.integers(0, 5),
    data=st.data(),
)
def test_no_later_stage_before_the_stage_is_done(definitions, count, origin, data):
    queue = Queue(definitions, count, origin)
    now_ms = 0
    for _ in range(400):
        if len(queue.done) == count:
            break
        action = data.draw(st.sampled_from(["pop", "ack", "ack", "wait"]))
        if action == "pop":
            queue.pop(data.draw(st.integers(1, 8)), now_ms)
        elif action == "ack" and queue.in_flight:
            queue.ack(data.draw(st.sampled_from(sorted(queue.in_flight))))
        else:
            now_ms += data.draw(st.sampled_from([10, INVISIBLE_MS]))
    # Drain: acks of whatever is out, then pops, until done (liveness).
    for _ in range(4 * count + 4):
        for offset in list(queue.in_flight):
            queue.ack(offset)
        queue.pop(32, now_ms)
    assert queue.done == set(range(origin, origin + count))


@given(definitions=st.lists(st.integers(1, 10), min_size=1, max_size=5), data=st.data())
def test_a_whole_stage_can_be_out_at_once(definitions, data):
    count = sum(definitions) + 5
    queue = Queue(definitions, count)
    for stage, size in enumerate(definitions):
        start = sum(definitions[:stage])
        # several consumers asking for one at a time each get one, until the stage is all out
        out = [queue.pop(1, 0) for _ in range(size)]
        assert sorted(o for got in out for o in got) == list(range(start, start + size))
        assert queue.pop(1, 0) == []  # nothing of the next stage while the stage is in flight
        for offset in data.draw(st.permutations(range(start, start + size))):
            queue.ack(offset)
    assert queue.pop(32, 0) == list(range(sum(definitions), count))  # the unbounded last stage


def test_expired_message_comes_back_in_place_and_holds_the_next_stage():
    queue = Queue([2, 2], 4, max_attempts=3)
    assert queue.pop(8, 0) == [0, 1]
    queue.ack(0)
    assert queue.pop(8, 500) == []  # 1 is still invisible: stage 1 waits
    assert queue.pop(8, 1000) == [1]  # expired: again, in place
    assert queue.in_flight[1].attempt == 1
    assert queue.pop(8, 1500) == []
    assert queue.pop(8, 2000) == [1]  # the third and last attempt
    assert queue.pop(8, 3000) == [2, 3]  # past the max attempts: dead-lettered, the next stage goes
    assert queue.dead == {1}


def test_messages_in_flight_before_the_origin_come_first():
    assert current_stage_end([3], 10, 7) == 10
    assert current_stage_end([3], 10, 10) == 13
    assert current_stage_end([3], 10, 13) == float("inf")
    # a restart of the sequence at 10 while 8 is in flight: nothing of the new stage 0 until 8 is done
    d = decide([3], 10, [InFlight(8, 5000, 0)], 10, 0, 8, 3)
    assert d.fresh_end <= d.fresh_from


def test_an_offset_in_flight_sets_the_next_offset():
    """After a kill -9 the consumer offset may lag the CKs: never hand out an in-flight message as new."""
    d = decide([10], 0, [InFlight(4, 5000, 0)], 2, 0, 8, 3)
    assert d.fresh_from == 5 and d.fresh_end == 10
