"""What a returning master takes back from its acting slave, pure: the FIFO POP state merge (done wins, the
later delivery wins, an older copy changes nothing), staged-POP registrations added only where missing, and
the handover body carrying both."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.acting_progress import ActingProgress, parse_snapshot
from pocketmq.broker.pop.fifo import FifoPopState
from pocketmq.broker.pop.orderly import Candidate, OrderlyQueue
from pocketmq.broker.pop.staged import PopStageRegistry, StagedTopic

INVISIBLE_MS = 50


def _queue(obj: dict) -> OrderlyQueue:
    return OrderlyQueue.from_json(obj)


def test_done_wins_over_in_flight_and_the_later_delivery_wins():
    master = _queue({"commit": 2, "done": [4], "flight": {"2": [1, 1000], "3": [1, 1000], "5": [1, 1000]}})
    slave = _queue({"commit": 3, "done": [5], "flight": {"3": [2, 900], "6": [1, 2000]}})
    master.merge(slave)
    # 2 acked on the slave (its commit), 5 acked there, 3 redelivered there (attempt 2), 6 popped there
    assert master.to_json() == {"commit": 3, "done": [4, 5], "flight": {"3": [2, 900], "6": [1, 2000]}}


def test_an_acked_prefix_moves_the_commit_offset():
    master = _queue({"commit": 0, "done": [], "flight": {"0": [1, 10], "1": [1, 10]}})
    master.merge(_queue({"commit": 0, "done": [0, 1], "flight": {}}))
    assert master.to_json() == {"commit": 2, "done": [], "flight": {}}


OPS = st.lists(st.tuples(st.sampled_from(["pop", "ack", "tick"]), st.integers(0, 100)), max_size=60)


def _run(queue: OrderlyQueue, candidates, ops, now_ms: int) -> int:
    for op, n in ops:
        if op == "pop":
            queue.select(candidates, now_ms, INVISIBLE_MS, max_count=3, max_attempts=5)
        elif op == "ack":
            flight = sorted(int(o) for o in queue.to_json()["flight"])
            if flight:
                queue.ack(flight[n % len(flight)])
        else:
            now_ms += n
    return now_ms


@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=20), OPS, OPS)
def test_merging_an_older_copy_of_the_same_history_gives_the_newer_state(groups, before, after):
    """The handover case: the master's state is the one the slave started from (or older), the slave's went on."""
    candidates = [Candidate(i, g) for i, g in enumerate(groups)]
    queue = OrderlyQueue()
    now_ms = _run(queue, candidates, before, 0)
    older = copy.deepcopy(queue)
    older_json = older.to_json()
    _run(queue, candidates, after, now_ms)
    newer = queue.to_json()
    older.merge(queue)
    assert older.to_json() == newer  # the master takes exactly the slave's state
    queue.merge(_queue(older_json))
    assert queue.to_json() == newer  # and a stale copy merged into the newer state changes nothing


def test_the_fifo_state_merges_queue_by_queue_and_counts_changes(tmp_path):
    state = FifoPopState(tmp_path / "pop_fifo.json")
    state.load()
    state.queue("g", "t", 0, 0).select([Candidate(0, "a")], 0, 1000, 1, 5)
    theirs = {
        ("g", "t", 0): _queue({"commit": 1, "done": [], "flight": {}}),
        ("g", "t", 1): _queue({"commit": 4, "done": [], "flight": {"4": [1, 99]}}),
    }
    assert state.merge(theirs) == 2 and state.persist()
    assert state.merge(theirs) == 0 and not state.persist()
    again = FifoPopState(tmp_path / "pop_fifo.json")
    again.load()
    again.load()  # once only: a second load does not undo a merge made in between
    assert again.to_json() == state.to_json()
    assert again.find("g", "t", 0).commit_offset == 1 and again.find("g", "t", 1).attempt_of(4) == 1


def test_stage_registrations_are_added_where_missing_never_overwritten(tmp_path):
    registry = PopStageRegistry(tmp_path / "pop_stages.json")
    registry.put("g", "t", StagedTopic([2, 4], {0: 10}))
    theirs = {("g", "t"): StagedTopic([9], {0: 99, 1: 20}), ("g", "new"): StagedTopic([3], {0: 0})}
    assert registry.merge_missing(theirs) == 2
    assert registry.get("g", "t") == StagedTopic([2, 4], {0: 10, 1: 20})  # its own definitions and origin stay
    assert registry.get("g", "new") == StagedTopic([3], {0: 0})
    assert registry.merge_missing(theirs) == 0


def test_the_handover_body_carries_the_fifo_state_and_the_registrations(tmp_path):
    fifo = FifoPopState(tmp_path / "pop_fifo.json")
    fifo.queue("g", "t", 0, 3)
    registry = PopStageRegistry(tmp_path / "pop_stages.json")
    registry.put("g", "s", StagedTopic([2], {0: 1}))
    body = ActingProgress(tmp_path / "acting.json").snapshot({}, fifo.to_json(), registry.to_json())
    handover = parse_snapshot(body)
    assert handover.pop_fifo[("g", "t", 0)].commit_offset == 3
    assert handover.pop_stages == {("g", "s"): StagedTopic([2], {0: 1})}
    older = parse_snapshot(ActingProgress(tmp_path / "acting.json").snapshot({}))  # an older slave sends neither
    assert older.pop_fifo == {} and older.pop_stages == {}


def test_registrations_changed_while_acting_are_kept_handed_back_and_replace_the_master_s(tmp_path):
    """The slave's registry tells the side file of every change while it acts; the master takes those over its
    own entries (a registration again, an unregistration), and what the slave did not change stays the master's."""
    master = PopStageRegistry(tmp_path / "master.json")
    master.put("g", "again", StagedTopic([2], {0: 0}))
    master.put("g", "gone", StagedTopic([2], {0: 0}))
    master.put("g", "kept", StagedTopic([5], {0: 7}))
    slave = PopStageRegistry(tmp_path / "slave.json")
    slave.replace({key: master.get(*key) for key in (("g", "again"), ("g", "gone"))})  # one sync behind "kept"
    progress = ActingProgress(tmp_path / "acting.json")
    slave.watch(progress.record_stages)
    slave.put("g", "again", StagedTopic([3, 3], {0: 4}))
    slave.put("g", "again", StagedTopic([3, 3], {0: 4, 1: 0}))  # its second queue first seen: the last change counts
    slave.put("g", "gone", None)
    slave.watch(None)
    slave.put("g", "after", StagedTopic([1], {0: 0}))  # not acting any more: not kept
    restarted = ActingProgress(tmp_path / "acting.json")  # saved at once: a kill -9 of the slave keeps them
    restarted.load()
    assert len(restarted) == 2

    handover = parse_snapshot(restarted.snapshot({}, None, slave.to_json()))
    assert handover.stage_changes == {("g", "again"): StagedTopic([3, 3], {0: 4, 1: 0}), ("g", "gone"): None}
    assert master.apply_changes(handover.stage_changes) == 2
    assert master.merge_missing(handover.pop_stages) == 1  # "after", which the master lacks
    assert master.get("g", "again") == StagedTopic([3, 3], {0: 4, 1: 0})
    assert master.get("g", "gone") is None
    assert master.get("g", "kept") == StagedTopic([5], {0: 7})  # the slave never had it: the master's stays
    assert master.apply_changes(handover.stage_changes) == 0
    assert restarted.applied(handover.version) == 2 and len(restarted) == 0


def test_a_deleted_group_s_registrations_are_removals_for_the_watcher(tmp_path):
    registry = PopStageRegistry(tmp_path / "pop_stages.json")
    registry.put("g", "a", StagedTopic([1], {}))
    registry.put("h", "b", StagedTopic([1], {}))
    seen = []
    registry.watch(lambda key, staged: seen.append((key, staged)))
    registry.remove_group("g")
    assert seen == [(("g", "a"), None)]
