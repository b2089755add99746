"""The pure stage scheduler (client/stages.py): stage order, concurrency inside a stage, failures held back,
independent sequences, the concurrent and orderly equivalences, and durable records at the commit point."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.client.stages import (
    PLAIN_CONCURRENT,
    QueueStageScheduler,
    StageOffsetRecord,
    stage_end,
    stage_index,
)

KEY = ("s", "g")


def scheduler_for(definitions, initial=None):
    return QueueStageScheduler(lambda strategy: definitions, initial)


def run(definitions, count, pool, choices, *, fail_first=frozenset(), key=KEY):
    """Drive a scheduler to the end; ``choices`` picks which running message finishes next. Returns the event
    log [(event, offset, running_count)] and the maximum running count per stage."""
    sched = scheduler_for(definitions)
    for offset in range(count):
        sched.add(offset, key)
    running: list[int] = []
    failed_once: set[int] = set()
    events = []
    peak: dict[int, int] = {}
    now_ms = 0
    step = 0
    while True:
        for offset in sched.ready(pool - len(running), now_ms):
            running.append(offset)
            events.append(("start", offset))
        for offset in running:
            stage = stage_index(definitions, offset)
            peak[stage] = max(peak.get(stage, 0), len(running))
        if not running:
            if sched.pending_count == 0:
                return events, peak
            now_ms = sched.next_retry_ms()  # only held-back failures are left: time passes
            continue
        offset = running.pop(choices[step % len(choices)] % len(running))
        step += 1
        if offset in fail_first and offset not in failed_once:
            failed_once.add(offset)
            sched.fail(offset, now_ms + 10)
            events.append(("fail", offset))
        else:
            sched.complete(offset)
            events.append(("done", offset))


def assert_stage_order(definitions, events):
    done: set[int] = set()
    for event, offset in events:
        if event == "done":
            done.add(offset)
        elif event == "start":
            stage = stage_index(definitions, offset)
            earlier = [o for o in range(offset) if stage_index(definitions, o) < stage]
            assert all(o in done for o in earlier), f"offset {offset} of stage {stage} started early"


definitions_st = st.lists(st.integers(1, 8), max_size=5)


@settings(max_examples=150, deadline=None)
@given(
    definitions_st,
    st.integers(0, 40),
    st.integers(1, 6),
    st.lists(st.integers(0, 50), min_size=1, max_size=30),
    st.sets(st.integers(0, 40), max_size=5),
)
def test_stage_order_and_concurrency_inside_stages(definitions, count, pool, choices, failing):
    events, peak = run(definitions, count, pool, choices, fail_first=failing)
    assert_stage_order(definitions, events)
    assert sorted(o for e, o in events if e == "done") == list(range(count))
    bounds = [0, *itertools.accumulate(definitions)]
    for stage in range(len(definitions) + 1):
        lo = bounds[stage] if stage < len(bounds) else bounds[-1]
        hi = bounds[stage + 1] if stage + 1 < len(bounds) else count
        size = max(0, min(hi, count) - lo)
        if size:  # every stage reaches min(pool, its size) running at once when it opens
            assert peak[stage] >= min(pool, size)
        assert all(v <= pool for v in peak.values())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(1, 8), st.lists(st.integers(0, 50), min_size=1, max_size=20))
def test_empty_definitions_behave_like_concurrent(count, pool, choices):
    sched = scheduler_for([])
    for offset in range(count):
        sched.add(offset, KEY)
    assert sched.ready(pool, 0) == list(range(min(pool, count)))  # as many as the pool takes, at once
    events, _ = run([], count, pool, choices)
    assert sorted(o for e, o in events if e == "done") == list(range(count))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(1, 8),
    st.lists(st.integers(0, 50), min_size=1, max_size=20),
    st.sets(st.integers(0, 30), max_size=4),
)
def test_all_ones_behave_like_orderly(count, pool, choices, failing):
    events, peak = run([1] * count, count, pool, choices, fail_first=failing)
    assert max(peak.values()) == 1
    assert [o for e, o in events if e == "done"] == list(range(count))  # one at a time, in offset order


def test_failure_holds_back_the_next_stage_not_its_own():
    sched = scheduler_for([3, 2])
    for offset in range(6):
        sched.add(offset, KEY)
    assert sched.ready(10, 0) == [0, 1, 2]
    sched.fail(0, retry_at_ms=100)
    sched.complete(1)
    assert sched.ready(10, 50) == []  # 2 still runs, 0 waits: stage 1 must not start
    sched.complete(2)
    assert sched.ready(10, 50) == []
    assert sched.next_retry_ms() == 100
    assert sched.ready(10, 100) == [0]  # retried locally
    sched.complete(0)
    assert sched.ready(10, 100) == [3, 4]


def test_sequences_of_one_queue_are_independent():
    sched = QueueStageScheduler(lambda strategy: {"a": [1, 1], "b": [2]}[strategy])
    sched.add(0, ("a", "x"))
    sched.add(1, ("a", "x"))
    sched.add(2, ("a", "y"))
    sched.add(3, ("b", "x"))
    sched.add(4, ("b", "x"))
    sched.add(5, ("b", "x"))
    sched.add(6, PLAIN_CONCURRENT)
    assert sched.ready(10, 0) == [0, 2, 3, 4, 6]  # 1 waits for 0; 5 waits for stage [3, 4]
    sched.complete(0)
    assert sched.ready(10, 0) == [1]


def test_record_at_commit_point_and_restore():
    sched = scheduler_for([2, 3])
    for offset in range(100, 105):
        sched.add(offset, KEY)
    sched.ready(10, 0)
    sched.complete(101)  # 100 still runs: the commit offset stays at 100
    assert sched.advance_commit(100) == StageOffsetRecord(100, {KEY: 0})
    sched.complete(100)
    assert sched.advance_commit(102) == StageOffsetRecord(102, {KEY: 2})
    # a restart from the record re-delivers 102.. with the same sequence numbers: stage 1 may start at once
    restored = scheduler_for([2, 3], {KEY: 2})
    for offset in range(102, 105):
        restored.add(offset, KEY)
    assert restored.ready(10, 0) == [102, 103, 104]
    assert StageOffsetRecord.from_json(StageOffsetRecord(7, {KEY: 3, ("t", None): 1}).to_json()) == StageOffsetRecord(
        7, {KEY: 3, ("t", None): 1}
    )


def test_reset_hook_replaces_the_starting_stage_offset():
    sched = QueueStageScheduler(lambda s: [1, 1, 1], {KEY: 0}, reset=lambda key, offset: 3)
    sched.add(0, KEY)
    sched.add(1, KEY)
    assert sched.ready(10, 0) == [0, 1]  # sequence numbers 2 and 3: the unbounded last stage


def test_stage_arithmetic():
    assert stage_end([10, 20, 70], 0) == 10
    assert stage_end([10, 20, 70], 10) == 30
    assert stage_end([10, 20, 70], 100) == float("inf")
    assert [stage_index([2, 1], s) for s in range(5)] == [0, 0, 1, 2, 2]


@settings(max_examples=150, deadline=None)
@given(
    definitions_st,
    st.integers(0, 40),
    st.integers(1, 4),
    st.integers(1, 5),
    st.lists(st.integers(0, 50), min_size=1, max_size=30),
)
def test_batches_keep_stage_order_and_stay_inside_one_stage(definitions, count, calls, batch_size, choices):
    """``consume_batch_size``: at most ``calls`` listener calls at once, each of at most ``batch_size`` messages
    of one stage; stage order holds per message and every message ends done once."""
    sched = scheduler_for(definitions)
    for offset in range(count):
        sched.add(offset, KEY)
    running: list[list[int]] = []
    events = []
    step = 0
    while sched.pending_count or running:
        for batch in sched.ready_batches(calls - len(running), batch_size, 0):
            assert 1 <= len(batch) <= batch_size
            assert len({stage_index(definitions, o) for o in batch}) == 1, f"batch {batch} spans stages"
            running.append(batch)
            events += [("start", o) for o in batch]
        assert len(running) <= calls
        batch = running.pop(choices[step % len(choices)] % len(running))
        step += 1
        for offset in batch:
            sched.complete(offset)
            events.append(("done", offset))
    assert_stage_order(definitions, events)
    assert sorted(o for e, o in events if e == "done") == list(range(count))


def test_a_batch_fills_up_to_its_size_within_the_stage():
    sched = scheduler_for([3, 4])
    for offset in range(10):
        sched.add(offset, KEY)
    assert sched.ready_batches(5, 2, 0) == [[0, 1], [2]]  # stage 0 only, in calls of two
    for offset in (0, 1, 2):
        sched.complete(offset)
    assert sched.ready_batches(1, 3, 0) == [[3, 4, 5]]  # one call left: the rest waits for the next round
    assert sched.ready_batches(1, 3, 0) == [[6]]


class Definitions:
    """Definitions that a test changes between reloads; records the reset hook's calls."""

    def __init__(self, definitions, reset_to=None):
        self.definitions, self.reset_to = definitions, reset_to
        self.resets: list[tuple[tuple, int]] = []

    def __call__(self, strategy):
        return self.definitions

    def reset(self, key, offset):
        self.resets.append((key, offset))
        return self.reset_to


def test_changed_definitions_are_taken_at_reload_with_the_reset_hook_each_time():
    given = Definitions([2, 2])
    sched = QueueStageScheduler(given, reset=given.reset)
    for offset in range(6):
        sched.add(offset, KEY)
    assert sched.ready(10, 0) == [0, 1]
    assert given.resets == [(KEY, 0)]  # first seen
    assert sched.reload() == []  # unchanged: no hook
    sched.complete(0)
    sched.complete(1)
    given.definitions = [2, 1]  # stage 1 is now one message long
    assert sched.reload() == [KEY]
    assert given.resets == [(KEY, 0), (KEY, 2)]  # asked again, with the stage offset now
    assert sched.ready(10, 0) == [2]
    assert sched.place(2) == (KEY, 1)
    sched.complete(2)
    given.definitions = [1]
    sched.reload()
    assert given.resets[-1] == (KEY, 3)  # every change, not only the first


def test_a_reset_on_change_renumbers_the_sequence_and_its_record():
    given = Definitions([1, 1, 1, 1])
    sched = QueueStageScheduler(given, reset=given.reset)
    for offset in range(10, 16):
        sched.add(offset, KEY)
    for offset in (10, 11, 12):  # orderly: one at a time
        assert sched.ready(10, 0) == [offset]
        sched.complete(offset)
    assert sched.advance_commit(13) == StageOffsetRecord(13, {KEY: 3})
    given.definitions, given.reset_to = [2, 2], 0  # a new sale: the waiting messages are its first
    sched.reload()
    assert sched.ready(10, 0) == [13, 14]  # sequence numbers 0 and 1: stage 0 of the new definitions
    assert sched.place(13) == (KEY, 0)
    assert sched.advance_commit(13) == StageOffsetRecord(13, {KEY: 0})  # a restart numbers 13 as 0 again
    sched.complete(13)
    sched.complete(14)
    assert sched.ready(10, 0) == [15] and sched.place(15) == (KEY, 1)


def test_refused_definitions_hold_their_sequence_until_a_reload_gives_valid_ones():
    given = Definitions(None)  # the caller refused them
    sched = QueueStageScheduler(given, reset=given.reset)
    sched.add(0, KEY)
    sched.add(1, PLAIN_CONCURRENT)
    assert sched.ready(10, 0) == [1]  # other sequences go on
    assert given.resets == []  # nothing taken yet
    sched.reload()
    assert sched.ready(10, 0) == []
    given.definitions = [1]
    assert sched.reload() == [KEY]
    assert sched.ready(10, 0) == [0] and given.resets == [(KEY, 0)]
    given.definitions = None  # refused later: the sequence keeps the definitions it has
    assert sched.reload() == []
    sched.complete(0)
    sched.add(2, KEY)
    assert sched.ready(10, 0) == [2]
